//! Fused elementwise bodies compiled to machine code (x86-64, AVX-512 or AVX2; a plan
//! compiles a loop when it first runs it): every op's values held in vector registers across the whole body, groups of up
//! to 8 vectors at a time, loads and stores straight from and to the tensors' rows. The
//! interpreter ([`crate::program`]) dispatches once per op and tile and keeps the values
//! it cannot hold in memory; bodies with an op that has no generated form here (exp, erf,
//! tanh..., and reductions' `Acc`/`Reduced`) stay with it. Both give the same bits (NaN
//! payloads apart).
//!
//! x86-64 Linux only (executable memory by `mmap`); elsewhere nothing compiles and every
//! body is interpreted. `SMELT_JIT=0` turns it off.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod emit;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod exec;
mod schedule;

use crate::Isa;
use smelt_ir::kernel::ScalarOp;

/// How a window is read along a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Element `j` at `ptr + j` (f32).
    Contiguous,
    /// The one f32 at `ptr`, for every element.
    Broadcast,
}

/// Most vectors a group holds per value.
const MAX_GROUP: usize = 8;

/// Most windows a row may stream its stores with (more run the usual way).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const MAX_WINDOWS: usize = 32;

/// Whether generated code may be used (`SMELT_JIT=0` says no).
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("SMELT_JIT").map_or(true, |v| v != "0"))
}

/// Whether this build generates code at all (x86-64 Linux) and may use it.
pub fn available() -> bool {
    cfg!(all(target_arch = "x86_64", target_os = "linux")) && enabled()
}

/// A body compiled for one instruction set.
pub struct BodyJit {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    code: exec::ExecCode,
    /// The same body storing whole vectors past the caches, for rows whose stores are
    /// aligned alike (see [`BodyJit::compile`]).
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    streaming: Option<exec::ExecCode>,
    /// The hoisted constants; the code holds their address.
    _consts: Box<[f32]>,
    isa: Isa,
    access: Vec<Access>,
    /// The stored windows.
    stored: Vec<usize>,
    /// Elements in a vector, and in a group.
    lanes: usize,
    group: usize,
}

/// Vectors a group holds per value and lanes in a vector for `sched` on `isa`, or `None`
/// when the ISA has no code generator or the values need more registers than it has.
fn group_vectors(isa: Isa, sched: &schedule::Schedule) -> Option<(usize, usize)> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        use emit::VecIsa;
        let (nregs, temps, lanes) = match isa {
            Isa::Avx512 => (emit::Avx512::NREGS, emit::Avx512::TEMPS, 16),
            Isa::Avx2 => (emit::Avx2::NREGS, emit::Avx2::TEMPS, 8),
            Isa::Portable => return None,
        };
        let free = nregs.checked_sub(temps + sched.consts.len())?;
        let u = (free / sched.slots.max(1)).min(MAX_GROUP);
        (u > 0).then_some((u, lanes))
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = (isa, sched);
        None
    }
}

/// The generated function: window row pointers, groups, single vectors, tail mask.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
type Entry = unsafe extern "sysv64" fn(*const *mut f32, usize, usize, *const u32);

impl BodyJit {
    /// Compiles the body that stores `stores` (`(op, window)`), `order` being the ops the
    /// stores need (ascending); `access[w]` says how window `w` is read or written (stores
    /// contiguous), and `Load(w)` reads window `w`. With `stream` (for outputs larger than
    /// the caches, which the next reader finds in memory anyway) long rows store whole
    /// vectors past the caches, which spares memory the reads of the lines being
    /// overwritten. `None` when the ISA has no code generator, an op has no generated
    /// form, or the values need more registers than there are.
    pub fn compile(
        isa: Isa,
        ops: &[ScalarOp],
        order: &[usize],
        access: &[Access],
        stores: &[(usize, usize)],
        stream: bool,
    ) -> Option<BodyJit> {
        if !enabled() {
            return None;
        }
        let sched = Self::checked(ops, order, access, stores)?;
        Self::generate(isa, ops, access, stores, sched, stream)
    }

