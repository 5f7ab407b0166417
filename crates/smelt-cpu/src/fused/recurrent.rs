//! Recurrent layers on the fast kernels (`smelt_kernels::recurrent`): LSTM (no
//! input-forget coupling), GRU and simple RNN with their default activations (an RNN's
//! tanh, ReLU or sigmoid, the same in both directions), f32, W and R (and B, P) packed once
//! per plan when they are weights. Anything else, and a run whose sequence lengths differ
//! from the input's length, runs on the reference kernel.

use super::single::{gather, scatter};
use super::RunCx;
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{BufferKind, Single, TensorRef};
use smelt_ir::op::recurrent::{Activation, RnnDirection};
use smelt_ir::op::RecurrentOp;
use smelt_ir::{DType, Op, Result, Tensor};
use smelt_kernels::recurrent::cell::Act;
use smelt_kernels::recurrent::{run_direction, Kind, Layer, Weights};
use smelt_kernels::Kernels;

/// A recurrent layer with its weights packed.
pub(crate) struct RecurrentPlan {
    l: Layer,
    dirs: usize,
    direction: RnnDirection,
    /// One per direction, when W, R, B and P are weights (else packed each run).
    packed: Option<Vec<Weights>>,
}

/// The fast kernels' kind of `op`, its direction and layout, when they can run it.
fn kind_of(op: &Op) -> Option<(Kind, RnnDirection, bool, Option<f32>)> {
    use Activation::{Relu, Sigmoid, Tanh};
    let Op::Recurrent(r) = op else {
        return None;
    };
    let (kind, direction, batch_major, activations, clip, defaults): (_, _, _, _, _, &[_]) = match r
    {
        RecurrentOp::Lstm {
            direction,
            batch_major,
            activations,
            clip,
            input_forget: false,
            ..
        } => (
            Kind::Lstm,
            direction,
            batch_major,
            activations,
            clip,
            &[Sigmoid, Tanh, Tanh],
        ),
        RecurrentOp::Lstm { .. } => return None,
        RecurrentOp::Gru {
            direction,
            batch_major,
            activations,
            clip,
            linear_before_reset,
            ..
        } => {
            let kind = Kind::Gru {
                linear_before_reset: *linear_before_reset,
            };
            (
                kind,
                direction,
                batch_major,
                activations,
                clip,
                &[Sigmoid, Tanh],
            )
        }
        RecurrentOp::Rnn {
            direction,
            batch_major,
            activations,
            clip,
            ..
        } => {
            let act = match activations.first()? {
                Tanh => Act::Tanh,
                Relu => Act::Relu,
                Sigmoid => Act::Sigmoid,
                _ => return None,
            };
            let first = activations[..1].to_vec();
            let kind = Kind::Rnn(act);
            // Every direction's activation is the first one's.
            let same = activations.iter().all(|a| *a == first[0]);
            if !same || activations.len() != direction.count() {
                return None;
            }
            return Some((kind, *direction, *batch_major, *clip));
        }
    };
    let n = defaults.len();
    if activations.len() != n * direction.count() || activations.chunks(n).any(|a| a != defaults) {
        return None;
    }
    Some((kind, *direction, *batch_major, *clip))
}

