//! Products on AMX tiles (Intel Advanced Matrix Extensions, Sapphire Rapids and later):
//! `C[m x n] (f32) = A (f32, rounded to bf16 as it is packed) * B (bf16 weights)`, each
//! `tdpbf16ps` multiplying a 16 x 32 block of A by a 32 x 16 block of B into 16 x 16 f32
//! sums, sixteen times the work of an AVX-512 FMA per instruction. A bf16 plan's products
//! run here where the CPU and the OS allow AMX ([`available`]).
//!
//! Each task packs a block of 32 rows of A to bf16 (rows of `kp`, k padded to a multiple
//! of 32 with zeros) and sweeps column panels of 32: two A tiles, two B tiles and four
//! accumulator tiles make a 32 x 32 block of C per k step of 32. B is packed once
//! ([`AmxB`]): per panel, k pairs of 32 columns of bf16 pairs, the layout `tdpbf16ps`
//! reads. Finished blocks go to a [`TileSink`] as f32 tiles.
//!
//! The instructions are written as inline assembly (Rust's AMX intrinsics are unstable);
//! tile state is configured at the start of each task and released at its end.

use crate::gemm::{Batches, MatRef, TileSink};
use crate::pool::ThreadPool;

/// Rows and columns of a block of C (two tiles each way).
pub const BLOCK: usize = 32;

/// Whether this CPU and OS run AMX bf16 products: CPUID says AMX-TILE and AMX-BF16, the
/// OS enables tile state (XCR0), and Linux grants this process the tile data permission.
/// Checked once. `SMELT_AMX=0` in the environment turns AMX off.
pub fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| std::env::var("SMELT_AMX").as_deref() != Ok("0") && detect())
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn detect() -> bool {
    use std::arch::x86_64::{__cpuid_count, _xgetbv};
    // SAFETY: CPUID leaf 7 exists on every x86-64 CPU that reports max leaf >= 7.
    let max = __cpuid_count(0, 0).eax;
    if max < 7 {
        return false;
    }
    let l7 = __cpuid_count(7, 0);
    let (amx_bf16, amx_tile) = (l7.edx & (1 << 22) != 0, l7.edx & (1 << 24) != 0);
    let osxsave = __cpuid_count(1, 0).ecx & (1 << 27) != 0;
    if !(amx_bf16 && amx_tile && osxsave && crate::Isa::Avx512.is_supported()) {
        return false;
    }
    // SAFETY: OSXSAVE is set, so XGETBV is enabled.
    let xcr0 = unsafe { _xgetbv(0) };
    if xcr0 & (0b11 << 17) != 0b11 << 17 {
        return false;
    }
    // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): per process, once.
    let r: i64;
    // SAFETY: a plain syscall with no memory arguments.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") 158i64 => r,
            in("rdi") 0x1023i64,
            in("rsi") 18i64,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    r == 0
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn detect() -> bool {
    false
}

/// bf16 bits of `x`, rounded to nearest even (NaN stays NaN, quieted).
#[inline]
pub fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// B packed for the tiles: per panel of 32 columns, `kp / 2` rows of 32 bf16 pairs
/// (`data[q][p / 2][j][p % 2]` = `B[p][q * 32 + j]`), zero past `k` and `n`.
#[derive(Debug, Clone)]
pub struct AmxB {
    k: usize,
    n: usize,
    kp: usize,
    data: Vec<u16>,
}

impl AmxB {
    /// Packs the `k x n` bf16 matrix `B[p][j] = src[p * rs + j * cs]`.
    ///
    /// # Panics
    /// When an element lies outside `src`.
    pub fn new(k: usize, n: usize, src: &[u16], rs: usize, cs: usize) -> AmxB {
        let kp = k.next_multiple_of(BLOCK);
        let panels = n.div_ceil(BLOCK);
        let mut data = vec![0u16; panels * kp * BLOCK];
        for q in 0..panels {
            let out = &mut data[q * kp * BLOCK..(q + 1) * kp * BLOCK];
            for p in 0..k {
                for j in 0..BLOCK.min(n - q * BLOCK) {
                    out[(p / 2) * 2 * BLOCK + j * 2 + p % 2] = src[p * rs + (q * BLOCK + j) * cs];
                }
            }
        }
        AmxB { k, n, kp, data }
    }

    /// Depth.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 2
    }
}

/// The tile configuration: palette 1, eight tiles of 16 rows of 64 bytes.
#[repr(C, align(64))]
pub(crate) struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