    /// Whether [`BodyJit::compile`] would give code, without generating it (no encoder
    /// tables, no mapping: what a plan may ask of every loop it holds).
    pub fn compiles(
        isa: Isa,
        ops: &[ScalarOp],
        order: &[usize],
        access: &[Access],
        stores: &[(usize, usize)],
    ) -> bool {
        available()
            && Self::checked(ops, order, access, stores)
                .is_some_and(|s| group_vectors(isa, &s).is_some())
    }

    /// The body's schedule, when its windows and ops allow code.
    fn checked(
        ops: &[ScalarOp],
        order: &[usize],
        access: &[Access],
        stores: &[(usize, usize)],
    ) -> Option<schedule::Schedule> {
        for op in ops {
            if let ScalarOp::Load(w) = *op {
                access.get(w)?;
            }
        }
        for &(v, w) in stores {
            if v >= ops.len() || access.get(w) != Some(&Access::Contiguous) {
                return None;
            }
        }
        let roots: Vec<usize> = stores.iter().map(|s| s.0).collect();
        schedule::schedule(ops, order, &roots)
    }

    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn generate(
        isa: Isa,
        ops: &[ScalarOp],
        access: &[Access],
        stores: &[(usize, usize)],
        sched: schedule::Schedule,
        stream: bool,
    ) -> Option<BodyJit> {
        if !isa.is_supported() {
            return None;
        }
        let (u, lanes) = group_vectors(isa, &sched)?;
        let consts: Box<[f32]> = sched.consts.clone().into_boxed_slice();
        let assemble = |stream: bool| {
            let body = emit::Body {
                ops,
                access,
                stores,
                sched: &sched,
                u,
                consts: consts.as_ptr(),
                stream,
            };
            let bytes = match isa {
                Isa::Avx512 => emit::assemble::<emit::Avx512>(&body, access.len()),
                _ => emit::assemble::<emit::Avx2>(&body, access.len()),
            }
            .ok()?;
            exec::ExecCode::new(&bytes)
        };
        Some(BodyJit {
            code: assemble(false)?,
            streaming: if stream { Some(assemble(true)?) } else { None },
            _consts: consts,
            isa,
            access: access.to_vec(),
            stored: stores.iter().map(|s| s.1).collect(),
            lanes,
            group: u * lanes,
        })
    }

    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    fn generate(
        _: Isa,
        _: &[ScalarOp],
        _: &[Access],
        _: &[(usize, usize)],
        _: schedule::Schedule,
        _: bool,
    ) -> Option<BodyJit> {
        None
    }

