//! Integer products: 8-bit operands, exact i32 sums, f32 tiles out. `C = A x B` where A
//! (`m x k`) is read a row at a time and broadcast four bytes at once, and B (`k x n`) is
//! packed in panels of `nr` columns with each column's four consecutive depths adjacent
//! (`[k4][nr][4]` bytes, the layout `vpdpbusd` multiplies). Zero points are taken out
//! after the sum: `sum (a - za) b = sum a b - za * colsum(b)` and likewise for B, so the
//! kernels multiply raw bytes. Depths are padded to a multiple of four with zero weights.
//!
//! Convolutions multiply packed weights (A, i8) by the im2col view of the input (B, u8),
//! packed straight from the image per run; matrix products multiply the activations (A,
//! u8, read in place) by packed weights (B, i8).

pub mod amx;
pub mod dynamic;
pub mod micro;

#[cfg(test)]
mod tests;

use crate::conv::Conv2d;
use crate::gemm::TileSink;
use crate::isa::Isa;
use crate::pool::ThreadPool;
pub use micro::{QMicro, QMicroFn};

/// The integer micro-kernel of an ISA table: AVX-512 VNNI where the CPU has it, AVX-VNNI
/// where it has that (`SMELT_AVX_VNNI=0` turns it off), else the AVX2 ones; or portable.
pub fn micro_for(isa: Isa) -> QMicro {
    match isa {
        Isa::Portable => micro::portable_micro(),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if micro::x86::has_vnni() => micro::x86::vnni_micro(),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 if micro::x86::has_avx_vnni() => micro::x86::avx_vnni_micro(),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => micro::x86::avx2_micro(),
        #[allow(unreachable_patterns)]
        _ => micro::portable_micro(),
    }
}

/// Whether a product of depth groups `k4` with in-place u8 rows runs its full blocks on
/// AMX-INT8 tiles: the CPU has them, the panels are the tiles' 32 columns, and the depth
/// is whole steps of 64. `SMELT_AMX=0` turns it off.
pub fn use_amx(micro: &QMicro, k4: usize) -> bool {
    cfg!(target_arch = "x86_64")
        && micro.nr == amx::BLOCK
        && k4.is_multiple_of(amx::STEP_GROUPS)
        && k4 > 0
        && amx::available()
}

/// Largest depth whose sums of u8 x i8 products cannot overflow i32.
pub const MAX_DEPTH: usize = (i32::MAX as usize) / (255 * 128);

/// Groups of four depths.
pub fn k4(k: usize) -> usize {
    k.div_ceil(4)
}

/// Interleaves four rows of `n` bytes into `[n][4]`: column `j` gets `rows[t][j]`, t = 0..4.
///
/// # Safety
/// Each row holds `n` bytes; `out` has room for `4 n`.
unsafe fn interleave4(rows: [*const u8; 4], n: usize, out: *mut u8) {
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // (SSE2 is part of x86-64.)
        while j + 16 <= n {
            let r = rows.map(|p| _mm_loadu_si128(p.add(j) as *const __m128i));
            let lo01 = _mm_unpacklo_epi8(r[0], r[1]);
            let lo23 = _mm_unpacklo_epi8(r[2], r[3]);
            let hi01 = _mm_unpackhi_epi8(r[0], r[1]);
            let hi23 = _mm_unpackhi_epi8(r[2], r[3]);
            let o = out.add(j * 4) as *mut __m128i;
            _mm_storeu_si128(o, _mm_unpacklo_epi16(lo01, lo23));
            _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(lo01, lo23));
            _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(hi01, hi23));
            _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(hi01, hi23));
            j += 16;
        }
    }
    for j in j..n {
        for (t, r) in rows.iter().enumerate() {
            *out.add(j * 4 + t) = *r.add(j);
        }
    }
}

