//! One run's scratch memory: zero-initialized bytes aligned to [`ARENA_ALIGN`].

use smelt_ir::kernel::ARENA_ALIGN;

/// A 64-byte block: the arena's unit of allocation, which gives it its alignment.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; ARENA_ALIGN]);

const _: () = assert!(std::mem::align_of::<Block>() == ARENA_ALIGN);

/// Scratch memory of one run: intermediates live at their plan's byte offsets.
/// A thread running a plan needs its own arena; one arena serves many runs.
pub struct Arena {
    blocks: Vec<Block>,
}

impl Arena {
    /// An arena of at least `bytes` bytes, zero-filled.
    pub fn new(bytes: usize) -> Arena {
        let mut a = Arena { blocks: Vec::new() };
        a.reserve(bytes);
        a
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.blocks.len() * ARENA_ALIGN
    }

    /// Whether the arena holds no byte.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Grows the arena (zero-filled) to hold at least `bytes` bytes.
    pub fn reserve(&mut self, bytes: usize) {
        let need = bytes.div_ceil(ARENA_ALIGN);
        if need > self.blocks.len() {
            self.blocks.resize(need, Block([0; ARENA_ALIGN]));
            smelt_kernels::buf::advise_huge_pages_bytes(
                self.blocks.as_mut_ptr().cast(),
                self.blocks.len() * ARENA_ALIGN,
            );
        }
    }

    /// The first byte (aligned to [`ARENA_ALIGN`]).
    pub(crate) fn base(&mut self) -> *mut u8 {
        self.blocks.as_mut_ptr() as *mut u8
    }
}
