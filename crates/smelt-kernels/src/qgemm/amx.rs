//! AMX-INT8 blocks for integer products: a 32 x 32 block of i32 sums per call, four
//! `tdpbusd` (u8 A times i8 B: activations read in place times weights) or `tdpbsud` (i8
//! A times u8 B: packed filters times a convolution's input) per step of 64 depths, from
//! the same B panels the vector kernels read (32 columns of four bytes per depth group: each
//! B tile is 16 of those columns, row stride 128 bytes). Tile state is the one
//! `crate::amx` configures.

/// Whether this CPU and OS run AMX int8 products: AMX available as for bf16
/// ([`crate::amx::available`], which also honours `SMELT_AMX=0`) and CPUID's AMX-INT8.
pub fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| crate::amx::available() && int8_bit())
}

#[cfg(target_arch = "x86_64")]
fn int8_bit() -> bool {
    // (crate::amx::available checked that CPUID leaf 7 exists.)
    let l7 = std::arch::x86_64::__cpuid_count(7, 0);
    l7.edx & (1 << 25) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn int8_bit() -> bool {
    false
}

/// Rows and columns of a block.
pub const BLOCK: usize = 32;

/// Depth groups (of four) per step.
pub const STEP_GROUPS: usize = 16;

/// `c` (32 x 32 i32, row stride 32) = A (32 rows at row stride `lda`, `4 k4` depths)
/// times the panel `b` (`k4` groups of 32 columns of four bytes): A u8 and B i8
/// (`tdpbusd`), or with `A_SIGNED` A i8 and B u8 (`tdpbsud`).
///
/// # Safety
/// Tiles configured (`crate::amx::CONFIG`); `k4` a multiple of [`STEP_GROUPS`]; the
/// operands readable as described; `c` writable for 1024 i32.
#[cfg(target_arch = "x86_64")]
pub unsafe fn block<const A_SIGNED: bool>(
    k4: usize,
    a: *const u8,
    lda: usize,
    b: *const u8,
    c: *mut i32,
) {
    crate::amx::zero_block();
    let (sa, sb) = (lda as isize, 128isize);
    for g in (0..k4).step_by(STEP_GROUPS) {
        let (a0, b0) = (a.add(g * 4), b.add(g * 128));
        if A_SIGNED {
            std::arch::asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tdpbsud tmm0, tmm4, tmm6",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbsud tmm1, tmm4, tmm7",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tdpbsud tmm2, tmm5, tmm6",
                "tdpbsud tmm3, tmm5, tmm7",
                a0 = in(reg) a0,
                a1 = in(reg) a0.add(16 * lda),
                b0 = in(reg) b0,
                b1 = in(reg) b0.add(64),
                sa = in(reg) sa,
                sb = in(reg) sb,
                options(nostack)
            );
        } else {
            std::arch::asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tdpbusd tmm0, tmm4, tmm6",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                "tdpbusd tmm1, tmm4, tmm7",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tdpbusd tmm2, tmm5, tmm6",
                "tdpbusd tmm3, tmm5, tmm7",
                a0 = in(reg) a0,
                a1 = in(reg) a0.add(16 * lda),
                b0 = in(reg) b0,
                b1 = in(reg) b0.add(64),
                sa = in(reg) sa,
                sb = in(reg) sb,
                options(nostack)
            );
        }
    }
    crate::amx::store_block(c as *mut f32);
}

/// Loads the tile configuration for this thread.
///
/// # Safety
/// [`available`] is true.
#[cfg(target_arch = "x86_64")]
pub unsafe fn configure() {
    std::arch::asm!("ldtilecfg [{}]", in(reg) &crate::amx::CONFIG as *const crate::amx::TileConfig, options(nostack));
}

/// Releases this thread's tile state.
///
/// # Safety
/// [`configure`] was called on this thread.
#[cfg(target_arch = "x86_64")]
pub unsafe fn release() {
    std::arch::asm!("tilerelease", options(nostack));
}
