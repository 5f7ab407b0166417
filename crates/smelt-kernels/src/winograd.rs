//! Winograd F(4x4, 3x3) and F(2x2, 3x3) convolution for 3x3, stride-1, undilated kernels:
//! each `m x m` output tile (m = 4 or 2) comes from an `(m + 2)^2` input tile as
//! `A^T [ (G g G^T) . (B^T d B) ] A`, so the 36 (or 16) products of transformed weights and
//! transformed inputs are GEMMs over (output channel, input channel, tile): 2.25 (or 4)
//! multiplies per output instead of 9. Weights are transformed and packed once; inputs and
//! outputs are transformed sixteen (or eight) tiles at a time in vector lanes. The
//! epilogue gets whole output rows.
//!
//! F(4x4)'s transform points are 0, ±1, ±2 and infinity (Lavin and Gray); F(2x2)'s are 0, ±1
//! and infinity. F(2x2) multiplies more but stores 16 transformed weights per filter, not
//! 36, each used by 4x as many tiles: it is for small images, where F(4x4)'s few tiles
//! leave its 4x larger weights streaming from memory (see [`cost`]).

use crate::buf::with_scratch;
use crate::conv::Conv2d;
use crate::direct::DirectInput;
use crate::gemm::{gemm, Batches, Gemm, Lhs, MatRef, PackedA, PackedB, Rhs, StoreC, TileSink};
use crate::pool::ThreadPool;
use crate::simd::Vf;
use crate::Kernels;

/// Points of a transformed tile for output tiles of `m x m`.
pub const fn points(m: usize) -> usize {
    (m + 2) * (m + 2)
}

/// Tiles of `m x m` outputs per image of `g`.
pub fn tiles(g: &Conv2d, m: usize) -> usize {
    g.oh.div_ceil(m).saturating_mul(g.ow.div_ceil(m))
}

/// The relative cost of a 3x3 convolution of `g` by Winograd F(m x m) (m = 2 or 4), or by
/// the direct product (m = 1), per input x output channel: the multiply-adds of its
/// products, but at least those that hide the streaming of its transformed weights (each
/// needs about 32 tiles to use it before the next arrives from memory; fewer tiles leave
/// the products waiting on memory). A fixed model, so plans stay reproducible.
pub fn cost(g: &Conv2d, m: usize) -> usize {
    const REUSE: usize = 32;
    let points = if m == 1 { 9 } else { points(m) };
    let tiles = if m == 1 {
        g.oh.saturating_mul(g.ow)
    } else {
        tiles(g, m)
    };
    points.saturating_mul(tiles.max(REUSE))
}

/// The Winograd variant a fixed cost model (so plans are reproducible) takes for a
/// convolution of `g` with `ci` input and `co` output channels (per group), in either
/// layout: 4 for F(4x4, 3x3), 2 for F(2x2, 3x3), None for neither.
///
/// 3x3 stride 1, enough input channels to amortize the output transform, enough output
/// channels to amortize the input transform (and its 36 x copy of the input), and enough
/// 4x4 tiles to fill lanes. It wins from 32 output channels (timed by `--autotune` on
/// YOLOv8n's 40x40 layers: 35% on Zen 3 with AVX2 and on an Emerald Rapids Xeon with
/// AVX-512). It also wins by 7-20% at 9 tiles (YOLOv8n's 10x10 layers), but those hold the
/// model's largest filters and their transforms are 4x as large (16 MB more for 1% of the
/// run): not taken. With AVX2's 16-wide tiles it wins from 16 channels each way
/// (`--autotune` on a Zen 1 EPYC, one thread: 16 -> 16 channels at 80x80 22%, 96 -> 16 and
/// 96 -> 24 at 160x160 19-24% (PP-OCRv4's head), 32 -> 24 at 40x40 26%); the AVX-512
/// threshold stays where it was measured.
///
/// F(2x2) where [`cost`] puts it below F(4x4): small images, whose few 4x4 tiles leave
/// F(4x4)'s transformed weights (36 per filter, against 16) streaming from memory with
/// little work each. A chain of twelve 256-channel 3x3 layers at 14x14 (ResNet-50's third
/// stage), one thread, cold weights: 1.9 ms a layer by F(4x4).
pub fn variant(kern: &Kernels, g: &Conv2d, ci: usize, co: usize) -> Option<usize> {
    let min_channels = if kern.micro.nr >= 32 { 32 } else { 16 };
    let take = applies(g) && ci >= min_channels && co >= min_channels && tiles(g, 4) >= 16;
    take.then(|| if cost(g, 2) < cost(g, 4) { 2 } else { 4 })
}

/// Transformed, packed weights: `U[k] = (G g G^T)[k]` as a `co x ci` matrix per point `k`.
#[derive(Clone, Debug)]
pub struct WinogradWeights {
    /// Output tile size: 4 for F(4x4, 3x3), 2 for F(2x2, 3x3).
    pub(crate) m: usize,
    pub(crate) co: usize,
    pub(crate) ci: usize,
    /// Whether the products take the tiles as rows (few tiles), not as columns.
    pub(crate) tiles_as_rows: bool,
    /// `U[k]` packed as the left operand (`co x ci`), for products over many tiles (empty
    /// when the tiles are rows).
    pub(crate) u: Vec<PackedA>,
    /// `U[k]^T` packed as the right operand (`ci x co`), for few tiles (then tiles are
    /// rows; empty otherwise).
    pub(crate) ut: Vec<PackedB>,
}

/// Whether a convolution of `tiles` 4x4 tiles per image runs its products with the tiles
/// as rows: too few to fill the micro-kernel's column panels.
pub fn tiles_as_rows(kern: &Kernels, tiles: usize) -> bool {
    tiles < 2 * kern.micro.nr
}

