//! Recurrent layers (LSTM, GRU, simple RNN): the input projection of every step as one
//! GEMM, then per step the recurrent products `H_{t-1} R_g^T` of each gate on R^T packed
//! once per gate, and the gate math fused into one vectorized pass. A step is split into
//! blocks of hidden units (one micro-kernel panel wide): a block's products for all gates
//! and its gate math need only its own columns, so blocks run on the pool's threads with
//! one join per step, each thread keeping its own slice of R in its caches.
//!
//! The layout is ONNX's: gates in the order i, o, f, c (LSTM), z, r, h (GRU); peepholes
//! i, o, f; X is `[seq, batch, input]` (or `[batch, seq, input]`), Y `[seq, dirs, batch,
//! hidden]` (or `[batch, seq, dirs, hidden]`), the states `[dirs, batch, hidden]` (or
//! `[batch, dirs, hidden]`).

pub mod cell;
pub mod gates;

use crate::buf::{return_scratch, take_scratch};
use crate::gemm::{gemm, pack::MatRef, Batches, Gemm, Lhs, PackedB, Rhs, StoreC};
use crate::pool::ThreadPool;
use crate::Kernels;
use cell::{Act, Cell, CellKind};
use gates::{GATE_ROWS, MAX_GATES};

/// Which recurrent layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// LSTM (sigmoid, tanh, tanh).
    Lstm,
    /// GRU (sigmoid, tanh).
    Gru {
        /// The hidden gate's recurrent product is taken before the reset gate scales it.
        linear_before_reset: bool,
    },
    /// A simple RNN with its activation.
    Rnn(Act),
}

impl Kind {
    /// Gates per unit: the blocks of W, R and the biases.
    pub fn gates(self) -> usize {
        match self {
            Kind::Lstm => 4,
            Kind::Gru { .. } => 3,
            Kind::Rnn(_) => 1,
        }
    }
}

/// The weights of one direction, packed for the kernels.
pub struct Weights {
    /// W^T, `input x gates * h`.
    pub w: PackedB,
    /// R_g^T of each gate, `h x h`.
    pub r: Vec<PackedB>,
    /// Added to each gate's pre-activation, `gates * h`: Wb + Rb, except for GRU's hidden
    /// gate (Wb only, its Rb is `rbias`).
    pub bias: Vec<f32>,
    /// GRU: the hidden gate's Rb, `h` (else empty).
    pub rbias: Vec<f32>,
    /// LSTM peepholes `3h`, if any.
    pub peep: Option<Vec<f32>>,
}

impl Weights {
    /// Packs direction `d` of W `[dirs, gates * h, input]`, R `[dirs, gates * h, h]`, B
    /// `[dirs, 2 * gates * h]` and P `[dirs, 3h]` (LSTM).
    #[allow(clippy::too_many_arguments)]
    pub fn pack(
        kern: &Kernels,
        kind: Kind,
        d: usize,
        (input, h): (usize, usize),
        w: &[f32],
        r: &[f32],
        b: Option<&[f32]>,
        p: Option<&[f32]>,
    ) -> Weights {
        let g = kind.gates() * h;
        let w = &w[d * g * input..(d + 1) * g * input];
        let r = &r[d * g * h..(d + 1) * g * h];
        let gru = matches!(kind, Kind::Gru { .. });
        let (bias, rbias) = match b {
            Some(b) => {
                let b = &b[d * 2 * g..(d + 1) * 2 * g];
                let own = |j: usize| gru && j >= 2 * h;
                let bias = (0..g)
                    .map(|j| if own(j) { b[j] } else { b[j] + b[g + j] })
                    .collect();
                let rbias = if gru {
                    b[g + 2 * h..].to_vec()
                } else {
                    Vec::new()
                };
                (bias, rbias)
            }
            None => (vec![0.0; g], if gru { vec![0.0; h] } else { Vec::new() }),
        };
        Weights {
            w: PackedB::new(&kern.micro, input, g, w, 1, input),
            r: (0..kind.gates())
                .map(|gi| PackedB::new(&kern.micro, h, h, &r[gi * h * h..], 1, h))
                .collect(),
            bias,
            rbias,
            peep: p.map(|p| p[d * 3 * h..(d + 1) * 3 * h].to_vec()),
        }
    }
}

