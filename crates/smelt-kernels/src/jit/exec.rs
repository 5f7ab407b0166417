//! Executable memory for generated code: mapped writable, filled, then made read-only and
//! executable (never both writable and executable), unmapped on drop.

use std::ffi::c_void;

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64)
        -> *mut c_void;
    fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
    fn munmap(addr: *mut c_void, len: usize) -> i32;
}

const PROT_READ: i32 = 1;
const PROT_WRITE: i32 = 2;
const PROT_EXEC: i32 = 4;
const MAP_PRIVATE: i32 = 2;
const MAP_ANONYMOUS: i32 = 0x20;
const MAP_FAILED: *mut c_void = !0usize as *mut c_void;

/// A read-only, executable copy of some machine code.
pub(super) struct ExecCode {
    ptr: *mut c_void,
    len: usize,
}

// SAFETY: the mapping is immutable once made and owned by this value alone.
unsafe impl Send for ExecCode {}
// SAFETY: as above; executing it from several threads at once reads it only.
unsafe impl Sync for ExecCode {}

impl ExecCode {
    /// Maps `code` executable; `None` when the system refuses (the caller interprets).
    pub(super) fn new(code: &[u8]) -> Option<ExecCode> {
        if code.is_empty() {
            return None;
        }
        let len = code.len().next_multiple_of(4096);
        // SAFETY: a fresh anonymous mapping; written only within its length, then sealed.
        unsafe {
            let ptr = mmap(
                std::ptr::null_mut(),
                len,
                PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS,
                -1,
                0,
            );
            if ptr == MAP_FAILED || ptr.is_null() {
                return None;
            }
            std::ptr::copy_nonoverlapping(code.as_ptr(), ptr as *mut u8, code.len());
            if mprotect(ptr, len, PROT_READ | PROT_EXEC) != 0 {
                munmap(ptr, len);
                return None;
            }
            Some(ExecCode { ptr, len })
        }
    }

    /// The code's first byte.
    pub(super) fn entry(&self) -> *const u8 {
        self.ptr as *const u8
    }
}

impl Drop for ExecCode {
    fn drop(&mut self) {
        // SAFETY: mapped by `new` with this length, and no longer referenced.
        unsafe { munmap(self.ptr, self.len) };
    }
}