/// F(2x2)'s `G`, 4 x 3.
const G2: [[f64; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// F(4x4)'s `G`, 6 x 3.
const G: [[f64; 3]; 6] = [
    [0.25, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

impl WinogradWeights {
    /// Transforms and packs `co x ci x 3 x 3` weights (row-major) for F(m x m, 3x3) (m = 2
    /// or 4) convolutions of `tiles` `m x m` tiles per image (only the orientation their
    /// products use is packed).
    ///
    /// # Panics
    /// When `w` holds fewer than `co * ci * 9` floats, or `m` is neither 2 nor 4.
    pub fn new(
        kern: &Kernels,
        m: usize,
        co: usize,
        ci: usize,
        w: &[f32],
        tiles: usize,
    ) -> WinogradWeights {
        WinogradWeights::oriented(kern, m, co, ci, w, tiles_as_rows(kern, tiles))
    }

    /// [`WinogradWeights::new`] for products with the tiles as rows, whatever their count:
    /// the orientation [`crate::winograd_blocked`] runs, its tiles' channels contiguous.
    ///
    /// # Panics
    /// As for [`WinogradWeights::new`].
    pub fn tiles_as_rows(kern: &Kernels, m: usize, co: usize, ci: usize, w: &[f32]) -> Self {
        WinogradWeights::oriented(kern, m, co, ci, w, true)
    }

    /// Transforms and packs the weights for products with the tiles as rows (`rows`) or
    /// as columns.
    fn oriented(
        kern: &Kernels,
        m: usize,
        co: usize,
        ci: usize,
        w: &[f32],
        rows: bool,
    ) -> WinogradWeights {
        assert!(
            w.len() >= co * ci * 9,
            "{} weights for {co} x {ci} x 3 x 3",
            w.len()
        );
        assert!(
            m == 2 || m == 4,
            "F({m}x{m}, 3x3) is not a Winograd variant here"
        );
        // The transform runs only if some pack is not replayed from a store.
        let tr = std::cell::OnceCell::new();
        let transformed = || tr.get_or_init(|| transform(m, co, ci, w));
        let (mut u, mut ut) = (Vec::new(), Vec::new());
        for p in 0..points(m) {
            if rows {
                ut.push(PackedB::from_source(&kern.micro, ci, co, || {
                    (&transformed()[p], 1, ci)
                }));
            } else {
                u.push(PackedA::from_source(&kern.micro, co, ci, || {
                    (&transformed()[p], ci, 1)
                }));
            }
        }
        WinogradWeights {
            m,
            co,
            ci,
            tiles_as_rows: rows,
            u,
            ut,
        }
    }

    /// The output tile size: 4 for F(4x4, 3x3), 2 for F(2x2, 3x3).
    pub fn tile(&self) -> usize {
        self.m
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.u.iter().map(PackedA::bytes).sum::<usize>()
            + self.ut.iter().map(PackedB::bytes).sum::<usize>()
    }
}

/// `U[k] = (G g G^T)[k]` for each of F(m x m)'s transform points, every `co x ci`, in f64.
fn transform(m: usize, co: usize, ci: usize, w: &[f32]) -> Vec<Vec<f32>> {
    let gm: &[[f64; 3]] = if m == 2 { &G2 } else { &G };
    let a = gm.len();
    let mut u = vec![vec![0f32; co * ci]; a * a];
    for o in 0..co {
        for i in 0..ci {
            let g = &w[(o * ci + i) * 9..(o * ci + i + 1) * 9];
            // t = G g (a x 3), then t G^T (a x a), in f64.
            let mut t = [[0f64; 3]; 6];
            for (r, row) in t.iter_mut().take(a).enumerate() {
                for (c, v) in row.iter_mut().enumerate() {
                    *v = (0..3).map(|k| gm[r][k] * g[k * 3 + c] as f64).sum();
                }
            }
            for r in 0..a {
                for c in 0..a {
                    let v: f64 = (0..3).map(|k| t[r][k] * gm[c][k]).sum();
                    u[r * a + c][o * ci + i] = v as f32;
                }
            }
        }
    }
    u
}

/// `B^T d` for one column of six values.
#[inline(always)]
unsafe fn bt<V: Vf>(d: [V; 6]) -> [V; 6] {
    let (c2, c4, c5) = (V::splat(2.0), V::splat(4.0), V::splat(5.0));
    let t0 = d[4].sub(c4.mul(d[2]));
    let t1 = d[3].sub(c4.mul(d[1]));
    let t2 = d[4].sub(d[2]);
    let t3 = c2.mul(d[3].sub(d[1]));
    [
        c4.mul(d[0]).sub(c5.mul(d[2])).add(d[4]),
        t0.add(t1),
        t0.sub(t1),
        t2.add(t3),
        t2.sub(t3),
        c4.mul(d[1]).sub(c5.mul(d[3])).add(d[5]),
    ]
}

/// `B^T d` of F(M x M) for one column of `M + 2` values (F(2x2) uses the first four).
#[inline(always)]
unsafe fn bt_of<V: Vf, const M: usize>(d: [V; 6]) -> [V; 6] {
    if M == 4 {
        return bt(d);
    }
    let z = V::splat(0.0);
    [
        d[0].sub(d[2]),
        d[1].add(d[2]),
        d[2].sub(d[1]),
        d[1].sub(d[3]),
        z,
        z,
    ]
}

/// `A^T m` of F(M x M) for one column of `M + 2` values: `M` results (F(2x2) fills two).
#[inline(always)]
unsafe fn at_of<V: Vf, const M: usize>(m: [V; 6]) -> [V; 4] {
    if M == 4 {
        return at(m);
    }
    let z = V::splat(0.0);
    [m[0].add(m[1]).add(m[2]), m[1].sub(m[2]).sub(m[3]), z, z]
}

/// `A^T m` for one column of six values.
#[inline(always)]
unsafe fn at<V: Vf>(m: [V; 6]) -> [V; 4] {
    let (c2, c4, c8) = (V::splat(2.0), V::splat(4.0), V::splat(8.0));
    let s12 = m[1].add(m[2]);
    let d12 = m[1].sub(m[2]);
    let s34 = m[3].add(m[4]);
    let d34 = m[3].sub(m[4]);
    [
        m[0].add(s12).add(s34),
        d12.add(c2.mul(d34)),
        s12.add(c4.mul(s34)),
        d12.add(c8.mul(d34)).add(m[5]),
    ]
}

/// The input transform of `V::LANES` tiles of one channel: lane `l`'s tile has its
/// top-left input element at `src + idx[l]` (a padded copy, row stride `ld`); point `k` of
/// the lanes' tiles goes to `dst + k * pstride` (the first `n` lanes).
#[inline(always)]
unsafe fn input_tiles<V: Vf, const M: usize>(
    src: *const f32,
    idx: *const i32,
    ld: usize,
    dst: *mut f32,
    pstride: usize,
    n: usize,
) {
    let mut d = [[V::splat(0.0); 6]; 6];
    for (i, row) in d.iter_mut().take(M + 2).enumerate() {
        for (j, v) in row.iter_mut().take(M + 2).enumerate() {
            *v = V::gather_idx(src.add(i * ld + j), idx);
        }
    }
    transform_input::<V, M>(d, dst, pstride, n)
}

/// The input transform of `V::LANES` tiles' 6x6 values `d` (lanes are tiles), stored as in
/// [`input_tiles`].
#[inline(always)]
pub(crate) unsafe fn transform_input<V: Vf, const M: usize>(
    d: [[V; 6]; 6],
    dst: *mut f32,
    pstride: usize,
    n: usize,
) {
    let a = M + 2;
    // Columns: B^T d, then rows: (B^T d) B.
    let mut t = [[V::splat(0.0); 6]; 6];
    for j in 0..a {
        let c = bt_of::<V, M>([d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j]]);
        for i in 0..a {
            t[i][j] = c[i];
        }
    }
    for (i, row) in t.iter().take(a).enumerate() {
        let r = bt_of::<V, M>(*row);
        for (j, v) in r.iter().take(a).enumerate() {
            let p = dst.add((i * a + j) * pstride);
            if n == V::LANES {
                v.store(p);
            } else {
                v.store_part(p, n);
            }
        }
    }
}

/// The output transform of `V::LANES` tiles of one channel: point `k` of lane `l`'s tile
/// is at `src + k * pstride + l * tstride`; lane `l`'s 4x4 result goes to `dst + idx[l]`
/// (row stride `ld`), for the first `n` lanes.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn output_tiles<V: Vf, const M: usize>(
    src: *const f32,
    pstride: usize,
    tstride: usize,
    dst: *mut f32,
    idx: *const i32,
    ld: usize,
    n: usize,
) {
    let mut lanes = [0f32; 16];
    output_rows::<V, M>(src, pstride, tstride, |r, o| {
        for (c, v) in o.iter().take(M).enumerate() {
            v.store(lanes.as_mut_ptr());
            for (l, &x) in lanes[..n].iter().enumerate() {
                *dst.offset(*idx.add(l) as isize + (r * ld + c) as isize) = x;
            }
        }
    });
}

/// The output transform of `V::LANES` tiles up to its M x M outputs: `emit(r, o)` takes
/// row `r` of every tile, `o[c]` holding column `c` of each lane's tile (`c < M`).
#[inline(always)]
pub(crate) unsafe fn output_rows<V: Vf, const M: usize>(
    src: *const f32,
    pstride: usize,
    tstride: usize,
    mut emit: impl FnMut(usize, [V; 4]),
) {
    let a = M + 2;
    let mut m = [[V::splat(0.0); 6]; 6];
    for (i, row) in m.iter_mut().take(a).enumerate() {
        for (j, v) in row.iter_mut().take(a).enumerate() {
            let p = src.add((i * a + j) * pstride);
            *v = if tstride == 1 {
                V::load(p)
            } else {
                V::gather(p, tstride as isize)
            };
        }
    }
    let mut t = [[V::splat(0.0); 6]; 4];
    for j in 0..a {
        let c = at_of::<V, M>([m[0][j], m[1][j], m[2][j], m[3][j], m[4][j], m[5][j]]);
        for i in 0..M {
            t[i][j] = c[i];
        }
    }
    for (r, row) in t.iter().take(M).enumerate() {
        emit(r, at_of::<V, M>(*row));
    }
}

/// The output transform of one tile over `V::LANES` channels (the tiles-as-rows layout,
/// where a tile's channels are contiguous): point `k` of channel `o0 + l` at
/// `src + k * pstride + l`; its M x M outputs to `dst + l * plane + r * ld + c`.
#[inline(always)]
unsafe fn output_channels<V: Vf, const M: usize>(
    src: *const f32,
    pstride: usize,
    dst: *mut f32,
    plane: usize,
    ld: usize,
) {
    let mut lanes = [0f32; 16];
    output_rows::<V, M>(src, pstride, 1, |r, o| {
        for (c, v) in o.iter().take(M).enumerate() {
            v.store(lanes.as_mut_ptr());
            for (l, &x) in lanes[..V::LANES].iter().enumerate() {
                *dst.add(l * plane + r * ld + c) = x;
            }
        }
    });
}

/// The output transform of one tile over a block of channels (see `output_channels`):
/// `(src, pstride, dst, plane, ld)`, as many channels as the ISA's transform lanes.
pub type OutputChannelsFn = unsafe fn(*const f32, usize, *mut f32, usize, usize);

/// The input transform of one ISA (see `input_tiles`): `(src, idx, ld, dst, pstride, n)`.
pub type InputFn = unsafe fn(*const f32, *const i32, usize, *mut f32, usize, usize);
/// The output transform of one ISA (see `output_tiles`):
/// `(src, pstride, tstride, dst, idx, ld, n)`.
pub type OutputFn = unsafe fn(*const f32, usize, usize, *mut f32, *const i32, usize, usize);

/// Lanes of the transforms of an ISA.
pub fn lanes(kern: &Kernels) -> usize {
    kern.winograd.2
}

/// The generic transforms at tile size `$m` over lanes `$v`, as one ISA's [`Transforms`].
macro_rules! transforms {
    ($(#[$doc:meta])* $name:ident, $v:ty, $m:literal $(, $features:literal)?) => {
        $(#[$doc])*
        pub fn $name() -> super::Transforms {
            $(#[target_feature(enable = $features)])?
            unsafe fn input(
                src: *const f32,
                idx: *const i32,
                ld: usize,
                dst: *mut f32,
                ps: usize,
                n: usize,
            ) {
                super::input_tiles::<$v, $m>(src, idx, ld, dst, ps, n)
            }
            $(#[target_feature(enable = $features)])?
            #[allow(clippy::too_many_arguments)]
            unsafe fn output(
                src: *const f32,
                ps: usize,
                ts: usize,
                dst: *mut f32,
                idx: *const i32,
                ld: usize,
                n: usize,
            ) {
                super::output_tiles::<$v, $m>(src, ps, ts, dst, idx, ld, n)
            }
            $(#[target_feature(enable = $features)])?
            unsafe fn output_channels(
                src: *const f32,
                ps: usize,
                dst: *mut f32,
                plane: usize,
                ld: usize,
            ) {
                super::output_channels::<$v, $m>(src, ps, dst, plane, ld)
            }
            super::Transforms {
                input,
                output,
                output_channels,
            }
        }
    };
}

/// One Winograd variant's transforms on one ISA (lanes as the ISA's F(4x4) ones).
#[derive(Clone, Copy)]
pub struct Transforms {
    /// The input transform.
    pub input: InputFn,
    /// The output transform over tiles.
    pub output: OutputFn,
    /// The output transform over channels (tiles as rows).
    pub output_channels: OutputChannelsFn,
}

/// The portable transforms (one tile at a time).
pub mod portable {
    transforms!(
        /// F(4x4)'s transforms.
        f4, f32, 4
    );
    transforms!(
        /// F(2x2)'s transforms.
        f2, f32, 2
    );
}

/// The AVX2 (8 tiles) and AVX-512 (16 tiles) transforms.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use crate::simd::{Y8, Z16};
    use std::arch::x86_64::*;

    /// See [`super::InputFn`] (AVX2 CPUs only).
    ///
    /// # Safety
    /// The tiles' input and outputs must be in bounds; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn input_avx2(
        src: *const f32,
        idx: *const i32,
        ld: usize,
        dst: *mut f32,
        ps: usize,
        n: usize,
    ) {
        // Eight tiles side by side on one row (all but a row's last few when the tile
        // columns are not a multiple of eight) are loaded whole and transposed in
        // registers: a gather per value cost the input transform 45% of a 96 -> 24 channel
        // 160x160 layer on Zen 1, where a gather is microcoded.
        let first = *idx;
        if n == 8 && (1..8).all(|l| *idx.add(l) == first + 4 * l as i32) {
            let base = src.offset(first as isize);
            let mut d = [[Y8(_mm256_setzero_ps()); 6]; 6];
            for (i, row) in d.iter_mut().enumerate() {
                *row = tile_row_avx2(base.add(i * ld));
            }
            return super::transform_input::<Y8, 4>(d, dst, ps, n);
        }
        super::input_tiles::<Y8, 4>(src, idx, ld, dst, ps, n)
    }

    /// Columns `0..6` of eight tiles 4 apart on one row from `p`: `v[j]` lane `l` is
    /// `p[4 l + j]` (reads `p[0..34]`, no further).
    #[inline(always)]
    unsafe fn tile_row_avx2(p: *const f32) -> [Y8; 6] {
        // Tiles l and l + 4 in the two 128-bit halves; each half is then a 4x4 transpose.
        let pair = |lo: usize, hi: usize| _mm256_loadu2_m128(p.add(hi), p.add(lo));
        let (a, b, c, d) = (pair(0, 16), pair(4, 20), pair(8, 24), pair(12, 28));
        // Columns 4 and 5 of tile l are columns 0 and 1 of tile l + 1; tile 8's two.
        let e = _mm256_insertf128_ps::<1>(
            _mm256_castps128_ps256(_mm_loadu_ps(p.add(16))),
            _mm_castpd_ps(_mm_load_sd(p.add(32) as *const f64)),
        );
        let pd = _mm256_castps_pd;
        let ps = |x: __m256d| Y8(_mm256_castpd_ps(x));
        let (ab_lo, ab_hi) = (pd(_mm256_unpacklo_ps(a, b)), pd(_mm256_unpackhi_ps(a, b)));
        let (cd_lo, cd_hi) = (pd(_mm256_unpacklo_ps(c, d)), pd(_mm256_unpackhi_ps(c, d)));
        let (bc_lo, de_lo) = (pd(_mm256_unpacklo_ps(b, c)), pd(_mm256_unpacklo_ps(d, e)));
        [
            ps(_mm256_unpacklo_pd(ab_lo, cd_lo)),
            ps(_mm256_unpackhi_pd(ab_lo, cd_lo)),
            ps(_mm256_unpacklo_pd(ab_hi, cd_hi)),
            ps(_mm256_unpackhi_pd(ab_hi, cd_hi)),
            ps(_mm256_unpacklo_pd(bc_lo, de_lo)),
            ps(_mm256_unpackhi_pd(bc_lo, de_lo)),
        ]
    }
    /// See [`super::OutputFn`] (AVX2 CPUs only).
    ///
    /// # Safety
    /// As for `input_avx2`.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn output_avx2(
        src: *const f32,
        ps: usize,
        ts: usize,
        dst: *mut f32,
        idx: *const i32,
        ld: usize,
        n: usize,
    ) {
        super::output_tiles::<Y8, 4>(src, ps, ts, dst, idx, ld, n)
    }

    /// See [`super::OutputChannelsFn`] (8 channels; AVX2+FMA CPUs only).
    ///
    /// # Safety
    /// The tile's points and outputs must be in bounds; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn output_channels_avx2(
        src: *const f32,
        ps: usize,
        dst: *mut f32,
        plane: usize,
        ld: usize,
    ) {
        super::output_channels::<Y8, 4>(src, ps, dst, plane, ld)
    }

    /// See [`super::OutputChannelsFn`] (16 channels; AVX-512 CPUs only): each output row's
    /// four columns are transposed in registers to one 4-float vector per channel.
    ///
    /// # Safety
    /// The tile's points and outputs must be in bounds; the CPU has AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    pub unsafe fn output_channels_avx512(
        src: *const f32,
        ps: usize,
        dst: *mut f32,
        plane: usize,
        ld: usize,
    ) {
        super::output_rows::<Z16, 4>(src, ps, 1, |r, o| {
            let v = transpose_columns(o);
            let row = dst.add(r * ld);
            macro_rules! lane {
                ($q:literal) => {
                    for (k, vk) in v.iter().enumerate() {
                        let at = row.add((4 * $q + k) * plane);
                        _mm_storeu_ps(at, _mm512_extractf32x4_ps::<$q>(*vk));
                    }
                };
            }
            lane!(0);
            lane!(1);
            lane!(2);
            lane!(3);
        })
    }

    /// Four vectors of 16 lanes (`o[c]` lane `l`) to four whose 128-bit lane `q` of `v[k]`
    /// holds lane `4q + k`'s four values `o[0..4]`.
    #[inline(always)]
    unsafe fn transpose_columns(o: [Z16; 4]) -> [__m512; 4] {
        let (c0, c1, c2, c3) = (o[0].0, o[1].0, o[2].0, o[3].0);
        // Per 128-bit lane q: lo01 = [c0 l4q, c1 l4q, c0 l4q+1, c1 l4q+1], and so on.
        let lo01 = _mm512_castps_pd(_mm512_unpacklo_ps(c0, c1));
        let hi01 = _mm512_castps_pd(_mm512_unpackhi_ps(c0, c1));
        let lo23 = _mm512_castps_pd(_mm512_unpacklo_ps(c2, c3));
        let hi23 = _mm512_castps_pd(_mm512_unpackhi_ps(c2, c3));
        [
            _mm512_castpd_ps(_mm512_unpacklo_pd(lo01, lo23)),
            _mm512_castpd_ps(_mm512_unpackhi_pd(lo01, lo23)),
            _mm512_castpd_ps(_mm512_unpacklo_pd(hi01, hi23)),
            _mm512_castpd_ps(_mm512_unpackhi_pd(hi01, hi23)),
        ]
    }
    transforms!(
        /// F(2x2)'s transforms, eight tiles at a time (AVX2+FMA CPUs only).
        f2_avx2, Y8, 2, "avx2,fma"
    );
    transforms!(
        /// F(2x2)'s transforms, sixteen tiles at a time (AVX-512 CPUs only).
        f2_avx512, Z16, 2, "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma"
    );

    /// See [`super::InputFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// As for `input_avx2`, on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    pub unsafe fn input_avx512(
        src: *const f32,
        idx: *const i32,
        ld: usize,
        dst: *mut f32,
        ps: usize,
        n: usize,
    ) {
        super::input_tiles::<Z16, 4>(src, idx, ld, dst, ps, n)
    }
    /// See [`super::OutputFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// As for `input_avx512`.
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn output_avx512(
        src: *const f32,
        ps: usize,
        ts: usize,
        dst: *mut f32,
        idx: *const i32,
        ld: usize,
        n: usize,
    ) {
        if n < 16 {
            return super::output_tiles::<Z16, 4>(src, ps, ts, dst, idx, ld, n);
        }
        // Sixteen tiles: each output row's four columns are transposed in registers to one
        // 4-float vector per tile, stored whole (not sixty-four scalar stores).
        super::output_rows::<Z16, 4>(src, ps, ts, |r, o| {
            // Tile 4q + k's four columns in 128-bit lane q of v[k].
            let v = transpose_columns(o);
            let row = dst.add(r * ld);
            macro_rules! lane {
                ($q:literal) => {
                    for (k, vk) in v.iter().enumerate() {
                        let at = row.offset(*idx.add(4 * $q + k) as isize);
                        _mm_storeu_ps(at, _mm512_extractf32x4_ps::<$q>(*vk));
                    }
                };
            }
            lane!(0);
            lane!(1);
            lane!(2);
            lane!(3);
        })
    }
}

/// A raw pointer shared by tasks that write disjoint parts (or only read).
#[derive(Clone, Copy)]
pub(crate) struct Shared(pub(crate) *mut f32);
// SAFETY: see the uses (here and in `winograd_blocked`): every phase writes disjoint parts;
// later phases only read.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// Whether a convolution is one Winograd F(4x4, 3x3) computes.
pub fn applies(g: &Conv2d) -> bool {
    g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1
}

/// Floats of one image's (or group's) padded input copy, counted without overflow: a plan
/// checks it against the memory limits before a run allocates it.
/// `m` is the output tile size (4 for F(4x4), 2 for F(2x2)).
pub fn padded_floats(g: &Conv2d, m: usize) -> u128 {
    let m = m.max(1) as u128;
    let (ty, tx) = ((g.oh as u128).div_ceil(m), (g.ow as u128).div_ceil(m));
    (m * ty + 2) * (m * tx + 2) * g.c as u128
}

/// Runs the convolution of `batches` images (or groups) with transformed weights, handing
/// each finished output row of each output channel to `sink` as batch `b`, row = channel,
/// columns = `y * ow ..`.
///
/// # Safety
/// Every input element the geometry reads must be readable and not written during the
/// call; `g` must satisfy [`applies`] and match `w`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn winograd_conv(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    w: &WinogradWeights,
    sink: &dyn TileSink,
) {
    let lanes = kern.winograd.2;
    let (m, pts) = (w.m, points(w.m));
    // Tiles are flattened (row-major), so narrow images do not waste lanes.
    let (ty, tx) = (g.oh.div_ceil(m), g.ow.div_ceil(m));
    let ci = w.ci;
    // Padded input: rows m ty + 2, columns m tx + 2 (zeros outside the input).
    let (hp, wp) = (m * ty + 2, m * tx + 2);
    let plane = hp * wp;
    let pin_len = batches * ci * plane;
    let out_ld = m * tx;
    // The tiles go through transforms and products in bands of whole tile rows, each band's
    // transformed input (36 or 16 points x channels x tiles) within half of L2 so the products
    // read it from cache (a 160x160 image's whole transform is tens of MB, streamed from
    // memory twice); with the tiles as rows (few tiles) all of them at once.
    let per_row = pts * ci * tx * 4 * batches;
    let cache_band = (crate::isa::l2_bytes() / 2 / per_row.max(1)).clamp(1, ty);
    // With several threads and bands, each thread runs whole bands on its own (transforms
    // and products in its own L2, no barrier between the phases); the band count is then a
    // multiple of the threads so they finish together. One thread runs its bands the same
    // way: each band pads just its own rows before transforming them, so the transform
    // reads them from cache (a whole padded copy made first was out of cache again by the
    // time its rows were transformed: 96 -> 24 channels at 160x160 on Zen 1, 7-10% slower).
    // Few tiles (tiles as rows) get one band per thread only while the transformed
    // weights, which every band's products read whole, fit in half of L2: a 64-channel
    // 20x20 layer (0.6 MB) ran no faster on two threads than on one with its phases split
    // (their data crossing cores at every barrier), 1.5x faster with a band each. Larger
    // weights are better split by the products' columns (ResNet-50's 256-channel 14x14
    // layers, 9.4 MB, ran 15% slower with a band each).
    let weights_in_l2 = pts * ci * w.co * 4 <= crate::isa::l2_bytes() / 2;
    let own_bands = ty >= threads && (!w.tiles_as_rows || weights_in_l2);
    let (band, bands) = if own_bands && w.tiles_as_rows {
        let band = ty.div_ceil(threads);
        (band, ty.div_ceil(band))
    } else if w.tiles_as_rows {
        (ty, 1)
    } else if own_bands {
        let bands = ty.div_ceil(cache_band).next_multiple_of(threads);
        (ty.div_ceil(bands), bands)
    } else {
        (cache_band, ty.div_ceil(cache_band))
    };
    // Where band `i` starts (`bands` at `ty`). Bands run a thread each are dealt to the
    // threads in contiguous ranges, so the tile rows are split evenly among the threads
    // first and each thread's rows then among its bands: YOLOv8n's 40x40 layers, ten tile
    // rows in five bands of two, left one thread three bands and the other two. Either
    // way no band is taller than `band` (nested ceilings of ty / threads / per-thread).
    let even = |n: usize, parts: usize, q: usize| q * (n / parts) + q.min(n % parts);
    let band_start = |i: usize| {
        let per = bands / threads;
        if own_bands && per >= 1 && bands % threads == 0 {
            let (q, r) = (i / per, i % per);
            let (lo, hi) = (even(ty, threads, q), even(ty, threads, q + 1));
            lo + even(hi - lo, per, r)
        } else {
            even(ty, bands, i)
        }
    };
    let tpad = (band * tx).div_ceil(lanes) * lanes;
    let v_len = batches * pts * ci * tpad;
    let m_len = batches * pts * w.co * tpad;
    // The band buffers live in the scratch of the thread that runs the band, and so does
    // a band's padded input then: each thread pads the rows its band reads (all channels)
    // instead of every thread padding some channels of all rows, so the rows the previous
    // layer left in this thread's caches stay there and only the two halo rows cross cores
    // (on a 2-vCPU Xeon, a core-to-core line costs about 100 ns).
    let shared_len = if own_bands {
        0
    } else {
        pin_len + v_len + m_len
    };
    with_scratch(shared_len, |buf| {
        let (pin, rest) = buf.split_at_mut(if own_bands { 0 } else { pin_len });
        let pp = Shared(pin.as_mut_ptr());
        if !own_bands {
            // 1. Pad the input, one (batch, channel) plane per task.
            pool.run(threads, batches * ci, &|t| {
                let _ = &pp;
                pad_plane(
                    kern.strided_copy,
                    g,
                    input,
                    t / ci,
                    t % ci,
                    0..hp,
                    wp,
                    pp.0.add(t * plane),
                );
            });
        }
        // The band of tile rows `ty0 .. ty1`, on `threads` threads, in `vm`'s buffers, its
        // input padded in `pin` (whose planes start at padded row `row0`, `plane` apart).
        let run_band =
            |ty0: usize, ty1: usize, threads, vm: &mut [f32], pin: Shared, row0, plane| {
                let bt = (ty1 - ty0) * tx;
                let bpad = bt.div_ceil(lanes) * lanes;
                // Each of the band's tiles' top-left offset in the padded input and in the
                // band's output rows (4 tx wide); the padding lanes repeat the last tile.
                let in_idx: Vec<i32> = (0..bpad)
                    .map(|t| {
                        let t = ty0 * tx + t.min(bt - 1);
                        ((m * (t / tx) - row0) * wp + m * (t % tx)) as i32
                    })
                    .collect();
                let out_idx: Vec<i32> = (0..bpad)
                    .map(|t| {
                        let t = t.min(bt - 1);
                        (m * (t / tx) * out_ld + m * (t % tx)) as i32
                    })
                    .collect();
                // The band's output rows.
                let (oy0, oy1) = (m * ty0, (m * ty1).min(g.oh));
                let (vbuf, mbuf) = vm.split_at_mut(v_len);
                winograd_band(
                    kern,
                    pool,
                    threads,
                    g,
                    w,
                    sink,
                    Band {
                        batches,
                        plane,
                        wp,
                        bt,
                        bpad,
                        oy0,
                        oy1,
                        out_ld,
                        in_idx: &in_idx,
                        out_idx: &out_idx,
                    },
                    (pin, Shared(vbuf.as_mut_ptr()), Shared(mbuf.as_mut_ptr())),
                );
            };
        if own_bands {
            pool.run(threads, bands, &|t| {
                let (ty0, ty1) = (band_start(t), band_start(t + 1));
                if ty0 == ty1 {
                    return;
                }
                // Padded rows 4 ty0 .. 4 ty1 + 2 of every plane: the band's tiles and halo.
                let rows = m * ty0..m * ty1 + 2;
                let lplane = rows.len() * wp;
                with_scratch(v_len + m_len + batches * ci * lplane, |buf| {
                    let (vm, lpin) = buf.split_at_mut(v_len + m_len);
                    for p in 0..batches * ci {
                        let dst = lpin.as_mut_ptr().add(p * lplane);
                        pad_plane(
                            kern.strided_copy,
                            g,
                            input,
                            p / ci,
                            p % ci,
                            rows.clone(),
                            wp,
                            dst,
                        );
                    }
                    let lp = Shared(lpin.as_mut_ptr());
                    run_band(ty0, ty1, 1, vm, lp, rows.start, lplane);
                });
            });
        } else {
            for i in 0..bands {
                let (ty0, ty1) = (band_start(i), band_start(i + 1));
                if ty0 < ty1 {
                    run_band(ty0, ty1, threads, rest, pp, 0, plane);
                }
            }
        }
    });
}