/// Copies `out.len()` bytes read `step` apart from `src`: a plain copy at step 1, even
/// bytes picked sixteen at a time at step 2 (a stride-2 convolution's column phases, which
/// a byte loop copied at two multiplies a byte: 7% of ResNet-50 int8's run), a loop
/// otherwise.
///
/// # Safety
/// Every byte read lies in `src`'s allocation.
pub(crate) unsafe fn copy_strided(src: *const u8, step: isize, out: &mut [u8]) {
    let n = out.len();
    if step == 1 {
        std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), n);
        return;
    }
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if step == 2 {
        use std::arch::x86_64::*;
        // (SSE2 is part of x86-64.) Each 16-bit lane's low byte is an even byte; the
        // saturating pack of values under 256 keeps them exactly. Reads 2 * 16 bytes for
        // 16 outputs, so stop while the last read stays within the 2n - 1 bytes read.
        let lows = _mm_set1_epi16(0xff);
        while j + 16 < n {
            let a = _mm_loadu_si128(src.add(2 * j) as *const __m128i);
            let b = _mm_loadu_si128(src.add(2 * j + 16) as *const __m128i);
            let v = _mm_packus_epi16(_mm_and_si128(a, lows), _mm_and_si128(b, lows));
            _mm_storeu_si128(out.as_mut_ptr().add(j) as *mut __m128i, v);
            j += 16;
        }
    }
    let mut p = src.offset(j as isize * step);
    for v in &mut out[j..] {
        *v = *p;
        p = p.offset(step);
    }
}

/// Bytes of one packed panel of depth groups `k4` and width `nr`.
pub fn panel_bytes(k4: usize, nr: usize) -> usize {
    k4 * nr * 4
}

/// A matrix packed as the broadcast operand A: blocks of `mr` rows, `[k4][mr][4]` bytes
/// each (zero-padded), with each row's sum (for the other operand's zero point).
pub struct QPackedRows {
    /// Rows.
    pub m: usize,
    /// Depth.
    pub k: usize,
    /// Depth groups of four, padded to whole AMX steps when `amx` holds the rows.
    groups: usize,
    mr: usize,
    data: Vec<u8>,
    /// The rows again for AMX tiles: `[m padded to 32][groups * 4]` bytes, row-major;
    /// empty without AMX-INT8.
    amx: Vec<u8>,
    /// Sum of each row's values.
    pub row_sums: Vec<i32>,
    /// Every value within [-64, 63] (reduced-range weights).
    pub narrow: bool,
}

impl QPackedRows {
    /// Packs the row-major i8 matrix `w` (`m x k`) for `micro`'s tiles, and for AMX-INT8
    /// tiles where the CPU has them and the micro-kernel's panels are theirs.
    pub fn new(w: &[i8], m: usize, k: usize, micro: &QMicro) -> QPackedRows {
        let mr = micro.mr;
        let amx = use_amx(micro, amx::STEP_GROUPS);
        let groups = if amx {
            k4(k).next_multiple_of(amx::STEP_GROUPS)
        } else {
            k4(k)
        };
        let blocks = m.div_ceil(mr);
        let mut data = vec![0u8; blocks * groups * mr * 4];
        for r in 0..m {
            let (b, rr) = (r / mr, r % mr);
            for (kk, &v) in w[r * k..(r + 1) * k].iter().enumerate() {
                data[((b * groups + kk / 4) * mr + rr) * 4 + kk % 4] = v as u8;
            }
        }
        let mut rows = Vec::new();
        if amx {
            let kp = groups * 4;
            rows = vec![0u8; m.next_multiple_of(amx::BLOCK) * kp];
            for r in 0..m {
                for (kk, &v) in w[r * k..(r + 1) * k].iter().enumerate() {
                    rows[r * kp + kk] = v as u8;
                }
            }
        }
        let row_sums = (0..m)
            .map(|r| w[r * k..(r + 1) * k].iter().map(|&v| v as i32).sum())
            .collect();
        QPackedRows {
            m,
            k,
            groups,
            mr,
            data,
            amx: rows,
            row_sums,
            narrow: w.iter().all(|&v| (-64..=63).contains(&v)),
        }
    }

    /// Whether the rows are also packed for AMX-INT8 tiles.
    pub fn has_amx(&self) -> bool {
        !self.amx.is_empty()
    }

    /// Depth groups of four the packed rows hold (the input panels must match).
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() + self.amx.len()
    }
}