/// One recurrent layer's sizes and options.
#[derive(Clone, Copy, Debug)]
pub struct Layer {
    /// Which layer.
    pub kind: Kind,
    /// Steps.
    pub seq: usize,
    /// Batch rows.
    pub batch: usize,
    /// Input width.
    pub input: usize,
    /// Hidden size.
    pub hidden: usize,
    /// The batch-major layout.
    pub batch_major: bool,
    /// Clip threshold (infinity: none).
    pub clip: f32,
}

/// A raw pointer the step's blocks share: each writes its own units' states.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: see `Steps::block` and `Sweep::rows`: a phase's blocks write disjoint units (and
// sweeps disjoint rows), and read only what no block of the phase writes.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// Batch rows of states: the first row and the row stride.
#[derive(Clone, Copy)]
struct Rows(Shared, usize);

impl Rows {
    /// Unit `u` of row `b` (wrapping: the rows of an unused, empty buffer are formed but
    /// never read).
    fn at(self, b: usize, u: usize) -> *mut f32 {
        self.0 .0.wrapping_add(b * self.1 + u)
    }
}

/// One phase of a step: the products of `gates` on `operand`, then the cell `kind`.
struct Phase<'a> {
    kind: CellKind,
    gates: &'a [usize],
    operand: Rows,
    /// The cell's `h_next`.
    out: Rows,
}

/// What every block of a layer's steps shares.
struct Steps<'a> {
    kern: &'a Kernels,
    l: &'a Layer,
    w: &'a Weights,
    /// Batch rows of this sweep.
    batch: usize,
    xw: Shared,
    h_prev: Rows,
    /// LSTM's cell states or GRU's update gate.
    c: Shared,
    /// The rows of x at this step: the first, and the stride between batch rows.
    x_rows: (usize, usize),
    /// Rows per block.
    block_rows: usize,
}

impl Steps<'_> {
    /// Runs block `task` (`units` chunk-major, so a thread keeps its slice of R) of `ph`.
    unsafe fn block(&self, ph: &Phase, task: usize) {
        let (l, w, micro) = (self.l, self.w, &self.kern.micro);
        let (h, nr, batch) = (l.hidden, micro.nr, self.batch);
        let blocks = batch.div_ceil(self.block_rows);
        let (chunk, rb) = (task / blocks, task % blocks);
        let u0 = chunk * nr;
        let b0 = rb * self.block_rows;
        let rows = self.block_rows.min(batch - b0);
        // The gates' rows x nr products, gate after gate, written whole before the cell
        // reads them.
        let mut tile = std::mem::MaybeUninit::<[f32; MAX_GATES * TILE]>::uninit();
        let tile = tile.as_mut_ptr().cast::<f32>();
        let gs = rows * nr;
        let (a, a_rs) = (ph.operand.at(b0, 0), ph.operand.1);
        let mut panels = [std::ptr::null(); 4];
        for (p, &g) in panels.iter_mut().zip(ph.gates) {
            *p = w.r[g].panel(chunk).as_ptr();
        }
        if rows <= GATE_ROWS {
            let n = ph.gates.len();
            (self.kern.recurrent_gates)(h, a, a_rs, rows, &panels, n, tile, gs);
        } else {
            let ker = micro.for_rows(rows);
            for (i, &p) in panels[..ph.gates.len()].iter().enumerate() {
                ker(
                    h,
                    a,
                    a_rs as isize,
                    1,
                    p,
                    nr as isize,
                    tile.add(i * gs),
                    nr,
                    false,
                );
            }
        }
        let gh = l.kind.gates() * h;
        let (r0, rs) = self.x_rows;
        let opt = |v: &[f32]| {
            if v.is_empty() {
                std::ptr::null()
            } else {
                v.as_ptr().add(u0)
            }
        };
        let cell = Cell {
            kind: ph.kind,
            units: nr.min(h - u0),
            hidden: h,
            xw: self.xw.0.add((r0 + b0 * rs) * gh + u0),
            xw_rs: rs * gh,
            hr: tile,
            hr_rs: nr,
            hr_gs: gs,
            bias: w.bias.as_ptr().add(u0),
            rbias: opt(&w.rbias),
            peep: w.peep.as_deref().map_or(std::ptr::null(), opt),
            clip: l.clip,
            h_prev: self.h_prev.at(b0, u0),
            h_prev_rs: self.h_prev.1,
            h_next: ph.out.at(b0, u0),
            h_next_rs: ph.out.1,
            c: self.c.0.wrapping_add(b0 * h + u0),
        };
        (self.kern.recurrent_cell)(&cell, rows);
    }
}