pub(crate) const CONFIG: TileConfig = TileConfig {
    palette: 1,
    start_row: 0,
    reserved: [0; 14],
    colsb: [64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0],
    rows: [16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0],
};

/// Zeroes the four accumulator tiles (tmm0-3) of a 32 x 32 block.
///
/// # Safety
/// Tiles configured ([`CONFIG`]).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) unsafe fn zero_block() {
    std::arch::asm!(
        "tilezero tmm0",
        "tilezero tmm1",
        "tilezero tmm2",
        "tilezero tmm3",
        options(nostack)
    );
}

/// One k step of 32 into the block: A tiles of 16 rows at `a0` and `a1` (row stride `sa`
/// bytes), B tiles of 16 pair rows at `b0` and `b1` (row stride `sb` bytes), four
/// `tdpbf16ps`.
///
/// # Safety
/// Tiles configured; the 16 rows of 64 bytes of each tile readable.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) unsafe fn step_block<A, B>(
    (a0, a1, sa): (*const A, *const A, isize),
    (b0, b1, sb): (*const B, *const B, isize),
) {
    std::arch::asm!(
        "tileloadd tmm4, [{a0} + {sa}*1]",
        "tileloadd tmm6, [{b0} + {sb}*1]",
        "tdpbf16ps tmm0, tmm4, tmm6",
        "tileloadd tmm7, [{b1} + {sb}*1]",
        "tdpbf16ps tmm1, tmm4, tmm7",
        "tileloadd tmm5, [{a1} + {sa}*1]",
        "tdpbf16ps tmm2, tmm5, tmm6",
        "tdpbf16ps tmm3, tmm5, tmm7",
        a0 = in(reg) a0,
        a1 = in(reg) a1,
        b0 = in(reg) b0,
        b1 = in(reg) b1,
        sa = in(reg) sa,
        sb = in(reg) sb,
        options(nostack)
    );
}

/// Stores the block's four accumulator tiles to `c` (32 x 32 f32, row stride 32).
///
/// # Safety
/// Tiles configured; `c` writable for 1024 floats.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) unsafe fn store_block(c: *mut f32) {
    let sc = (BLOCK * 4) as isize;
    std::arch::asm!(
        "tilestored [{c0} + {sc}*1], tmm0",
        "tilestored [{c1} + {sc}*1], tmm1",
        "tilestored [{c2} + {sc}*1], tmm2",
        "tilestored [{c3} + {sc}*1], tmm3",
        c0 = in(reg) c,
        c1 = in(reg) c.add(16),
        c2 = in(reg) c.add(16 * BLOCK),
        c3 = in(reg) c.add(16 * BLOCK + 16),
        sc = in(reg) sc,
        options(nostack)
    );
}

/// One 32 x 32 block: `c` (row stride 32) = `a` (32 rows of `kp` bf16) times panel `b`.
///
/// # Safety
/// Tiles configured ([`CONFIG`]); `a` holds `32 * kp`, `b` `kp * 32` elements, `c` 1024.
#[cfg(target_arch = "x86_64")]
unsafe fn block(kp: usize, a: *const u16, b: *const u16, c: *mut f32) {
    zero_block();
    let (sa, sb) = ((kp * 2) as isize, (BLOCK * 4) as isize);
    for p in (0..kp).step_by(BLOCK) {
        let b0 = b.add(p * BLOCK);
        step_block((a.add(p), a.add(16 * kp + p), sa), (b0, b0.add(BLOCK), sb));
    }
    store_block(c);
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn block(_kp: usize, _a: *const u16, _b: *const u16, _c: *mut f32) {
    unreachable!("AMX is x86-64 only")
}

/// Each lane's bf16, rounded to nearest even (NaN quieted), in the lane's top half (the
/// low half zero).
///
/// # Safety
/// AVX-512 F present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn round_high(x: std::arch::x86_64::__m512i) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    let lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    let r = _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
    let abs = _mm512_and_si512(x, _mm512_set1_epi32(0x7fff_ffff));
    let nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f80_0000));
    let quieted = _mm512_or_si512(x, _mm512_set1_epi32(0x0040_0000));
    _mm512_and_si512(
        _mm512_mask_blend_epi32(nan, r, quieted),
        _mm512_set1_epi32(0xffff_0000u32 as i32),
    )
}