/// The vector operand B packed in panels of `nr` columns (`[k4][nr][4]` each), with each
/// column's sum.
pub struct QPackedCols {
    /// Depth.
    pub k: usize,
    /// Columns.
    pub n: usize,
    nr: usize,
    data: Vec<u8>,
    /// Sum of each column's values.
    pub col_sums: Vec<i32>,
    /// Every value within [-64, 63] (reduced-range weights).
    pub narrow: bool,
}

impl QPackedCols {
    /// Packs the row-major i8 matrix `b` (`k x n`) in panels of `nr` columns.
    pub fn new(b: &[i8], k: usize, n: usize, nr: usize) -> QPackedCols {
        let g4 = k4(k);
        let panels = n.div_ceil(nr);
        let mut data = vec![0u8; panels * panel_bytes(g4, nr)];
        let bytes: Vec<u8> = b.iter().map(|&v| v as u8).collect();
        for p in 0..panels {
            let (j0, cols) = (p * nr, nr.min(n - p * nr));
            for g in 0..g4 {
                let zero = [0u8; 64];
                let rows = [0, 1, 2, 3].map(|t| {
                    let kk = 4 * g + t;
                    if kk < k {
                        bytes[kk * n + j0..].as_ptr()
                    } else {
                        zero.as_ptr()
                    }
                });
                let out = &mut data[p * panel_bytes(g4, nr) + g * nr * 4..][..nr * 4];
                // SAFETY: rows hold `cols` bytes each (zero rows 64 >= nr); out holds nr * 4.
                unsafe { interleave4(rows, cols.min(64), out.as_mut_ptr()) };
            }
        }
        let mut col_sums = vec![0i32; n];
        for kk in 0..k {
            for (j, s) in col_sums.iter_mut().enumerate() {
                *s += b[kk * n + j] as i32;
            }
        }
        QPackedCols {
            k,
            n,
            nr,
            data,
            col_sums,
            narrow: b.iter().all(|&v| (-64..=63).contains(&v)),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }
}

/// A pointer shared with the pool's threads (the caller vouches for what it points at).
#[derive(Clone, Copy)]
struct Shared<T>(*const T);
// SAFETY: only read, under the callers' contracts.
unsafe impl<T> Sync for Shared<T> {}
unsafe impl<T> Send for Shared<T> {}

impl<T> Shared<T> {
    /// The pointer (a method, so closures capture the wrapper, not its field).
    fn get(self) -> *const T {
        self.0
    }
}

/// Operand A of one product.
#[derive(Clone, Copy)]
enum Rows<'a> {
    Packed(&'a QPackedRows),
    /// Row-major u8 rows in place (row stride `ld`; `k` a multiple of four).
    InPlace {
        ptr: Shared<u8>,
        ld: usize,
    },
}

/// One product: A (`m` rows) times packed B panels, zero points folded in.
struct Product<'a> {
    m: usize,
    n: usize,
    k4: usize,
    a: Rows<'a>,
    signed_a: bool,
    /// The signed operand is within [-64, 63] (the ISA's narrow kernel applies).
    narrow: bool,
    /// `npanels` panels of [`panel_bytes`].
    b: Shared<u8>,
    /// Subtracted per row (conv: zx * row sum) or per column (matmul: za * col sum).
    row_corr: Option<&'a [i32]>,
    col_corr: Option<&'a [i32]>,
    batch: usize,
    /// Whether full 32-row blocks of in-place rows run on AMX-INT8 tiles.
    amx: bool,
    /// Columns computed over a padded row width: `(padded, real)`; columns of each padded
    /// row past the real width are dropped.
    padded_cols: Option<(usize, usize)>,
}

/// Columns a task covers (a few panels, kept in L2 while its rows pass).
fn panels_per_task(k4: usize, nr: usize) -> usize {
    let by_cache = (256 * 1024) / panel_bytes(k4, nr).max(1);
    by_cache.clamp(1, (256 / nr).max(1))
}

/// Rows a task covers.
const TASK_ROWS: usize = 32;