/// Pads rows `rows` of channel `c` of image `b` (zeros outside the input) into `dst`, one
/// `wp`-wide row after another: padded row `py` holds input row `py - ph`.
///
/// # Safety
/// The input rows read must be readable; `dst` must hold `rows.len() * wp` floats.
#[allow(clippy::too_many_arguments)]
unsafe fn pad_plane(
    copy: crate::conv::StridedCopyFn,
    g: &Conv2d,
    input: &DirectInput,
    b: usize,
    c: usize,
    rows: std::ops::Range<usize>,
    wp: usize,
    dst: *mut f32,
) {
    let [cs, rs, es] = input.strides;
    let src = input.x.offset(input.batch[b] + c as isize * cs);
    // Padded columns [lo, hi) hold the input row, the others zeros.
    let (lo, hi) = crate::conv::in_row(-(g.pw as isize), 1, g.w, wp);
    let first = lo as isize - g.pw as isize;
    // The floats a row's copy may read (only a positive step reads by vectors).
    let avail = if es > 0 {
        (hi - lo).saturating_sub(1) * es as usize + 1
    } else {
        0
    };
    for (r, py) in rows.enumerate() {
        let iy = py as isize - g.ph as isize;
        let row = std::slice::from_raw_parts_mut(dst.add(r * wp), wp);
        if iy < 0 || iy >= g.h as isize {
            row.fill(0.0);
            continue;
        }
        let srow = src.offset(iy * rs + first * es);
        crate::conv::pad_row(copy, row, (lo, hi), srow, es, avail);
    }
}