    /// Runs the body over `n` elements of one row: `ptrs[w]` is window `w`'s first element.
    ///
    /// # Safety
    /// Each contiguous window must hold `n` f32 at its pointer (readable, and writable for
    /// the stores), each broadcast window one; a stored window overlaps no other window
    /// but one it reads at the same place.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    pub unsafe fn run(&self, ptrs: &[*mut f32], n: usize) {
        assert_eq!(ptrs.len(), self.access.len(), "one pointer per window");
        if let Some(streaming) = &self.streaming {
            // The elements up to the first store's vector boundary the usual way, the rest
            // streamed, when every store is as far from a boundary.
            let bytes = self.lanes * 4;
            let at = |w: usize| ptrs[w] as usize % bytes;
            let first = self.stored.first().map_or(0, |&w| at(w));
            if n >= 4 * self.group
                && ptrs.len() <= MAX_WINDOWS
                && first.is_multiple_of(4)
                && self.stored.iter().all(|&w| at(w) == first)
            {
                let head = (bytes - first) % bytes / 4;
                if head > 0 {
                    self.call(&self.code, ptrs, head);
                }
                let mut rest = [std::ptr::null_mut::<f32>(); MAX_WINDOWS];
                for ((r, &p), a) in rest.iter_mut().zip(ptrs).zip(&self.access) {
                    *r = match a {
                        Access::Contiguous => p.add(head),
                        Access::Broadcast => p,
                    };
                }
                self.call(streaming, &rest[..ptrs.len()], n - head);
                return;
            }
        }
        self.call(&self.code, ptrs, n);
    }

    /// Runs `code` over `n` elements from `ptrs` (see [`BodyJit::run`]).
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    unsafe fn call(&self, code: &exec::ExecCode, ptrs: &[*mut f32], n: usize) {
        let groups = n / self.group;
        let rest = n % self.group;
        let (singles, tail) = (rest / self.lanes, rest % self.lanes);
        // AVX-512 reads the mask's low 16 bits; AVX2 all 8 lanes' words.
        let mut mask = [0u32; 8];
        if self.isa == Isa::Avx512 {
            mask[0] = (1u32 << tail) - 1;
        } else {
            mask[..tail].fill(u32::MAX);
        }
        let mask = if tail > 0 {
            mask.as_ptr()
        } else {
            std::ptr::null()
        };
        // SAFETY: the code was generated for this body and ISA (checked supported), and
        // reads and writes only what the caller vouches for.
        let f: Entry = std::mem::transmute(code.entry());
        f(ptrs.as_ptr(), groups, singles, mask);
    }

    /// See the x86-64 form (never compiled elsewhere).
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    pub unsafe fn run(&self, _: &[*mut f32], _: usize) {
        unreachable!("no generated code on this architecture")
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;
    use crate::program::{fill_consts, CHUNK, SLOT};
    use smelt_ir::kernel::ScalarOp::{Binary as B, Const, Load, Select, Unary as U};
    use smelt_ir::kernel::{Binary, Unary};

    const UNARY: [Unary; 12] = [
        Unary::Neg,
        Unary::Abs,
        Unary::Sqrt,
        Unary::Relu,
        Unary::Floor,
        Unary::Ceil,
        Unary::Round,
        Unary::Recip,
        Unary::Rsqrt,
        Unary::Not,
        Unary::IsNan,
        Unary::Sign,
    ];
    const BINARY: [Binary; 13] = [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::Max,
        Binary::Min,
        Binary::Eq,
        Binary::Lt,
        Binary::Le,
        Binary::Gt,
        Binary::Ge,
        Binary::And,
        Binary::Or,
    ];

    /// Inputs with the values the ops treat specially: zeros of both signs, NaN,
    /// infinities, halves (rounding), equal pairs.
    fn input(n: usize, seed: u64) -> Vec<f32> {
        let mut x = crate::testing::rand_vec(n, seed);
        let special = [0.0, -0.0, f32::NAN, f32::INFINITY, -2.5, 0.5, 1.0, -1.0];
        for (j, v) in x.iter_mut().enumerate() {
            if (j as u64 * 7 + seed).is_multiple_of(5) {
                *v = special[(j + seed as usize) % special.len()];
            }
        }
        x
    }

    /// The interpreter's values of `roots` over `n` elements, chunk by chunk, windows
    /// filled as `access` says.
    fn interpret(
        kern: &crate::Kernels,
        ops: &[ScalarOp],
        order: &[usize],
        roots: &[usize],
        data: &[Vec<f32>],
        access: &[Access],
        n: usize,
    ) -> Vec<Vec<f32>> {
        let mut out = vec![Vec::new(); roots.len()];
        let mut vals = vec![0f32; ops.len() * SLOT];
        fill_consts(ops, &mut vals);
        let mut lo = 0;
        while lo < n {
            let len = CHUNK.min(n - lo);
            for (i, op) in ops.iter().enumerate() {
                if let Load(w) = *op {
                    let slot = &mut vals[i * SLOT..i * SLOT + len];
                    match access[w] {
                        Access::Broadcast => slot.fill(data[w][0]),
                        Access::Contiguous => slot.copy_from_slice(&data[w][lo..lo + len]),
                    }
                }
            }
            (kern.eval)(ops, order, &[], len, &mut vals, &[]);
            for (o, &r) in out.iter_mut().zip(roots) {
                o.extend_from_slice(&vals[r * SLOT..r * SLOT + len]);
            }
            lo += len;
        }
        out
    }

    /// Random bodies of every generated op (operands mostly the op just before, some
    /// constants, some windows broadcast, several stores, one in place of a load) give the
    /// interpreter's bits at lengths around every group, vector and chunk edge.
    fn matches_interpreter(isa: Isa) {
        let kern = crate::Kernels::for_isa(isa).expect("supported");
        let mut pick = crate::testing::Picker(11u64);
        let mut next = |n: usize| pick.below(n);
        let mut compiled = 0;
        for case in 0..150u64 {
            let loads = 1 + next(4);
            let mut ops: Vec<ScalarOp> = (0..loads).map(Load).collect();
            ops.push(Const([0.0, 2.0, -0.5, 3.0][next(4)]));
            for _ in 0..1 + next(24) {
                let last = ops.len() - 1;
                let a = if next(3) != 0 { last } else { next(last + 1) };
                let (b, c) = (next(last + 1), next(last + 1));
                ops.push(match next(9) {
                    0..=2 => U(UNARY[next(UNARY.len())], a),
                    3..=7 => B(BINARY[next(BINARY.len())], a, b),
                    _ => Select(a, b, c),
                });
            }
            let n_ops = ops.len();
            let mut access: Vec<Access> = (0..loads)
                .map(|w| {
                    if w > 0 && next(3) == 0 {
                        Access::Broadcast
                    } else {
                        Access::Contiguous
                    }
                })
                .collect();
            // Stores: the last op, maybe others; the first to a fresh window, then maybe
            // one in place of load 0 (contiguous).
            let mut stores = vec![(n_ops - 1, loads)];
            access.push(Access::Contiguous);
            for v in loads + 1..n_ops - 1 {
                if next(6) == 0 {
                    stores.push((v, access.len()));
                    access.push(Access::Contiguous);
                }
            }
            let in_place = next(2) == 0;
            if in_place {
                stores.push((n_ops - 2, 0));
            }
            let roots: Vec<usize> = stores.iter().map(|s| s.0).collect();
            let order = smelt_ir::kernel::check::deps(&ops, &roots);
            // Every other body also streams its stores on long rows.
            let stream = case % 2 == 0;
            let Some(jit) = BodyJit::compile(isa, &ops, &order, &access, &stores, stream) else {
                continue;
            };
            compiled += 1;
            for n in [1, 7, 16, 17, 40, 128, 129, 255, 300, 777, 2049] {
                let data: Vec<Vec<f32>> = (0..access.len())
                    .map(|w| input(n, case * 100 + w as u64))
                    .collect();
                let want = interpret(kern, &ops, &order, &roots, &data, &access, n);
                // Each window a few floats into its buffer: stores aligned alike or not.
                let skew = |w: usize| (case as usize + n) % 3 * (w % 2);
                let mut bufs: Vec<Vec<f32>> = data
                    .iter()
                    .enumerate()
                    .map(|(w, d)| [vec![0.0; skew(w)], d.clone()].concat())
                    .collect();
                let ptrs: Vec<*mut f32> = (bufs.iter_mut().enumerate())
                    .map(|(w, b)| b[skew(w)..].as_mut_ptr())
                    .collect();
                unsafe { jit.run(&ptrs, n) };
                for (k, &(v, w)) in stores.iter().enumerate() {
                    for j in 0..n {
                        let (a, b) = (want[k][j], bufs[w][skew(w) + j]);
                        assert!(
                            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                            "{isa:?} case {case} n {n} store {k} (op {v}: {:?}) at {j}: \
                             interpreted {a}, generated {b}\nops {ops:?}",
                            ops[v]
                        );
                    }
                }
            }
        }
        assert!(compiled > 100, "{isa:?}: only {compiled} bodies compiled");
    }

    #[test]
    fn generated_code_matches_interpreter() {
        for isa in [Isa::Avx2, Isa::Avx512] {
            if isa.is_supported() {
                matches_interpreter(isa);
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod timing {
    use super::*;
    use smelt_ir::kernel::Binary;
    use smelt_ir::kernel::ScalarOp::{Binary as B, Load};

    /// How long compiling a small body takes, first in the process and then
    /// (`cargo test --release -p smelt-kernels jit_compile_time -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn jit_compile_time() {
        let ops = vec![Load(0), Load(1), B(Binary::Add, 0, 1), B(Binary::Mul, 2, 0)];
        let access = [Access::Contiguous; 3];
        for k in 0..5 {
            let t = std::time::Instant::now();
            let j = BodyJit::compile(
                Isa::detect(),
                &ops,
                &[0, 1, 2, 3],
                &access,
                &[(3, 2)],
                false,
            );
            println!("compile {k}: {:?} ({})", t.elapsed(), j.is_some());
        }
    }
}