/// Converts a block of exact sums (`r x w` at `acc`, row stride `acc_ld`) to f32 at `dst`
/// (row stride `ld`), the zero-point corrections taken out: `sum - row[i] - col[j]`.
type FinishFn =
    unsafe fn(*mut f32, usize, *const i32, usize, (usize, usize), Option<&[i32]>, Option<&[i32]>);

/// [`FinishFn`] in plain Rust, vectorized by the compiler for the features it is compiled
/// with: x86-64's baseline (SSE2's four lanes) as it is, AVX2 inlined into
/// [`finish_avx2`].
#[inline(always)]
unsafe fn finish_plain(
    dst: *mut f32,
    ld: usize,
    acc: *const i32,
    acc_ld: usize,
    (r, w): (usize, usize),
    rows: Option<&[i32]>,
    cols: Option<&[i32]>,
) {
    for i in 0..r {
        let rc = rows.map_or(0, |c| c[i]);
        let d = std::slice::from_raw_parts_mut(dst.add(i * ld), w);
        let s = std::slice::from_raw_parts(acc.add(i * acc_ld), w);
        match cols {
            Some(cc) => {
                for ((d, &s), &c) in d.iter_mut().zip(s).zip(&cc[..w]) {
                    *d = (s - rc - c) as f32;
                }
            }
            None => {
                for (d, &s) in d.iter_mut().zip(s) {
                    *d = (s - rc) as f32;
                }
            }
        }
    }
}

/// [`finish_plain`] in AVX2's eight lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn finish_avx2(
    dst: *mut f32,
    ld: usize,
    acc: *const i32,
    acc_ld: usize,
    rw: (usize, usize),
    rows: Option<&[i32]>,
    cols: Option<&[i32]>,
) {
    finish_plain(dst, ld, acc, acc_ld, rw, rows, cols)
}

/// The [`FinishFn`] of an instruction set: AVX2's eight lanes on AVX2 and AVX-512 (on the
/// AVX2 table ResNet-50 int8 ran 7% faster than with SSE2's four; sixteen lanes made the
/// AVX-512 table's run 5% slower, with the AMX blocks' 32 columns).
fn finish_for(isa: Isa) -> FinishFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx2 => finish_avx2,
        _ => finish_plain,
    }
}