/// Rows `i0 .. i0 + rows` of the f32 matrix `a` (k columns) as bf16 rows of `kp`.
///
/// # Safety
/// Every element of those rows is readable; AVX-512 F/BW present (see [`available`]).
unsafe fn pack_rows(a: MatRef, i0: usize, rows: usize, k: usize, kp: usize, out: &mut [u16]) {
    out.fill(0);
    for r in 0..rows {
        let row = a.ptr.offset((i0 + r) as isize * a.rs);
        let o = &mut out[r * kp..r * kp + k];
        if a.cs == 1 {
            round_row(row, o.as_mut_ptr(), k);
        } else {
            for (p, d) in o.iter_mut().enumerate() {
                *d = bf16_bits(*row.offset(p as isize * a.cs));
            }
        }
    }
}

/// `n` floats at `src` as bf16 bits at `dst`, rounded to nearest even (NaN quieted): as
/// [`bf16_bits`], sixteen at a time.
///
/// # Safety
/// `src` readable and `dst` writable for `n` elements; AVX-512 F/BW present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn round_row(src: *const f32, dst: *mut u16, n: usize) {
    use std::arch::x86_64::*;
    let mut i = 0;
    while i < n {
        let left = n - i;
        let mask: u16 = if left >= 16 { !0 } else { (1u16 << left) - 1 };
        let x = _mm512_maskz_loadu_epi32(mask, src.add(i) as *const i32);
        let r = _mm512_srli_epi32(round_high(x), 16);
        _mm256_mask_storeu_epi16(dst.add(i) as *mut i16, mask, _mm512_cvtepi32_epi16(r));
        i += 16;
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn round_row(src: *const f32, dst: *mut u16, n: usize) {
    for i in 0..n {
        *dst.add(i) = bf16_bits(*src.add(i));
    }
}

/// Hands a finished block (`rows x cols` of it, row stride 32 in `tile`) to `sink` at
/// (batch, row, column) `at`, its rows packed together first when it is narrower.
fn hand(
    sink: &dyn TileSink,
    (bi, i0, j0): (usize, usize, usize),
    rows: usize,
    cols: usize,
    tile: &mut [f32; BLOCK * BLOCK],
) {
    if cols < BLOCK {
        for r in 0..rows {
            tile.copy_within(r * BLOCK..r * BLOCK + cols, r * cols);
        }
        sink.tile(bi, i0, j0, rows, cols, &mut tile[..rows * cols], cols);
    } else {
        sink.tile(bi, i0, j0, rows, cols, &mut tile[..rows * BLOCK], BLOCK);
    }
}

/// `batch` products `C_b = A_b * B` on up to `threads` threads of `pool`, every 32 x 32
/// block of C handed to `sink` (clipped to `m x n`).
///
/// # Safety
/// [`available`] is true; every element of every batch of `a` (`m x k`) is readable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn amx_gemm(
    pool: &ThreadPool,
    threads: usize,
    batch: usize,
    m: usize,
    a: MatRef,
    a_batches: Batches,
    b: &AmxB,
    sink: &dyn TileSink,
) {
    let (n, k, kp) = (b.n, b.k, b.kp);
    if batch == 0 || m == 0 || n == 0 {
        return;
    }
    let rb = m.div_ceil(BLOCK);
    let panels = n.div_ceil(BLOCK);
    // Column chunks: enough tasks for every thread twice over, each chunk a few panels.
    let want = (2 * threads).div_ceil(batch * rb);
    let cb = want.clamp(1, panels);
    let tasks = batch * rb * cb;
    let chunk = |q: usize| q * (panels / cb) + q.min(panels % cb);
    pool.run(threads, tasks, &|t| {
        let bi = t / (rb * cb);
        let (ib, jb) = ((t / cb) % rb, t % cb);
        let i0 = ib * BLOCK;
        let rows = BLOCK.min(m - i0);
        crate::buf::with_scratch(BLOCK * kp / 2, |scratch| {
            let apack = std::slice::from_raw_parts_mut(scratch.as_mut_ptr() as *mut u16, BLOCK * kp);
            pack_rows(a.offset(a_batches.at(bi)), i0, rows, k, kp, apack);
            let mut tile = [0f32; BLOCK * BLOCK];
            std::arch::asm!("ldtilecfg [{}]", in(reg) &CONFIG as *const TileConfig, options(nostack));
            for q in chunk(jb)..chunk(jb + 1) {
                let j0 = q * BLOCK;
                let cols = BLOCK.min(n - j0);
                let panel = b.data.as_ptr().add(q * kp * BLOCK);
                block(kp, apack.as_ptr(), panel, tile.as_mut_ptr());
                hand(sink, (bi, i0, j0), rows, cols, &mut tile);
            }
            std::arch::asm!("tilerelease", options(nostack));
        });
    });
}

