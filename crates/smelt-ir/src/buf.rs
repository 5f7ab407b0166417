//! Shared element storage: a [`Buf`] is either an owned vector or a window onto bytes
//! someone else holds (a memory-mapped artifact), behind an `Arc` either way, so cloning a
//! tensor (a graph, a plan) shares its elements instead of copying them. Writing through a
//! shared or mapped buffer copies it first (copy on write).

use crate::{ensure, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// Bytes that stay at one address, unchanged, for as long as the object lives.
///
/// # Safety
/// `bytes` must return the same slice (address, length, contents) on every call for the
/// object's whole life: windows onto it are read without further checks.
pub unsafe trait Backing: Send + Sync {
    /// The bytes.
    fn bytes(&self) -> &[u8];

    /// Says the bytes will not be read for a while: a file mapping may drop its pages from
    /// memory, to be read again from the file on the next access. The default keeps them.
    fn release(&self) {}

    /// Says bytes `offset .. offset + len` will be read soon: a file mapping may map
    /// their pages now, in one call, instead of one fault each. The default does nothing.
    fn prefetch(&self, _offset: usize, _len: usize) {}
}

/// Element types whose every bit pattern is a valid value and that have no padding, so a
/// window of aligned bytes can be read as them.
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

// SAFETY: plain numbers (and arrays of them): no padding, every bit pattern valid.
unsafe impl Pod for f32 {}
unsafe impl Pod for f64 {}
unsafe impl Pod for half::f16 {}
unsafe impl Pod for half::bf16 {}
unsafe impl Pod for i8 {}
unsafe impl Pod for i16 {}
unsafe impl Pod for i32 {}
unsafe impl Pod for i64 {}
unsafe impl Pod for u8 {}
unsafe impl Pod for u16 {}
unsafe impl Pod for u32 {}
unsafe impl Pod for u64 {}
unsafe impl Pod for [f32; 2] {}
unsafe impl Pod for [f64; 2] {}

/// The bytes of a slice of plain elements (what an artifact writer stores).
pub fn pod_bytes<T: Pod>(v: &[T]) -> &[u8] {
    // SAFETY: T has no padding (Pod), so every byte of the slice is initialized.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// A 64-byte block, the unit of [`AlignedBytes`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// Owned bytes whose start is 64-byte aligned (an artifact read into memory, not mapped).
pub struct AlignedBytes {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedBytes {
    /// A copy of `b`, allocated fallibly within the running thread's limits.
    pub fn copy_of(b: &[u8]) -> Result<AlignedBytes> {
        let n = b.len().div_ceil(64);
        let mut lines = crate::limits::try_vec(n, Line([0; 64]), &|| format!("{} bytes", b.len()))?;
        for (l, c) in lines.iter_mut().zip(b.chunks(64)) {
            l.0[..c.len()].copy_from_slice(c);
        }
        Ok(AlignedBytes {
            lines,
            len: b.len(),
        })
    }
}

// SAFETY: the vector is never touched after construction, so its bytes stay put.
unsafe impl Backing for AlignedBytes {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `lines` holds at least `len` initialized bytes (Line is plain bytes).
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }
}

enum Repr<T> {
    Owned(Arc<Vec<T>>),
    Window {
        _owner: Arc<dyn Backing>,
        ptr: *const T,
        len: usize,
    },
}

/// Elements of one type, owned or a window onto shared bytes; cheap to clone.
pub struct Buf<T> {
    repr: Repr<T>,
}

// SAFETY: a Buf hands out `&[T]` to many threads (T: Sync) and moves owned elements between
// threads (T: Send); a window's pointer targets bytes its `Backing` keeps alive and unchanged.
unsafe impl<T: Send + Sync> Send for Buf<T> {}
unsafe impl<T: Send + Sync> Sync for Buf<T> {}

impl<T> Buf<T> {
    /// Owned elements.
    pub fn from_vec(v: Vec<T>) -> Buf<T> {
        Buf {
            repr: Repr::Owned(Arc::new(v)),
        }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        match &self.repr {
            Repr::Owned(v) => v,
            // SAFETY: checked at construction: in bounds, aligned, and the owner is alive.
            Repr::Window { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }

    /// Whether the elements are a window onto bytes held elsewhere (a mapped file).
    pub fn is_window(&self) -> bool {
        matches!(self.repr, Repr::Window { .. })
    }

    /// Whether two buffers share their elements (the same storage, not just equal).
    pub fn shares_with(&self, other: &Buf<T>) -> bool {
        let (a, b) = (self.as_slice(), other.as_slice());
        std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len()
    }
}

impl<T: Pod> Buf<T> {
    /// `len` elements at byte `offset` of `owner`'s bytes; an error when they do not fit
    /// or are not aligned for `T`.
    pub fn window(owner: Arc<dyn Backing>, offset: usize, len: usize) -> Result<Buf<T>> {
        let bytes = owner.bytes();
        let size = len.checked_mul(std::mem::size_of::<T>());
        let end = size.and_then(|s| offset.checked_add(s));
        ensure!(
            end.is_some_and(|e| e <= bytes.len()),
            InvalidModel,
            "{len} elements at byte {offset} do not fit in {} bytes",
            bytes.len()
        );
        // In bounds, so the addition stays inside the allocation.
        let ptr = bytes.as_ptr().wrapping_add(offset);
        ensure!(
            (ptr as usize).is_multiple_of(std::mem::align_of::<T>()),
            InvalidModel,
            "elements at byte {offset} are not aligned to {} bytes",
            std::mem::align_of::<T>()
        );
        Ok(Buf {
            repr: Repr::Window {
                ptr: ptr.cast::<T>(),
                len,
                _owner: owner,
            },
        })
    }
}

impl<T: Clone> Buf<T> {
    /// The elements as a vector: moved out when this is their only owner, copied otherwise.
    pub fn into_vec(self) -> Vec<T> {
        match self.repr {
            Repr::Owned(v) => Arc::try_unwrap(v).unwrap_or_else(|v| (*v).clone()),
            Repr::Window { .. } => self.as_slice().to_vec(),
        }
    }

    /// The elements for writing, copied first unless this is their only owner.
    pub fn make_mut(&mut self) -> &mut Vec<T> {
        if let Repr::Window { .. } = self.repr {
            self.repr = Repr::Owned(Arc::new(self.as_slice().to_vec()));
        }
        match &mut self.repr {
            Repr::Owned(v) => Arc::make_mut(v),
            Repr::Window { .. } => unreachable!("replaced by an owned copy above"),
        }
    }
}

impl<T> Clone for Buf<T> {
    fn clone(&self) -> Self {
        Buf {
            repr: match &self.repr {
                Repr::Owned(v) => Repr::Owned(v.clone()),
                Repr::Window { _owner, ptr, len } => Repr::Window {
                    _owner: _owner.clone(),
                    ptr: *ptr,
                    len: *len,
                },
            },
        }
    }
}

impl<T> Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Clone> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.make_mut()
    }
}

impl<T> Default for Buf<T> {
    fn default() -> Self {
        Buf::from_vec(Vec::new())
    }
}

impl<T> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Self {
        Buf::from_vec(v)
    }
}

impl<T> FromIterator<T> for Buf<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Buf::from_vec(iter.into_iter().collect())
    }
}