/// Runs a product over the pool: tiles of `TASK_ROWS` rows by a few panels, each handed to
/// the sink as f32 after the zero-point corrections.
///
/// # Safety
/// The operands hold what `p` describes.
unsafe fn run(micro: &QMicro, pool: &ThreadPool, threads: usize, p: &Product, sink: &dyn TileSink) {
    let (mr, nr) = (micro.mr, micro.nr);
    let npanels = p.n.div_ceil(nr);
    let ppt = panels_per_task(p.k4, nr);
    let task_rows = TASK_ROWS.div_ceil(mr) * mr;
    let row_tasks = p.m.div_ceil(task_rows);
    let col_tasks = npanels.div_ceil(ppt);
    let kernel = match (p.narrow, p.signed_a) {
        (false, true) => micro.signed_a,
        (false, false) => micro.unsigned_a,
        (true, true) => micro.narrow.0,
        (true, false) => micro.narrow.1,
    };
    let finish_block = finish_for(micro.isa);
    pool.run(threads, row_tasks * col_tasks, &|t| {
        let (ct, rt) = (t / row_tasks, t % row_tasks);
        let (i0, rows) = (rt * task_rows, task_rows.min(p.m - rt * task_rows));
        let pan0 = ct * ppt;
        let pans = ppt.min(npanels - pan0);
        let j0 = pan0 * nr;
        let cols = (pans * nr).min(p.n - j0);
        let ld = pans * nr;
        let mut tile = crate::buf::take_scratch(task_rows * ld);
        let mut acc = [0i32; amx::BLOCK * amx::BLOCK];
        debug_assert!(mr * nr <= acc.len());
        // Rows `ib..ib + r` of the task, columns `jj..jj + w` of its tile, from `acc`
        // (row stride `acc_ld`), zero points taken out.
        let finish = |tile: &mut [f32],
                      acc: &[i32],
                      acc_ld: usize,
                      ib: usize,
                      r: usize,
                      jj: usize,
                      w: usize| {
            let rows = p.row_corr.map(|c| &c[i0 + ib..i0 + ib + r]);
            let cols = p.col_corr.map(|c| &c[j0 + jj..j0 + jj + w]);
            // SAFETY: the block lies inside the tile and `acc`.
            unsafe {
                finish_block(
                    tile[(ib * ld + jj)..].as_mut_ptr(),
                    ld,
                    acc.as_ptr(),
                    acc_ld,
                    (r, w),
                    rows,
                    cols,
                )
            }
        };
        #[cfg(target_arch = "x86_64")]
        if p.amx {
            amx::configure();
        }
        let mut ib = 0;
        while ib < rows {
            #[cfg(target_arch = "x86_64")]
            if p.amx && rows - ib >= amx::BLOCK {
                let (a, lda) = match p.a {
                    Rows::InPlace { ptr, ld } => (ptr.0.add((i0 + ib) * ld), ld),
                    Rows::Packed(w) => (w.amx.as_ptr().add((i0 + ib) * w.groups * 4), w.groups * 4),
                };
                for pi in 0..pans {
                    let b = p.b.0.add((pan0 + pi) * panel_bytes(p.k4, nr));
                    if p.signed_a {
                        amx::block::<true>(p.k4, a, lda, b, acc.as_mut_ptr());
                    } else {
                        amx::block::<false>(p.k4, a, lda, b, acc.as_mut_ptr());
                    }
                    let jj = pi * nr;
                    finish(
                        tile.as_mut_slice(),
                        &acc,
                        amx::BLOCK,
                        ib,
                        amx::BLOCK,
                        jj,
                        nr.min(cols.saturating_sub(jj)),
                    );
                }
                ib += amx::BLOCK;
                continue;
            }
            let r = mr.min(rows - ib);
            let (a, a_rs, a_ks) = match p.a {
                Rows::Packed(w) => {
                    let blk = (i0 + ib) / mr;
                    (w.data.as_ptr().add(blk * p.k4 * mr * 4), 4, mr * 4)
                }
                Rows::InPlace { ptr, ld } => (ptr.0.add((i0 + ib) * ld), ld, 4),
            };
            for pi in 0..pans {
                let b = p.b.0.add((pan0 + pi) * panel_bytes(p.k4, nr));
                kernel(p.k4, a, a_rs, a_ks, r, b, acc.as_mut_ptr(), nr);
                let jj = pi * nr;
                finish(
                    tile.as_mut_slice(),
                    &acc,
                    nr,
                    ib,
                    r,
                    jj,
                    nr.min(cols.saturating_sub(jj)),
                );
            }
            ib += mr;
        }
        #[cfg(target_arch = "x86_64")]
        if p.amx {
            amx::release();
        }
        match p.padded_cols {
            None => sink.tile(p.batch, i0, j0, rows, cols, tile.as_mut_slice(), ld),
            Some((wp, ow)) => {
                // Hand on each output row's real columns.
                let t = tile.as_mut_slice();
                for oy in j0 / wp..(j0 + cols).div_ceil(wp) {
                    let start = j0.max(oy * wp);
                    let end = (j0 + cols).min(oy * wp + ow);
                    if start < end {
                        let col = oy * ow + start - oy * wp;
                        sink.tile(
                            p.batch,
                            i0,
                            col,
                            rows,
                            end - start,
                            &mut t[start - j0..],
                            ld,
                        );
                    }
                }
            }
        }
        crate::buf::return_scratch(tile);
    });
}