/// Weights as A for the tiles: bf16 rows in blocks of 32 (`data[b][r][p]` = `A[b * 32 +
/// r][p]`, rows of `kp`, zero past `m` and `k`), for products whose B is activations (a
/// convolution's filters times its input).
#[derive(Debug, Clone)]
pub struct AmxA {
    m: usize,
    k: usize,
    kp: usize,
    data: Vec<u16>,
}

impl AmxA {
    /// Packs the `m x k` bf16 matrix `A[i][p] = src[i * rs + p * cs]`.
    ///
    /// # Panics
    /// When an element lies outside `src`.
    pub fn new(m: usize, k: usize, src: &[u16], rs: usize, cs: usize) -> AmxA {
        let kp = k.next_multiple_of(BLOCK);
        let mut data = vec![0u16; m.div_ceil(BLOCK) * BLOCK * kp];
        for i in 0..m {
            for p in 0..k {
                data[i * kp + p] = src[i * rs + p * cs];
            }
        }
        AmxA { m, k, kp, data }
    }

    /// Rows.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Depth.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 2
    }
}

/// Activations as B: read in place (rows of k a stride apart, batches at offsets) or
/// produced a panel at a time (an im2col view).
#[derive(Clone, Copy)]
pub enum AmxRhs<'a> {
    /// `B_b[p][j]` at `b.offset(batches.at(b))`, `p * rs + j * cs`.
    Strided(MatRef, Batches<'a>),
    /// Panels from a source (`nr` = 32).
    Panels(&'a dyn crate::gemm::PanelSource),
}

/// The f32 panel `stage` (`k` rows of 32) as bf16 pairs for the tiles (`out[p / 2][j][p %
/// 2]`, `kp / 2` rows of 32 pairs, zero past `k`), rounded to nearest even.
///
/// # Safety
/// `stage` holds `k * 32` and `out` `kp * 32` elements; AVX-512 F/BW present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn pair_panel(stage: &[f32], k: usize, kp: usize, out: &mut [u16]) {
    use std::arch::x86_64::*;
    let round = |x: __m512i| round_high(x);
    let row = |p: usize, h: usize| {
        if p < k {
            _mm512_loadu_si512(stage.as_ptr().add(p * BLOCK + h * 16) as *const _)
        } else {
            _mm512_setzero_si512()
        }
    };
    let o = out.as_mut_ptr();
    for p in (0..kp).step_by(2) {
        for h in 0..2 {
            let lo = _mm512_srli_epi32(round(row(p, h)), 16);
            let pair = _mm512_or_si512(round(row(p + 1, h)), lo);
            _mm512_storeu_si512(o.add((p / 2) * 2 * BLOCK + h * BLOCK) as *mut _, pair);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn pair_panel(stage: &[f32], k: usize, kp: usize, out: &mut [u16]) {
    out.fill(0);
    for p in 0..k {
        for j in 0..BLOCK {
            out[(p / 2) * 2 * BLOCK + j * 2 + p % 2] = bf16_bits(stage[p * BLOCK + j]);
        }
    }
    let _ = kp;
}

/// `batch` products `C_b = A * B_b` (A bf16 weights, B activations rounded to bf16 as
/// each panel of 32 columns is packed) on up to `threads` threads, every 32 x 32 block of
/// C handed to `sink` (clipped to `m x n`). Each task packs one panel and sweeps every
/// block of A's rows over it.
///
/// # Safety
/// [`available`] is true; every element of every batch of B (`k x n`) is readable.
pub unsafe fn amx_gemm_weights(
    pool: &ThreadPool,
    threads: usize,
    batch: usize,
    n: usize,
    a: &AmxA,
    b: AmxRhs,
    sink: &dyn TileSink,
) {
    let (m, k, kp) = (a.m, a.k, a.kp);
    if batch == 0 || m == 0 || n == 0 {
        return;
    }
    let panels = n.div_ceil(BLOCK);
    let blocks = m.div_ceil(BLOCK);
    // Tasks of a few panels each (four per thread), so a task configures the tiles and
    // takes its scratch once for several panels.
    let chunks = (4 * threads).div_ceil(batch).clamp(1, panels);
    let chunk = |c: usize| c * (panels / chunks) + c.min(panels % chunks);
    pool.run(threads, batch * chunks, &|t| {
        let (bi, c) = (t / chunks, t % chunks);
        let src = match b {
            AmxRhs::Strided(src, bs) => Some(src.offset(bs.at(bi))),
            AmxRhs::Panels(_) => None,
        };
        crate::buf::with_scratch(k * BLOCK + kp * BLOCK / 2, |scratch| {
            let (stage, panel) = scratch.split_at_mut(k * BLOCK);
            let panel = std::slice::from_raw_parts_mut(panel.as_mut_ptr() as *mut u16, kp * BLOCK);
            let mut tile = [0f32; BLOCK * BLOCK];
            std::arch::asm!("ldtilecfg [{}]", in(reg) &CONFIG as *const TileConfig, options(nostack));
            for q in chunk(c)..chunk(c + 1) {
                let (j0, cols) = (q * BLOCK, BLOCK.min(n - q * BLOCK));
                match (b, src) {
                    (AmxRhs::Strided(..), Some(src)) => {
                        for p in 0..k {
                            let row = src.ptr.offset(p as isize * src.rs);
                            let out = &mut stage[p * BLOCK..(p + 1) * BLOCK];
                            if src.cs == 1 {
                                out[..cols].copy_from_slice(std::slice::from_raw_parts(row.add(j0), cols));
                            } else {
                                for (j, o) in out[..cols].iter_mut().enumerate() {
                                    *o = *row.offset((j0 + j) as isize * src.cs);
                                }
                            }
                            out[cols..].fill(0.0);
                        }
                    }
                    (AmxRhs::Panels(src), _) => src.pack(bi, j0, cols, k, BLOCK, stage),
                    (AmxRhs::Strided(..), None) => {}
                }
                pair_panel(stage, k, kp, panel);
                for ib in 0..blocks {
                    let i0 = ib * BLOCK;
                    let rows = BLOCK.min(m - i0);
                    block(kp, a.data.as_ptr().add(i0 * kp), panel.as_ptr(), tile.as_mut_ptr());
                    hand(sink, (bi, i0, j0), rows, cols, &mut tile);
                }
            }
            std::arch::asm!("tilerelease", options(nostack));
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::StoreC;
    use crate::testing::rand_vec;

    /// A bf16 bit pattern's value.
    fn wide(h: u16) -> f64 {
        f32::from_bits((h as u32) << 16) as f64
    }

    /// Asserts `c` (`batch` row-major `m x n` products) is the product of the bf16 values
    /// `a(b, i, p)` and `b(b, p, j)` up to f32 summation (`what` names the case).
    fn assert_product(
        c: &[f32],
        [batch, m, n, k]: [usize; 4],
        a: impl Fn(usize, usize, usize) -> u16,
        b: impl Fn(usize, usize, usize) -> u16,
        what: &str,
    ) {
        for bi in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let (mut s, mut mag) = (0f64, 0f64);
                    for p in 0..k {
                        let t = wide(a(bi, i, p)) * wide(b(bi, p, j));
                        s += t;
                        mag += t.abs();
                    }
                    let got = c[bi * m * n + i * n + j] as f64;
                    assert!(
                        (got - s).abs() <= 1e-5 * (1.0 + mag),
                        "{what} {batch}x{m}x{n}x{k} C[{bi}][{i}][{j}] = {got}, want {s}"
                    );
                }
            }
        }
    }

    fn check(batch: usize, m: usize, n: usize, k: usize, threads: usize) {
        let a = rand_vec(batch * m * k, 3 + m as u64);
        let bw = rand_vec(k * n, 4 + n as u64);
        let bits: Vec<u16> = bw.iter().map(|&x| bf16_bits(x)).collect();
        let b = AmxB::new(k, n, &bits, n, 1);
        let mut c = vec![f32::NAN; batch * m * n];
        let sink = StoreC {
            c: c.as_mut_ptr(),
            ldc: n,
            batch_stride: m * n,
        };
        unsafe {
            amx_gemm(
                crate::pool::global(),
                threads,
                batch,
                m,
                MatRef::rows(a.as_ptr(), k),
                Batches::Stride((m * k) as isize),
                &b,
                &sink,
            )
        };
        assert_product(
            &c,
            [batch, m, n, k],
            |bi, i, p| bf16_bits(a[bi * m * k + i * k + p]),
            |_, p, j| bits[p * n + j],
            &format!("t{threads}"),
        );
    }

    #[test]
    fn products_match_the_rounded_operands() {
        if !available() {
            eprintln!("note: no AMX here; its kernel was not run");
            return;
        }
        check(1, 32, 32, 32, 1);
        check(1, 7, 45, 19, 1);
        check(2, 70, 100, 97, 2);
        check(1, 1, 1536, 384, 2);
    }

    fn check_weights(batch: usize, m: usize, n: usize, k: usize, threads: usize) {
        let wa = rand_vec(m * k, 7 + m as u64);
        let bits: Vec<u16> = wa.iter().map(|&x| bf16_bits(x)).collect();
        let a = AmxA::new(m, k, &bits, k, 1);
        let bv = rand_vec(batch * k * n, 8 + n as u64);
        let mut c = vec![f32::NAN; batch * m * n];
        let sink = StoreC {
            c: c.as_mut_ptr(),
            ldc: n,
            batch_stride: m * n,
        };
        let rhs = AmxRhs::Strided(
            MatRef::rows(bv.as_ptr(), n),
            Batches::Stride((k * n) as isize),
        );
        unsafe { amx_gemm_weights(crate::pool::global(), threads, batch, n, &a, rhs, &sink) };
        assert_product(
            &c,
            [batch, m, n, k],
            |_, i, p| bits[i * k + p],
            |bi, p, j| bf16_bits(bv[bi * k * n + p * n + j]),
            &format!("weights t{threads}"),
        );
    }

    #[test]
    fn weight_products_match_the_rounded_operands() {
        if !available() {
            return;
        }
        check_weights(1, 32, 32, 32, 1);
        check_weights(1, 7, 45, 19, 1);
        check_weights(2, 70, 100, 97, 2);
        check_weights(1, 64, 49, 2304, 2);
    }

    #[test]
    fn rows_round_as_one_value_does() {
        if !crate::Isa::Avx512.is_supported() {
            return;
        }
        let mut v = rand_vec(37, 5);
        v.extend([
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            -0.0,
            1e-40,
            f32::from_bits(0x3f80_8000),
        ]);
        v.extend((0..64).map(|i| f32::from_bits(0x3f80_0000 + i * 0x1111)));
        let mut out = vec![0u16; v.len() + 1];
        unsafe { round_row(v.as_ptr(), out.as_mut_ptr(), v.len()) };
        for (x, o) in v.iter().zip(&out) {
            assert_eq!(*o, bf16_bits(*x), "{x} ({:#x})", x.to_bits());
        }
        assert_eq!(out[v.len()], 0);
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(bf16_bits(1.0), 0x3f80);
        assert_eq!(bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(bf16_bits(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert!(f32::from_bits((bf16_bits(f32::NAN) as u32) << 16).is_nan());
        assert_eq!(bf16_bits(f32::INFINITY), 0x7f80);
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use crate::gemm::StoreC;

    /// `cargo test --release -p smelt-kernels amx_time -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn amx_time() {
        if !available() {
            return;
        }
        let dims: Vec<usize> = std::env::var("AMX_DIMS")
            .unwrap_or("1024,1536,384".into())
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect();
        let (m, n, k) = (dims[0], dims[1], dims[2]);
        let a = crate::testing::rand_vec(m * k, 1);
        let bits: Vec<u16> = crate::testing::rand_vec(k * n, 2)
            .iter()
            .map(|&x| bf16_bits(x))
            .collect();
        let b = AmxB::new(k, n, &bits, n, 1);
        let mut c = vec![0f32; m * n];
        let sink = StoreC {
            c: c.as_mut_ptr(),
            ldc: n,
            batch_stride: 0,
        };
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let reps = 20;
            for _ in 0..reps {
                unsafe {
                    amx_gemm(
                        crate::pool::global(),
                        1,
                        1,
                        m,
                        MatRef::rows(a.as_ptr(), k),
                        Batches::Stride(0),
                        &b,
                        &sink,
                    )
                };
            }
            let s = t.elapsed().as_secs_f64() / reps as f64;
            eprintln!(
                "{m}x{n}x{k}: {:.3} ms, {:.0} GFLOP/s",
                s * 1e3,
                2.0 * (m * n * k) as f64 / s / 1e9
            );
        }
    }
}
