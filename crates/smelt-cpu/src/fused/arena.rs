//! One run's scratch memory: zero-initialized bytes aligned to [`ARENA_ALIGN`].

use smelt_ir::kernel::ARENA_ALIGN;

/// Units of the arena's storage: 16 bytes, the alignment the allocator gives zeroed
/// memory for free (`calloc`); the arena starts at the first 64-byte boundary in it.
type Unit = u128;
const UNIT: usize = std::mem::size_of::<Unit>();
const _: () = assert!(ARENA_ALIGN.is_multiple_of(UNIT));

/// A type of the arena's alignment, for the base of an empty arena.
#[repr(C, align(64))]
struct Aligned([u8; ARENA_ALIGN]);
const _: () = assert!(std::mem::align_of::<Aligned>() == ARENA_ALIGN);

/// Scratch memory of one run: intermediates live at their plan's byte offsets.
/// A thread running a plan needs its own arena; one arena serves many runs.
pub struct Arena {
    /// Zeroed storage, one 64-byte block more than the arena so it can start aligned.
    raw: Vec<Unit>,
    /// Units before the aligned start.
    start: usize,
    /// Bytes of the arena (a multiple of [`ARENA_ALIGN`]).
    len: usize,
}

impl Arena {
    /// An arena of at least `bytes` bytes, zero-filled.
    pub fn new(bytes: usize) -> Arena {
        let mut a = Arena {
            raw: Vec::new(),
            start: 0,
            len: 0,
        };
        a.reserve(bytes);
        a
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the arena holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Grows the arena (zero-filled) to hold at least `bytes` bytes.
    pub fn reserve(&mut self, bytes: usize) {
        let len = bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        if len <= self.len {
            return;
        }
        // Zeroed by the allocator: a large one is fresh pages the kernel zeroes on first
        // touch, not pages written with zeros here, so huge pages can still be asked for
        // before the first run touches them (the first run's faults then map 2 MiB each).
        let mut raw: Vec<Unit> = vec![0; (len + ARENA_ALIGN) / UNIT];
        let addr = raw.as_ptr() as usize;
        let start = (ARENA_ALIGN - addr % ARENA_ALIGN) % ARENA_ALIGN / UNIT;
        smelt_kernels::buf::advise_huge_pages_bytes(raw[start..].as_mut_ptr().cast(), len);
        smelt_kernels::buf::populate_bytes(raw[start..].as_mut_ptr().cast(), len);
        let old = self.len / UNIT;
        raw[start..start + old].copy_from_slice(&self.raw[self.start..self.start + old]);
        (self.raw, self.start, self.len) = (raw, start, len);
    }

    /// The first byte (aligned to [`ARENA_ALIGN`]).
    pub(crate) fn base(&mut self) -> *mut u8 {
        if self.raw.is_empty() {
            // Nothing lives in an empty arena; its base is still aligned.
            return std::ptr::NonNull::<Aligned>::dangling().as_ptr().cast();
        }
        self.raw[self.start..].as_mut_ptr() as *mut u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_kept_when_grown() {
        let mut a = Arena::new(100);
        assert_eq!(a.len(), 128);
        let p = a.base();
        assert_eq!(p as usize % ARENA_ALIGN, 0);
        // SAFETY: the arena holds 128 bytes at `p`.
        unsafe {
            assert!((0..128).all(|i| *p.add(i) == 0));
            *p.add(5) = 7;
        }
        a.reserve(10_000);
        assert_eq!(a.len(), 10_048);
        let p = a.base();
        assert_eq!(p as usize % ARENA_ALIGN, 0);
        // SAFETY: the arena now holds 10_048 bytes at `p`.
        unsafe {
            assert_eq!(*p.add(5), 7);
            assert!((6..10_048).all(|i| *p.add(i) == 0));
        }
        let mut e = Arena::new(0);
        assert!(e.is_empty());
        assert_eq!(e.base() as usize % ARENA_ALIGN, 0);
    }
}