/// `C = (A - za) x B` for activations A (`m x k` u8, row stride `lda`, `k` a multiple of
/// four and at most [`MAX_DEPTH`]) and packed i8 weights B; tiles go to `sink` as batch
/// `batch`.
///
/// # Safety
/// `a` holds `m` rows of `lda` bytes with `k` readable in each.
#[allow(clippy::too_many_arguments)]
pub unsafe fn qmatmul(
    micro: &QMicro,
    pool: &ThreadPool,
    threads: usize,
    a: *const u8,
    m: usize,
    lda: usize,
    za: u8,
    b: &QPackedCols,
    col_corr: &mut Vec<i32>,
    batch: usize,
    sink: &dyn TileSink,
) {
    debug_assert_eq!(b.nr, micro.nr);
    col_corr.clear();
    col_corr.extend(b.col_sums.iter().map(|&s| s * za as i32));
    let p = Product {
        m,
        n: b.n,
        k4: k4(b.k),
        a: Rows::InPlace {
            ptr: Shared(a),
            ld: lda,
        },
        signed_a: false,
        narrow: b.narrow,
        b: Shared(b.data.as_ptr()),
        row_corr: None,
        col_corr: Some(col_corr),
        batch,
        amx: use_amx(micro, k4(b.k)),
        padded_cols: None,
    };
    run(micro, pool, threads, &p, sink);
}

/// The input of one image as the integer convolution reads it.
pub struct QConvInput {
    /// The image's first element (channel 0 of the group).
    pub x: *const u8,
    /// Steps between channels, rows and columns.
    pub strides: [isize; 3],
    /// The input's zero point (also what padding reads).
    pub zero_point: u8,
}

/// Packs the im2col view of one image into panels `[npanels][k4][nr][4]` of `out`.
///
/// # Safety
/// The input holds the geometry's channels, rows and columns at its strides; `out` holds
/// `npanels * panel_bytes(k4, nr)` bytes.
unsafe fn pack_im2col(
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    input: &QConvInput,
    (nr, groups): (usize, usize),
    out: *mut u8,
) {
    let (kk, px) = (g.k(), g.pixels());
    let pb = panel_bytes(groups, nr);
    let [sc, sh, sw] = input.strides;
    let zx = input.zero_point;
    let x = Shared(input.x);
    let out = Shared(out as *const u8);
    // A 1x1 stride-1 convolution over a dense plane reads each channel as one row.
    let plane = g.is_pointwise() && sw == 1 && sh == g.w as isize;
    let (seg_rows, seg_len) = if plane { (1, px) } else { (g.oh, g.ow) };
    let taps = g.kh * g.kw;
    pool.run(threads, groups, &|gi| {
        let out = out.get() as *mut u8;
        // Segments are copied only when the rows are not read in place, and the zero row
        // stands in only for the depths past the last (the final group's).
        let mut tmp = if plane {
            Vec::new()
        } else {
            vec![0u8; 4 * seg_len]
        };
        let zeros = if 4 * gi + 4 > kk {
            vec![0u8; seg_len]
        } else {
            Vec::new()
        };
        for oy in 0..seg_rows {
            let mut rows = [zeros.as_ptr(); 4];
            for (t, row) in rows.iter_mut().enumerate() {
                let k = 4 * gi + t;
                if k >= kk {
                    continue;
                }
                let (c, tap) = (k / taps, k % taps);
                let (ky, kx) = (tap / g.kw, tap % g.kw);
                let base = x.get().offset(c as isize * sc);
                if plane {
                    *row = base;
                    continue;
                }
                let seg = &mut tmp[t * seg_len..(t + 1) * seg_len];
                let iy = (oy * g.sh + ky * g.dh) as isize - g.ph as isize;
                if iy < 0 || iy >= g.h as isize {
                    seg.fill(zx);
                    *row = seg.as_ptr();
                    continue;
                }
                let src = base.offset(iy * sh);
                // ix = ox * sw + kx * dw - pw must lie in [0, w).
                let off = (kx * g.dw) as isize - g.pw as isize;
                let lo = if off >= 0 {
                    0
                } else {
                    ((-off) as usize).div_ceil(g.sw)
                };
                let hi = if (g.w as isize) > off {
                    (((g.w as isize - off) as usize).div_ceil(g.sw)).min(g.ow)
                } else {
                    0
                };
                let (lo, hi) = (lo.min(hi), hi);
                if lo == 0 && hi == g.ow && g.sw == 1 && sw == 1 {
                    *row = src.offset(off);
                    continue;
                }
                seg[..lo].fill(zx);
                seg[hi..].fill(zx);
                if g.sw == 1 && sw == 1 {
                    let from = src.offset(lo as isize + off);
                    std::ptr::copy_nonoverlapping(from, seg[lo..].as_mut_ptr(), hi - lo);
                } else {
                    for (ox, d) in seg.iter_mut().enumerate().take(hi).skip(lo) {
                        *d = *src.offset((ox * g.sw) as isize * sw + off * sw);
                    }
                }
                *row = seg.as_ptr();
            }
            // Scatter this segment's pixels across the panels they fall in.
            let p0 = oy * seg_len;
            let mut j = 0;
            while j < seg_len {
                let p = p0 + j;
                let (panel, col) = (p / nr, p % nr);
                let run = (nr - col).min(seg_len - j);
                let dst = out.add(panel * pb + gi * nr * 4 + col * 4);
                interleave4(rows.map(|r| r.add(j)), run, dst);
                j += run;
            }
        }
        // The last panel's columns past the pixels multiply zero weights' sums away only if
        // defined: give them the zero point.
        let tail = px % nr;
        if tail != 0 {
            let dst = out.add((px / nr) * pb + gi * nr * 4 + tail * 4);
            std::ptr::write_bytes(dst, zx, (nr - tail) * 4);
        }
    });
}