/// One band of tile rows of [`winograd_conv`]: its tiles, their index tables, its rows.
struct Band<'a> {
    batches: usize,
    /// Floats per padded input plane, and per padded row.
    plane: usize,
    wp: usize,
    /// Tiles in the band, and rounded up to the transforms' lanes.
    bt: usize,
    bpad: usize,
    /// Output rows `oy0 .. oy1`, `out_ld` apart in the band's output planes.
    oy0: usize,
    oy1: usize,
    out_ld: usize,
    in_idx: &'a [i32],
    out_idx: &'a [i32],
}

/// Input transforms, products and output transforms of one band (see [`winograd_conv`]),
/// with the padded input, transformed input and products in the three buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn winograd_band(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    w: &WinogradWeights,
    sink: &dyn TileSink,
    band: Band,
    (pp, vp, mp): (Shared, Shared, Shared),
) {
    let (input_fn, output_fn, output_ch_fn, lanes) = if w.m == 2 {
        let f2 = kern.winograd_f2;
        (f2.input, f2.output, f2.output_channels, kern.winograd.2)
    } else {
        let (i, o, l) = kern.winograd;
        (i, o, kern.winograd_output_channels, l)
    };
    let (m, pts) = (w.m, points(w.m));
    let (ci, co) = (w.ci, w.co);
    let Band {
        batches,
        plane,
        wp,
        bt,
        bpad,
        oy0,
        oy1,
        out_ld,
        in_idx,
        out_idx,
    } = band;
    // 1. Transform the band's input, one (batch, channel) plane per task: V[b][k][c][tile].
    pool.run(threads, batches * ci, &|t| {
        let _ = (&pp, &vp);
        let (b, c) = (t / ci, t % ci);
        let src = pp.0.add(t * plane);
        let vb = vp.0.add(b * pts * ci * bpad + c * bpad);
        for t0 in (0..bt).step_by(lanes) {
            let n = lanes.min(bt - t0);
            input_fn(src, in_idx.as_ptr().add(t0), wp, vb.add(t0), ci * bpad, n);
        }
    });
    // 2. The 36 products per batch: M[b][k] = U[k] V[b][k] (channels as rows), or for few
    // tiles M[b][k]^T = V[b][k]^T U[k]^T (tiles as rows, so the channels fill the column
    // panels).
    if w.tiles_as_rows {
        let gm = Gemm {
            batch: batches * pts,
            m: bt,
            n: co,
            k: ci,
            a: Lhs::Strided(
                MatRef {
                    ptr: vp.0,
                    rs: 1,
                    cs: bpad as isize,
                },
                Batches::Stride((ci * bpad) as isize),
            ),
            b: Rhs::PackedEach(&w.ut),
        };
        let store = StoreC {
            c: mp.0,
            ldc: co,
            batch_stride: bpad * co,
        };
        gemm(kern, pool, threads, &gm, &store);
    } else {
        let gm = Gemm {
            batch: batches * pts,
            m: co,
            n: bt,
            k: ci,
            a: Lhs::PackedEach(&w.u),
            b: Rhs::Strided(
                MatRef::rows(vp.0, bpad),
                Batches::Stride((ci * bpad) as isize),
            ),
        };
        let store = StoreC {
            c: mp.0,
            ldc: bpad,
            batch_stride: co * bpad,
        };
        gemm(kern, pool, threads, &gm, &store);
    }
    // Where point k of channel o, tile t is: base + k * pstride + o * ostride + t * tstride.
    let (pstride, ostride, tstride) = if w.tiles_as_rows {
        (bpad * co, 1, co)
    } else {
        (co * bpad, bpad, 1)
    };
    // 3. Output transforms, one (batch, channel) plane per task; rows to the sink. With
    // tiles as rows a tile's channels are contiguous: whole blocks of `lanes` channels go
    // one tile at a time (no gathers), one task per (batch, block), the channels past the
    // last whole block one by one below.
    let blocks = if w.tiles_as_rows { co / lanes } else { 0 };
    let plane_len = (bt / (out_ld / m)) * m * out_ld;
    let rows = oy1 - oy0;
    // Hands a band's output plane of channel `o` to the sink.
    let emit = |b: usize, o: usize, plane_out: &mut [f32]| {
        if out_ld == g.ow {
            // Whole tile rows: the band's rows are one run of the channel's output row.
            let px = rows * g.ow;
            sink.tile(b, o, oy0 * g.ow, 1, px, &mut plane_out[..px], px);
        } else {
            for oy in 0..rows {
                let row = &mut plane_out[oy * out_ld..oy * out_ld + g.ow];
                sink.tile(b, o, (oy0 + oy) * g.ow, 1, g.ow, row, out_ld);
            }
        }
    };
    pool.run(threads, batches * blocks, &|t| {
        let _ = &mp;
        let (b, o0) = (t / blocks, (t % blocks) * lanes);
        let mb = mp.0.add(b * pts * co * bpad + o0);
        with_scratch(lanes * plane_len, |planes| {
            for (tile, &at) in out_idx[..bt].iter().enumerate() {
                output_ch_fn(
                    mb.add(tile * co),
                    pstride,
                    planes.as_mut_ptr().add(at as usize),
                    plane_len,
                    out_ld,
                );
            }
            if out_ld == g.ow {
                // Each plane is its channel's run of output rows: one call for the block.
                let px = rows * g.ow;
                sink.tile(b, o0, oy0 * g.ow, lanes, px, planes, plane_len);
            } else {
                for (l, plane) in planes.chunks_exact_mut(plane_len).enumerate() {
                    emit(b, o0 + l, plane);
                }
            }
        });
    });
    let rest = co - blocks * lanes;
    pool.run(threads, batches * rest, &|t| {
        let _ = &mp;
        let (b, o) = (t / rest, blocks * lanes + t % rest);
        let mb = mp.0.add(b * pts * co * bpad + o * ostride);
        with_scratch(plane_len, |plane_out| {
            for t0 in (0..bt).step_by(lanes) {
                let n = lanes.min(bt - t0);
                output_fn(
                    mb.add(t0 * tstride),
                    pstride,
                    tstride,
                    plane_out.as_mut_ptr(),
                    out_idx.as_ptr().add(t0),
                    out_ld,
                    n,
                );
            }
            emit(b, o, plane_out);
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::StoreC;
    use crate::isa_tests;
    use crate::testing::rand_vec;

    fn check(kern: &Kernels) {
        // One thread runs the bands in turn, each on all threads; two or three run whole
        // bands each (a band count the threads divide).
        for threads in [1, 2, 3] {
            check_on(kern, 4, threads);
        }
    }

    fn check_f2(kern: &Kernels) {
        for threads in [1, 2, 3] {
            check_on(kern, 2, threads);
        }
    }

    fn check_on(kern: &Kernels, m: usize, threads: usize) {
        for &(c, co, h, w, p) in &[
            (1, 1, 1, 1, 1),
            (3, 5, 7, 9, 1),
            (4, 7, 16, 16, 1),
            (5, 3, 13, 37, 0),
            (2, 9, 40, 6, 1),
            (3, 4, 36, 40, 1),
            // Tiles as rows with whole blocks of channels and a rest, rows whole or not.
            (3, 35, 12, 12, 1),
            (2, 20, 10, 11, 1),
            // Many channels on a tall image: several bands of tile rows, the last short
            // and its last tile row cut by the image's edge.
            (64, 5, 83, 42, 0),
            // Rows of whole groups of eight and sixteen tiles, the last reaching the
            // padded row's end (AVX2 loads such groups whole).
            (2, 6, 9, 64, 1),
        ] {
            let oh = h + 2 * p - 2;
            let ow = w + 2 * p - 2;
            if oh == 0 || ow == 0 {
                continue;
            }
            let g = Conv2d {
                c,
                h,
                w,
                kh: 3,
                kw: 3,
                sh: 1,
                sw: 1,
                dh: 1,
                dw: 1,
                ph: p,
                pw: p,
                oh,
                ow,
            };
            let batches = 2;
            let x = rand_vec(batches * c * h * w, 3);
            let wt = rand_vec(co * c * 9, 4);
            let ww = WinogradWeights::new(kern, m, co, c, &wt, tiles(&g, m));
            let mut out = vec![f32::NAN; batches * co * oh * ow];
            let sink = StoreC {
                c: out.as_mut_ptr(),
                ldc: oh * ow,
                batch_stride: co * oh * ow,
            };
            let offsets = [0isize, (c * h * w) as isize];
            let input = DirectInput {
                x: x.as_ptr(),
                batch: &offsets,
                strides: [(h * w) as isize, w as isize, 1],
            };
            unsafe {
                winograd_conv(
                    kern,
                    crate::pool::global(),
                    threads,
                    &g,
                    batches,
                    &input,
                    &ww,
                    &sink,
                )
            };
            for b in 0..batches {
                for o in 0..co {
                    for y in 0..oh {
                        for xo in 0..ow {
                            let mut want = 0f64;
                            for ci in 0..c {
                                for i in 0..3 {
                                    for j in 0..3 {
                                        let iy = (y + i) as isize - p as isize;
                                        let ix = (xo + j) as isize - p as isize;
                                        if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize
                                        {
                                            want += wt[(o * c + ci) * 9 + i * 3 + j] as f64
                                                * x[(b * c + ci) * h * w
                                                    + iy as usize * w
                                                    + ix as usize]
                                                    as f64;
                                        }
                                    }
                                }
                            }
                            let got = out[((b * co + o) * oh + y) * ow + xo] as f64;
                            assert!(
                                (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                                "{} F({m}x{m}) t{threads} c{c} co{co} {h}x{w} p{p} ({b},{o},{y},{xo}): {got} vs {want}",
                                kern.isa
                            );
                        }
                    }
                }
            }
        }
    }

    isa_tests!(winograd_f4x4, check);
    isa_tests!(winograd_f2x2, check_f2);

    #[test]
    fn cost_model_takes_f2_for_small_images() {
        let g = |hw: usize| Conv2d {
            c: 256,
            h: hw,
            w: hw,
            kh: 3,
            kw: 3,
            sh: 1,
            sw: 1,
            dh: 1,
            dw: 1,
            ph: 1,
            pw: 1,
            oh: hw,
            ow: hw,
        };
        // 14x14: F(4x4) has 16 tiles, F(2x2) 49, the direct product 196 pixels.
        assert!(cost(&g(14), 2) < cost(&g(14), 4));
        assert!(cost(&g(14), 2) < cost(&g(14), 1));
        // 28x28 and 56x56: F(4x4).
        assert!(cost(&g(28), 4) < cost(&g(28), 2));
        assert!(cost(&g(56), 4) < cost(&g(56), 2));
        // 7x7: the direct product (F(2x2)'s 16 tiles leave its weights waiting on memory).
        assert!(cost(&g(7), 1) < cost(&g(7), 2));
    }
}