impl<T: fmt::Debug> fmt::Debug for Buf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl<T: PartialEq> PartialEq for Buf<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Serialize> Serialize for Buf<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Buf<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Vec::<T>::deserialize(d).map(Buf::from_vec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_and_writes_copy() {
        let a = Buf::from_vec(vec![1.0f32, 2.0, 3.0]);
        let mut b = a.clone();
        assert!(a.shares_with(&b));
        b[0] = 9.0;
        assert!(!a.shares_with(&b));
        assert_eq!(a.as_slice(), &[1.0, 2.0, 3.0]);
        assert_eq!(b.as_slice(), &[9.0, 2.0, 3.0]);
        // The only owner writes in place.
        let p = b.as_ptr();
        b[1] = 7.0;
        assert_eq!(b.as_ptr(), p);
    }

    #[test]
    fn windows_check_bounds_and_alignment() {
        let mut raw = vec![0u8; 96];
        raw[64..68].copy_from_slice(&1.5f32.to_ne_bytes());
        let owner: Arc<dyn Backing> = Arc::new(AlignedBytes::copy_of(&raw).unwrap());
        let w = Buf::<f32>::window(owner.clone(), 64, 8).unwrap();
        assert!(w.is_window());
        assert_eq!(w[0], 1.5);
        assert_eq!(w.len(), 8);
        assert!(Buf::<f32>::window(owner.clone(), 64, 9).is_err());
        assert!(Buf::<f32>::window(owner.clone(), 2, 1).is_err());
        assert!(Buf::<f32>::window(owner.clone(), usize::MAX, 1).is_err());
        assert!(Buf::<f64>::window(owner.clone(), 8, usize::MAX / 4).is_err());
        // Writing copies the window out; the bytes behind it stay as they were.
        let mut m = w.clone();
        m[0] = 2.0;
        assert!(!m.is_window());
        assert_eq!(w[0], 1.5);
        assert_eq!(w.into_vec().len(), 8);
    }
}