/// The row width a convolution with taps, or a strided one, is computed over: its input
/// is copied padded and split into `sh x sw` phases (one for stride 1), each
/// `ow + (kw - 1) * dw / sw` wide, so that every tap reads one run of a phase over all
/// output rows at that width (the extra columns of each row are dropped). None for a 1x1 stride-1
/// convolution, whose channels are already such runs.
fn padded_width(g: &Conv2d) -> Option<usize> {
    (!(g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1)).then(|| g.ow + (g.kw - 1) * g.dw / g.sw)
}

/// Rows of each phase: the rows the output reads, and one more (the last row's dropped
/// columns read past its end).
fn padded_rows(g: &Conv2d) -> usize {
    g.oh + (g.kh - 1) * g.dh / g.sh + 1
}

/// Bytes of the padded, phase-split copy of one image.
fn phase_copy_bytes(g: &Conv2d, wp: usize) -> usize {
    g.c * g.sh * g.sw * padded_rows(g) * wp
}

/// Bytes of scratch [`qconv`] packs one image's input into.
/// (`groups` as [`QPackedRows::groups`] gives.)
pub fn qconv_scratch_bytes(g: &Conv2d, nr: usize, groups: usize) -> usize {
    match padded_width(g) {
        Some(wp) => phase_copy_bytes(g, wp) + (g.oh * wp).div_ceil(nr) * panel_bytes(groups, nr),
        None => g.pixels().div_ceil(nr) * panel_bytes(groups, nr),
    }
}