impl RecurrentPlan {
    /// The plan of `s` when the fast kernels can run it.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        s: &Single,
        kern: &Kernels,
    ) -> Option<RecurrentPlan> {
        let (kind, direction, batch_major, clip) = kind_of(&s.op)?;
        let dirs = direction.count();
        // Every operand f32; W, R, B, P read whole from the weights when they are ones.
        let f32_in = |i: usize| match s.inputs.get(i) {
            Some(Some(r)) => c.plan.buffer(r.buffer).dtype == DType::F32,
            _ => true,
        };
        if !(0..8).all(|i| i == 4 || f32_in(i)) {
            return None;
        }
        let x = s.inputs.first()?.as_ref()?;
        let (ws, rs) = (
            &s.inputs.get(1)?.as_ref()?.shape,
            &s.inputs.get(2)?.as_ref()?.shape,
        );
        if x.shape.len() != 3 || ws.len() != 3 || rs.len() != 3 {
            return None;
        }
        let h = rs[2];
        let (seq, batch, input) = match batch_major {
            false => (x.shape[0], x.shape[1], x.shape[2]),
            true => (x.shape[1], x.shape[0], x.shape[2]),
        };
        let g = kind.gates() * h;
        let shape_of = |i: usize| {
            s.inputs
                .get(i)
                .and_then(|r| r.as_ref())
                .map(|r| r.shape.clone())
        };
        let fits = h > 0
            && *ws == [dirs, g, input]
            && *rs == [dirs, g, h]
            && shape_of(3).is_none_or(|b| b == [dirs, 2 * g])
            && shape_of(7).is_none_or(|p| kind == Kind::Lstm && p == [dirs, 3 * h]);
        if !fits {
            return None;
        }
        let weight = |i: usize| -> Option<Option<&[f32]>> {
            let Some(Some(r)) = s.inputs.get(i) else {
                return Some(None);
            };
            let b = c.plan.buffer(r.buffer);
            let BufferKind::Weight(w) = b.kind else {
                return None;
            };
            let whole = r.offset == 0 && r.shape == b.shape && r.is_contiguous();
            whole.then(|| weights.get(w)?.as_f32()).flatten().map(Some)
        };
        let packed = (|| {
            let (w, r, b, p) = (weight(1)??, weight(2)??, weight(3)?, weight(7)?);
            Some(
                (0..dirs)
                    .map(|d| Weights::pack(kern, kind, d, (input, h), w, r, b, p))
                    .collect(),
            )
        })();
        Some(RecurrentPlan {
            l: Layer {
                kind,
                seq,
                batch,
                input,
                hidden: h,
                batch_major,
                clip: clip.unwrap_or(f32::INFINITY),
            },
            dirs,
            direction,
            packed,
        })
    }

    /// Runs the layer (or the reference kernel, for uneven sequence lengths).
    pub(crate) fn run(&self, cx: &mut RunCx, s: &Single) -> Result<()> {
        let l = &self.l;
        let (batch, h, dirs) = (l.batch, l.hidden, self.dirs);
        // An empty sequence: the oracle's zero final states (as onnxruntime gives).
        if l.seq == 0 {
            return super::single::run(cx, s);
        }
        if let Some(Some(r)) = s.inputs.get(4) {
            if gather(cx, r)?.to_i64()?.iter().any(|&n| n != l.seq as i64) {
                return super::single::run(cx, s);
            }
        }
        // Initial states, flat, gathered once; one of another size than the plan's (an
        // input's unknown dim bound at run time) goes to the oracle, which names it.
        let mut initial = [None, None];
        for (slot, i) in initial.iter_mut().zip([5, 6]) {
            if let Some(Some(r)) = s.inputs.get(i) {
                let all = gather(cx, r)?.to_f64()?;
                if all.len() != dirs * batch * h {
                    return super::single::run(cx, s);
                }
                *slot = Some(all);
            }
        }
        let Some(xr) = &s.inputs[0] else {
            smelt_ir::bail!(Internal, "a recurrent layer without X");
        };
        // X read in place when dense, else gathered.
        let x_copy;
        let x = match dense_f32(cx, xr) {
            // SAFETY: a validated, dense f32 window of X's shape.
            Some(p) => unsafe { std::slice::from_raw_parts(p, xr.shape.iter().product()) },
            None => {
                x_copy = gather(cx, xr)?;
                x_copy
                    .as_f32()
                    .ok_or_else(|| smelt_ir::err!(Internal, "recurrent input X is not f32"))?
            }
        };
        // States per direction, [batch, h] each (zero when not given).
        let state = |all: Option<Vec<f64>>| -> Vec<Vec<f32>> {
            let all = all.unwrap_or_else(|| vec![0.0; dirs * batch * h]);
            (0..dirs)
                .map(|d| {
                    (0..batch * h)
                        .map(|k| {
                            let (b, j) = (k / h, k % h);
                            all[self.state_at(d, b) + j] as f32
                        })
                        .collect()
                })
                .collect()
        };
        let [h0, c0] = initial;
        let (mut hs, mut cs) = (state(h0), state(c0));
        let packed_now;
        let weights = match &self.packed {
            Some(p) => p,
            None => {
                let operand = |cx: &RunCx, i: usize| -> Result<Option<Vec<f32>>> {
                    match s.inputs.get(i) {
                        Some(Some(r)) => Ok(Some(
                            gather(cx, r)?
                                .to_f64()?
                                .into_iter()
                                .map(|v| v as f32)
                                .collect(),
                        )),
                        _ => Ok(None),
                    }
                };
                let (w, r) = (operand(cx, 1)?, operand(cx, 2)?);
                let (b, p) = (operand(cx, 3)?, operand(cx, 7)?);
                let (Some(w), Some(r)) = (w, r) else {
                    smelt_ir::bail!(Internal, "a recurrent layer without W or R");
                };
                packed_now = (0..dirs)
                    .map(|d| {
                        Weights::pack(
                            cx.ex.kern,
                            l.kind,
                            d,
                            (l.input, h),
                            &w,
                            &r,
                            b.as_deref(),
                            p.as_deref(),
                        )
                    })
                    .collect::<Vec<_>>();
                &packed_now
            }
        };
        // The kernel's scratch, the input projections of every step (seq x batch x 4h), is
        // no plan buffer: it must fit the limits like one.
        let scratch = [l.seq, batch, l.kind.gates(), h]
            .iter()
            .try_fold(4u64, |a, &d| a.checked_mul(d as u64))
            .unwrap_or(u64::MAX);
        smelt_ir::limits::check_alloc(scratch, &|| "recurrent input projections".into())?;
        let yr = s.outputs.first().and_then(|r| r.as_ref());
        let want_y = yr.is_some();
        // Y written in place when its window is dense and (with a second direction, whose
        // projection reads X after the first wrote Y) not X's buffer; else into a copy.
        let y_len = l.seq * dirs * batch * h;
        let shape_y = match l.batch_major {
            false => vec![l.seq, dirs, batch, h],
            true => vec![batch, l.seq, dirs, h],
        };
        let y_place = yr
            .filter(|y| y.shape == shape_y && (dirs == 1 || y.buffer != xr.buffer))
            .and_then(|y| dense_f32(cx, y));
        let mut y_copy = vec![
            0f32;
            if want_y && y_place.is_none() {
                y_len
            } else {
                0
            }
        ];
        let y: &mut [f32] = match y_place {
            // SAFETY: a validated, writable, dense f32 window of Y's shape, which nothing
            // else reads or writes during this op.
            Some(p) => unsafe { std::slice::from_raw_parts_mut(p, y_len) },
            None => &mut y_copy,
        };
        for d in 0..dirs {
            let reverse = self.direction == RnnDirection::Reverse || d == 1;
            // SAFETY: x is dense [seq, batch, input] (or batch-major), y covers every step
            // of every direction, the weights were packed with this plan's kernels.
            unsafe {
                run_direction(
                    cx.ex.kern,
                    cx.ex.pool,
                    cx.ex.threads,
                    l,
                    (d, dirs, reverse),
                    &weights[d],
                    x,
                    &mut hs[d],
                    &mut cs[d],
                    want_y.then_some(&mut y[..]),
                )
            };
        }
        let state_shape = match l.batch_major {
            false => vec![dirs, batch, h],
            true => vec![batch, dirs, h],
        };
        let flat = |v: &[Vec<f32>]| {
            let mut o = vec![0f32; dirs * batch * h];
            for (d, s) in v.iter().enumerate() {
                for b in 0..batch {
                    let at = self.state_at(d, b);
                    o[at..at + h].copy_from_slice(&s[b * h..(b + 1) * h]);
                }
            }
            o
        };
        let outs = [
            (0, shape_y, y_copy),
            (1, state_shape.clone(), flat(&hs)),
            (2, state_shape, flat(&cs)),
        ];
        for (slot, shape, data) in outs {
            let Some(Some(r)) = s.outputs.get(slot) else {
                continue;
            };
            if slot == 0 && y_place.is_some() {
                continue;
            }
            let r: &TensorRef = r;
            let t = Tensor::from_f32(shape, data)?;
            scatter(cx, &t, r).map_err(|e| e.context(format!("recurrent output {slot}")))?;
        }
        Ok(())
    }

    /// The kernel's name: `lstm`, `gru` or `rnn`.
    pub(crate) fn kernel(&self) -> &'static str {
        match self.l.kind {
            Kind::Lstm => "lstm",
            Kind::Gru { .. } => "gru",
            Kind::Rnn(_) => "rnn",
        }
    }

    /// Where state row `(d, b)` starts in the layout's `[dirs, batch, h]` or
    /// `[batch, dirs, h]`.
    fn state_at(&self, d: usize, b: usize) -> usize {
        let (batch, h) = (self.l.batch, self.l.hidden);
        match self.l.batch_major {
            false => (d * batch + b) * h,
            true => (b * self.dirs + d) * h,
        }
    }
}

/// Where a dense f32 window's first element lives, or None for another type or layout.
fn dense_f32(cx: &RunCx, r: &TensorRef) -> Option<*mut f32> {
    let dense = cx.plan.buffer(r.buffer).dtype == DType::F32 && r.is_contiguous();
    // The window was validated against its buffer: its elements lie inside it.
    dense.then(|| (cx.mem.ptrs[r.buffer.0 as usize] as *mut f32).wrapping_add(r.offset))
}
