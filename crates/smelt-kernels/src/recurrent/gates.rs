//! The recurrent product of a step with few batch rows: `rows x NR` tiles of several gates'
//! packed panels at once. One row's tile of one panel is only two accumulator chains, which
//! the FMA latency throttles to half the core's rate; a block of gates side by side gives
//! every step of k enough independent chains. Each element is the same sum, in the same
//! order, as the GEMM micro-kernel's.

use crate::simd::Vf;

/// Rows the gate kernels take (more go through the GEMM micro-kernels).
pub const GATE_ROWS: usize = 4;

/// Gates (panels) one call takes at most.
pub const MAX_GATES: usize = 4;

/// `(k, a, a_row_step, rows, panels, gates, out, out_gate_step)`: for each of the first
/// `gates` packed panels (`k` steps of `nr` floats), the `rows x nr` product of A's rows
/// (`k` floats each, `a_row_step` apart) with it, stored row-major (row stride `nr`) at
/// `out + gate * out_gate_step`.
///
/// # Safety
/// `rows` is 1..=[`GATE_ROWS`], `gates` 1..=[`MAX_GATES`]; every pointer covers what it
/// describes.
pub type GatesFn =
    unsafe fn(usize, *const f32, usize, usize, &[*const f32; 4], usize, *mut f32, usize);

/// `R` rows by `G` panels of `NV` vectors each.
// Index loops over the fixed-size accumulator arrays: LLVM unrolls them into registers.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn block<V: Vf, const R: usize, const G: usize, const NV: usize>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    b: &[*const f32; 4],
    out: *mut f32,
    out_gs: usize,
) {
    let nr = NV * V::LANES;
    let mut acc = [[[V::splat(0.0); NV]; G]; R];
    for p in 0..k {
        let mut bv = [[V::splat(0.0); NV]; G];
        for g in 0..G {
            for v in 0..NV {
                bv[g][v] = V::load(b[g].add(p * nr + v * V::LANES));
            }
        }
        for r in 0..R {
            let av = V::splat(*a.add(r * a_rs + p));
            for g in 0..G {
                for v in 0..NV {
                    acc[r][g][v] = av.fma(bv[g][v], acc[r][g][v]);
                }
            }
        }
    }
    for r in 0..R {
        for g in 0..G {
            for v in 0..NV {
                acc[r][g][v].store(out.add(g * out_gs + r * nr + v * V::LANES));
            }
        }
    }
}

/// `R` rows of any number of gates, up to `G` panels per pass (the last pass takes what is
/// left: GRU's three gates in one pass of 3, or of 2 then 1).
#[inline(always)]
unsafe fn rows<V: Vf, const R: usize, const G: usize, const NV: usize>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    b: &[*const f32; 4],
    gates: usize,
    out: *mut f32,
    out_gs: usize,
) {
    let mut g0 = 0;
    while g0 < gates {
        let n = (gates - g0).min(G);
        let mut bs = [std::ptr::null(); 4];
        bs[..n].copy_from_slice(&b[g0..g0 + n]);
        let o = out.add(g0 * out_gs);
        match n {
            4 => block::<V, R, 4, NV>(k, a, a_rs, &bs, o, out_gs),
            3 => block::<V, R, 3, NV>(k, a, a_rs, &bs, o, out_gs),
            2 => block::<V, R, 2, NV>(k, a, a_rs, &bs, o, out_gs),
            _ => block::<V, R, 1, NV>(k, a, a_rs, &bs, o, out_gs),
        }
        g0 += n;
    }
}

/// The kernel body for vectors `V`, `NV` per panel, and `G1`/`G2`/`G3` panels per pass
/// for one to four rows (sized to the register file).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gates_body<
    V: Vf,
    const NV: usize,
    const G1: usize,
    const G2: usize,
    const G3: usize,
    const G4: usize,
>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    nrows: usize,
    b: &[*const f32; 4],
    gates: usize,
    out: *mut f32,
    out_gs: usize,
) {
    match nrows {
        1 => rows::<V, 1, G1, NV>(k, a, a_rs, b, gates, out, out_gs),
        2 => rows::<V, 2, G2, NV>(k, a, a_rs, b, gates, out, out_gs),
        3 => rows::<V, 3, G3, NV>(k, a, a_rs, b, gates, out, out_gs),
        _ => rows::<V, 4, G4, NV>(k, a, a_rs, b, gates, out, out_gs),
    }
}

/// [`GatesFn`] on scalars (the portable micro-kernel's 8-wide panels).
///
/// # Safety
/// As for [`GatesFn`], with 8-float panels.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gates_portable(
    k: usize,
    a: *const f32,
    a_rs: usize,
    nrows: usize,
    b: &[*const f32; 4],
    gates: usize,
    out: *mut f32,
    out_gs: usize,
) {
    gates_body::<f32, { crate::gemm::micro::PORTABLE_NR }, 2, 1, 1, 1>(
        k, a, a_rs, nrows, b, gates, out, out_gs,
    )
}

/// x86 instances.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::gates_body;

    /// [`super::GatesFn`] with AVX2+FMA (16-float panels, 16 registers).
    ///
    /// # Safety
    /// As for [`super::GatesFn`], on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gates_avx2(
        k: usize,
        a: *const f32,
        a_rs: usize,
        nrows: usize,
        b: &[*const f32; 4],
        gates: usize,
        out: *mut f32,
        out_gs: usize,
    ) {
        gates_body::<crate::simd::Y8, 2, 4, 2, 1, 1>(k, a, a_rs, nrows, b, gates, out, out_gs)
    }

    /// [`super::GatesFn`] with AVX-512 (32-float panels, 32 registers).
    ///
    /// # Safety
    /// As for [`super::GatesFn`], on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gates_avx512(
        k: usize,
        a: *const f32,
        a_rs: usize,
        nrows: usize,
        b: &[*const f32; 4],
        gates: usize,
        out: *mut f32,
        out_gs: usize,
    ) {
        gates_body::<crate::simd::Z16, 2, 4, 4, 3, 2>(k, a, a_rs, nrows, b, gates, out, out_gs)
    }
}