/// Runs direction `d` of `dirs` (`reverse`: last step first) of a recurrent layer over
/// dense `x`, starting from the states `h0` and, for an LSTM, `c0` (`[batch, hidden]`
/// each, overwritten with the final states), writing every step's hidden state into `y`
/// (when given, dense in the layer's output layout).
///
/// # Safety
/// `x` holds `seq * batch * input` floats, `y` (if any) `seq * dirs * batch * hidden`,
/// `h0` `batch * hidden`, `c0` as much for an LSTM; `w` was packed with `kern` for the
/// layer's kind.
#[allow(clippy::too_many_arguments)]
pub unsafe fn run_direction(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    l: &Layer,
    (d, dirs, reverse): (usize, usize, bool),
    w: &Weights,
    x: &[f32],
    h0: &mut [f32],
    c0: &mut [f32],
    y: Option<&mut [f32]>,
) {
    let (seq, batch, h) = (l.seq, l.batch, l.hidden);
    let g = l.kind.gates() * h;
    if seq == 0 || batch == 0 || h == 0 {
        return;
    }
    // The input projections of every (step, row), in x's row order (all written by the GEMM).
    let mut xw_buf = take_scratch(seq * batch * g);
    let xw = xw_buf.as_mut_slice();
    gemm(
        kern,
        pool,
        threads,
        &Gemm {
            batch: 1,
            m: seq * batch,
            n: g,
            k: l.input,
            a: Lhs::Strided(MatRef::rows(x.as_ptr(), l.input), Batches::Stride(0)),
            b: Rhs::Packed(&w.w),
        },
        &StoreC {
            c: xw.as_mut_ptr(),
            ldc: g,
            batch_stride: 0,
        },
    );
    // The hidden states: h0's copy first, then each step's, written straight into y's
    // rows for that step when y is wanted (else into two buffers in turn).
    let mut hs = [
        h0.to_vec(),
        vec![0f32; if y.is_some() { 0 } else { batch * h }],
    ];
    // GRU without linear_before_reset: its update gate, and `r h`, the hidden gate's operand.
    let two_phase = l.kind
        == Kind::Gru {
            linear_before_reset: false,
        };
    let mut z = vec![0f32; if two_phase { batch * h } else { 0 }];
    let mut rh = vec![0f32; if two_phase { batch * h } else { 0 }];
    let c = match l.kind {
        Kind::Lstm => c0.as_mut_ptr(),
        _ if two_phase => z.as_mut_ptr(),
        _ => std::ptr::null_mut(),
    };
    let sw = Sweep {
        kern,
        pool,
        l,
        w,
        dir: (d, dirs, reverse),
        xw: Shared(xw.as_mut_ptr()),
        hs: [Shared(hs[0].as_mut_ptr()), Shared(hs[1].as_mut_ptr())],
        rh: Shared(rh.as_mut_ptr()),
        c: Shared(c),
        y: y.map(|y| Shared(y.as_mut_ptr())),
    };
    // Batch rows are independent: with at least the gate kernel's rows for every thread,
    // each sweeps its own rows through the whole sequence with no join per step (reading
    // all of R from its own caches); with fewer, the threads split each step's units.
    // (2-vCPU Xeon, LSTM batch 8, hidden 256: the steps take 2.0-2.1 ms split by rows,
    // 2.3-2.5 split by units.)
    let parts = threads.min(batch / GATE_ROWS).max(1);
    if parts > 1 {
        pool.run(parts, parts, &|i| {
            let (b0, b1) = (i * batch / parts, (i + 1) * batch / parts);
            sw.rows(b0, b1 - b0, 1);
        });
    } else {
        // A step under about 2^17 multiply-adds is not worth a second thread's join.
        let step_threads = if batch * g * h < 1 << 17 { 1 } else { threads };
        sw.rows(0, batch, step_threads);
    }
    // The final states: the last step's rows.
    let last = match sw.y {
        Some(_) => sw.out(if reverse { 0 } else { seq - 1 }, seq - 1),
        None => Rows(sw.hs[seq % 2], h),
    };
    for b in 0..batch {
        let row = std::slice::from_raw_parts(last.at(b, 0), h);
        h0[b * h..(b + 1) * h].copy_from_slice(row);
    }
    return_scratch(xw_buf);
}