/// Packs a convolution's input through a padded, phase-split copy (see [`padded_width`]):
/// phase `(py, px)` of channel `c` holds padded input rows `py, py + sh, ...` and columns
/// `px, px + sw, ...`, padding reading the zero point; tap `(ky, kx)` reads phase
/// `(ky dh mod sh, kx dw mod sw)` from row `ky dh / sh`, column `kx dw / sw`. The taps'
/// runs are interleaved into panels after the copy in `scratch`.
///
/// # Safety
/// As for [`pack_im2col`]; `scratch` holds [`qconv_scratch_bytes`].
unsafe fn pack_padded(
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    input: &QConvInput,
    (nr, groups): (usize, usize),
    wp: usize,
    scratch: &mut [u8],
) {
    let hp = padded_rows(g);
    let plane = hp * wp;
    let phases = g.sh * g.sw;
    let (copy, packed) = scratch.split_at_mut(phase_copy_bytes(g, wp));
    let [sc, sh, sw] = input.strides;
    let zx = input.zero_point;
    let x = Shared(input.x);
    let dst = Shared(copy.as_ptr());
    pool.run(threads, g.c * phases, &|cp| {
        let (c, ph) = (cp / phases, cp % phases);
        let (py, px) = (ph / g.sw, ph % g.sw);
        let d = std::slice::from_raw_parts_mut((dst.get() as *mut u8).add(cp * plane), plane);
        d.fill(zx);
        // Phase columns xx read input column xx * sw + px - pw, when in [0, w).
        let first = (g.pw.saturating_sub(px)).div_ceil(g.sw);
        let end = ((g.w + g.pw).saturating_sub(px)).div_ceil(g.sw).min(wp);
        if first >= end {
            return;
        }
        for yy in 0..hp {
            let Some(iy) = (yy * g.sh + py).checked_sub(g.ph).filter(|&iy| iy < g.h) else {
                continue;
            };
            let src = x.get().offset(c as isize * sc + iy as isize * sh);
            let row = &mut d[yy * wp..(yy + 1) * wp];
            let ix0 = first * g.sw + px - g.pw;
            copy_strided(
                src.offset(ix0 as isize * sw),
                g.sw as isize * sw,
                &mut row[first..end],
            );
        }
    });
    let kk = g.k();
    let pb = panel_bytes(groups, nr);
    let np = g.oh * wp;
    let panels = np.div_ceil(nr);
    let taps = g.kh * g.kw;
    let copy = Shared(copy.as_ptr());
    let out = Shared(packed.as_ptr());
    pool.run(threads, groups, &|gi| {
        let zeros = [0u8; 64];
        let rows = [0, 1, 2, 3].map(|t| {
            let k = 4 * gi + t;
            if k >= kk {
                return None;
            }
            let (c, tap) = (k / taps, k % taps);
            let (ky, kx) = ((tap / g.kw) * g.dh, (tap % g.kw) * g.dw);
            let phase = (ky % g.sh) * g.sw + kx % g.sw;
            Some(
                copy.get()
                    .add((c * phases + phase) * plane + (ky / g.sh) * wp + kx / g.sw),
            )
        });
        for p in 0..panels {
            let cols = nr.min(np - p * nr);
            let r = rows.map(|r| r.map_or(zeros.as_ptr(), |r| r.add(p * nr)));
            let o = (out.get() as *mut u8).add(p * pb + gi * nr * 4);
            interleave4(r, cols, o);
        }
    });
}

/// One image of an integer convolution: packed i8 filters (`m` output channels, depth
/// `g.k()` at most [`MAX_DEPTH`]) times the u8 input's im2col view, tiles (output
/// channels x pixels) to `sink` as batch `batch`. `scratch` holds at least
/// [`qconv_scratch_bytes`]; `row_corr` is reused.
///
/// # Safety
/// The input holds what the geometry reads at its strides.
#[allow(clippy::too_many_arguments)]
pub unsafe fn qconv(
    micro: &QMicro,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    input: &QConvInput,
    w: &QPackedRows,
    scratch: &mut [u8],
    row_corr: &mut Vec<i32>,
    batch: usize,
    sink: &dyn TileSink,
) {
    debug_assert_eq!(w.mr, micro.mr);
    let groups = w.groups;
    debug_assert!(scratch.len() >= qconv_scratch_bytes(g, micro.nr, groups));
    let padded = padded_width(g);
    let (n, panels) = match padded {
        Some(wp) => {
            pack_padded(pool, threads, g, input, (micro.nr, groups), wp, scratch);
            (g.oh * wp, scratch.as_ptr().add(phase_copy_bytes(g, wp)))
        }
        None => {
            pack_im2col(
                pool,
                threads,
                g,
                input,
                (micro.nr, groups),
                scratch.as_mut_ptr(),
            );
            (g.pixels(), scratch.as_ptr())
        }
    };
    row_corr.clear();
    row_corr.extend(w.row_sums.iter().map(|&s| s * input.zero_point as i32));
    let p = Product {
        m: w.m,
        n,
        k4: groups,
        a: Rows::Packed(w),
        signed_a: true,
        narrow: w.narrow,
        b: Shared(panels),
        row_corr: Some(row_corr),
        col_corr: None,
        batch,
        amx: !w.amx.is_empty(),
        padded_cols: padded.map(|wp| (wp, g.ow)),
    };
    run(micro, pool, threads, &p, sink);
}
