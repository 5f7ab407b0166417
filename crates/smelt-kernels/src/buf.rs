//! Cache-line-aligned f32 storage, and per-thread scratch that is allocated once and reused.

use std::cell::RefCell;

/// Floats per 64-byte cache line.
const LINE: usize = 16;

/// A zero-initialized f32 buffer whose first element sits on a 64-byte boundary.
#[derive(Clone, Default)]
pub struct AlignedBuf {
    raw: Vec<f32>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zeros, aligned.
    pub fn zeros(len: usize) -> AlignedBuf {
        let mut b = AlignedBuf::default();
        b.resize(len);
        b
    }

    /// Grows (never shrinks) the storage to hold `len` floats; new contents are zero,
    /// old contents are kept only when no reallocation was needed.
    pub fn resize(&mut self, len: usize) {
        if self.raw.len() < len + LINE {
            self.raw = vec![0.0; len + LINE];
            let addr = self.raw.as_ptr() as usize;
            self.start = (LINE - (addr / 4) % LINE) % LINE;
            advise_huge_pages(&mut self.raw);
            populate_bytes(self.raw.as_mut_ptr().cast(), self.raw.len() * 4);
        }
        self.len = len;
    }

    /// Number of floats.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no float.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The floats.
    pub fn as_slice(&self) -> &[f32] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The floats, for writing.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.raw[self.start..self.start + self.len]
    }

    /// Bytes held (capacity included), for memory reports.
    pub fn bytes(&self) -> usize {
        self.raw.len() * 4
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} floats)", self.len)
    }
}

/// Asks Linux to back a large buffer with 2 MiB pages where it can (transparent huge
/// pages in `madvise` mode): packed weights and scratch are streamed, and 4 KiB pages would
/// miss the TLB on every few panels. Smaller buffers and other systems are left alone.
pub fn advise_huge_pages(v: &mut [f32]) {
    advise_huge_pages_bytes(v.as_mut_ptr().cast(), std::mem::size_of_val(v));
}

/// [`advise_huge_pages`] for any allocation: `ptr .. ptr + bytes` must be one live allocation.
pub fn advise_huge_pages_bytes(ptr: *mut u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    const MADV_HUGEPAGE: i32 = 14;
    if bytes >= 2 * HUGE {
        // Only how the kernel backs the pages changes, never their contents; failure (no
        // THP support) is harmless.
        advise_aligned(ptr, bytes, HUGE, MADV_HUGEPAGE);
    }
}

/// Maps every page of `ptr .. ptr + bytes` (one live, writable allocation) now, in one
/// call, instead of one fault per page on first touch: a fault costs microseconds in a
/// VM, and a plan's arena and scratch are written whole on the first run anyway. Small
/// buffers (under 64 KiB) are left alone; failure (a kernel before Linux 5.14) is
/// harmless.
pub fn populate_bytes(ptr: *mut u8, bytes: usize) {
    const MADV_POPULATE_WRITE: i32 = 23;
    if bytes >= 64 << 10 {
        // The pages are mapped as a write would map them; no byte changes.
        advise_aligned(ptr, bytes, 4096, MADV_POPULATE_WRITE);
    }
}

/// `madvise(advice)` on the `align`-aligned part of `ptr .. ptr + bytes` (one live
/// allocation), for advice that never changes the contents; errors are ignored.
fn advise_aligned(ptr: *mut u8, bytes: usize, align: usize, advice: i32) {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        let start = (ptr as usize).next_multiple_of(align);
        let end = (ptr as usize + bytes) / align * align;
        if end > start {
            // SAFETY: [start, end) lies inside the allocation and is page-aligned; the
            // callers' advice leaves every byte as it was.
            unsafe { madvise(start as *mut std::ffi::c_void, end - start, advice) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes, align, advice);
}

/// `dst = src` for short rows (a tile's or a panel's width): eight floats a move, so no
/// call to memcpy per row.
#[inline(always)]
pub fn copy_short(dst: &mut [f32], src: &[f32]) {
    let n = dst.len().min(src.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, within both slices; unaligned moves of plain floats.
        unsafe {
            let v = std::ptr::read_unaligned(src.as_ptr().add(i) as *const [f32; 8]);
            std::ptr::write_unaligned(dst.as_mut_ptr().add(i) as *mut [f32; 8], v);
        }
        i += 8;
    }
    // A loop, not copy_from_slice: the tail is under eight floats, not worth a call.
    #[allow(clippy::manual_memcpy)]
    for j in i..n {
        dst[j] = src[j];
    }
}

thread_local! {
    static SCRATCH: RefCell<Vec<AlignedBuf>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `len` floats of this thread's scratch (contents unspecified). Buffers are
/// kept per thread and reused, so a hot path allocates only the first time it needs a size;
/// nested calls get distinct buffers.
pub fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    let mut b = take_scratch(len);
    let r = f(b.as_mut_slice());
    return_scratch(b);
    r
}

/// A buffer of at least `len` floats from this thread's scratch (contents unspecified),
/// for code that cannot run inside [`with_scratch`]'s closure: a closure does not inherit
/// its caller's target features, so SIMD intrinsics in it are not inlined. Hand it back
/// with [`return_scratch`].
pub fn take_scratch(len: usize) -> AlignedBuf {
    let mut b = SCRATCH.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    b.resize(len);
    b
}

/// Returns a buffer from [`take_scratch`] to this thread's scratch.
pub fn return_scratch(b: AlignedBuf) {
    SCRATCH.with(|s| s.borrow_mut().push(b));
}

/// A global allocator for binaries: the system's, with every allocation of 4 MiB or more
/// offered transparent huge pages before its first touch (see [`advise_huge_pages`]).
/// Loading a model fills a few large buffers (the file, its decoded weights, their
/// packed copies) once; at 4 KiB a page their first touch was most of the load time.
pub struct HugePageAlloc;

// SAFETY: every call is forwarded to `System` unchanged; the advice only changes how the
// kernel backs pages of memory this allocation owns, never its contents.
unsafe impl std::alloc::GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc(layout);
        if !p.is_null() {
            advise_huge_pages_bytes(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= 16 {
            // `calloc`: fresh pages come zeroed without a write, so the advice still
            // precedes their first touch.
            let p = std::alloc::System.alloc_zeroed(layout);
            if !p.is_null() {
                advise_huge_pages_bytes(p, layout.size());
            }
            return p;
        }
        // Over-aligned memory is zeroed by a write: advise first, then write.
        let p = std::alloc::System.alloc(layout);
        if !p.is_null() {
            advise_huge_pages_bytes(p, layout.size());
            std::ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        std::alloc::System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        let p = std::alloc::System.realloc(ptr, layout, size);
        if !p.is_null() {
            advise_huge_pages_bytes(p, size);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_reused() {
        for n in [0, 1, 17, 1000] {
            let b = AlignedBuf::zeros(n);
            assert_eq!(b.as_slice().len(), n);
            assert_eq!(b.as_slice().as_ptr() as usize % 64, 0);
        }
        let p1 = with_scratch(100, |s| s.as_ptr() as usize);
        let p2 = with_scratch(50, |s| s.as_ptr() as usize);
        assert_eq!(p1, p2, "the buffer is reused");
        with_scratch(10, |a| {
            with_scratch(10, |b| assert_ne!(a.as_ptr(), b.as_ptr()));
        });
    }
}