/// What a sweep over the steps of a direction shares.
struct Sweep<'a> {
    kern: &'a Kernels,
    pool: &'a ThreadPool,
    l: &'a Layer,
    w: &'a Weights,
    dir: (usize, usize, bool),
    xw: Shared,
    /// h0's copy, and the other state buffer when y is not wanted.
    hs: [Shared; 2],
    rh: Shared,
    c: Shared,
    y: Option<Shared>,
}

// SAFETY: sweeps of disjoint batch rows touch disjoint rows of every buffer.
unsafe impl Sync for Sweep<'_> {}

impl Sweep<'_> {
    /// The rows step `step` (at time `t`) writes its hidden states to.
    unsafe fn out(&self, t: usize, step: usize) -> Rows {
        let (l, h) = (self.l, self.l.hidden);
        let (d, dirs, _) = self.dir;
        match self.y {
            Some(y) => match l.batch_major {
                false => Rows(Shared(y.0.add((t * dirs + d) * l.batch * h)), h),
                true => Rows(Shared(y.0.add((t * dirs + d) * h)), l.seq * dirs * h),
            },
            None => Rows(self.hs[1 - step % 2], h),
        }
    }

    /// Runs every step for batch rows `b0 .. b0 + nb`, each step's units on up to
    /// `step_threads` threads.
    unsafe fn rows(&self, b0: usize, nb: usize, step_threads: usize) {
        let (kern, l, h) = (self.kern, self.l, self.l.hidden);
        let seq = l.seq;
        let block_rows = if nb <= GATE_ROWS { nb } else { kern.micro.mr };
        debug_assert!(kern.micro.mr * kern.micro.nr <= TILE);
        let tasks = h.div_ceil(kern.micro.nr) * nb.div_ceil(block_rows);
        let run = |steps: &Steps, ph: &Phase| {
            if step_threads > 1 && tasks > 1 {
                self.pool.run(step_threads, tasks, &|t| steps.block(ph, t));
            } else {
                for t in 0..tasks {
                    steps.block(ph, t);
                }
            }
        };
        let (all, kind) = match l.kind {
            Kind::Lstm => (&[0, 1, 2, 3][..], CellKind::Lstm),
            Kind::Gru {
                linear_before_reset: true,
            } => (&[0, 1, 2][..], CellKind::GruLinearBeforeReset),
            Kind::Gru { .. } => (&[0, 1][..], CellKind::GruGates),
            Kind::Rnn(act) => (&[0][..], CellKind::Rnn(act)),
        };
        let sub = |r: Rows| Rows(Shared(r.at(b0, 0)), r.1);
        let mut prev = sub(Rows(self.hs[0], h));
        let reverse = self.dir.2;
        for step in 0..seq {
            let t = if reverse { seq - 1 - step } else { step };
            let out = sub(self.out(t, step));
            let (r0, rs) = match l.batch_major {
                false => (t * l.batch, 1),
                true => (t, seq),
            };
            let steps = Steps {
                kern,
                l,
                w: self.w,
                batch: nb,
                xw: self.xw,
                h_prev: prev,
                c: Shared(self.c.0.wrapping_add(b0 * h)),
                x_rows: (r0 + b0 * rs, rs),
                block_rows,
            };
            // GRU without linear_before_reset: its gates first (`r h` into rh), then the
            // hidden gate's product on rh.
            let two_phase = l.kind
                == Kind::Gru {
                    linear_before_reset: false,
                };
            let rh = sub(Rows(self.rh, h));
            let first = if two_phase { rh } else { out };
            let gates = all;
            run(
                &steps,
                &Phase {
                    kind,
                    gates,
                    operand: prev,
                    out: first,
                },
            );
            if two_phase {
                let kind = CellKind::GruFinish;
                run(
                    &steps,
                    &Phase {
                        kind,
                        gates: &[2],
                        operand: rh,
                        out,
                    },
                );
            }
            prev = out;
        }
    }
}

/// The largest micro-kernel tile, in floats.
const TILE: usize = 12 * 32;

#[cfg(test)]
mod tests;
