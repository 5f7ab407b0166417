//! LSTM layers on the fast kernels (`smelt_kernels::recurrent`): f32, the default
//! activations, no input-forget coupling, W and R (and B, P) weights, packed once per plan.
//! Anything else, and a run whose sequence lengths differ from the input's length, runs on
//! the reference kernel.

use super::single::{gather, scatter};
use super::RunCx;
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{BufferKind, Single, TensorRef};
use smelt_ir::op::recurrent::{Activation, RnnDirection};
use smelt_ir::op::RecurrentOp;
use smelt_ir::{DType, Op, Result, Tensor};
use smelt_kernels::recurrent::{lstm_direction, Lstm, LstmWeights};
use smelt_kernels::Kernels;

/// An LSTM layer with its weights packed.
pub(crate) struct LstmPlan {
    l: Lstm,
    dirs: usize,
    direction: RnnDirection,
    /// One per direction, when W, R, B and P are weights (else packed each run).
    packed: Option<Vec<LstmWeights>>,
}

impl LstmPlan {
    /// The plan of `s` when the fast kernels can run it.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        s: &Single,
        kern: &Kernels,
    ) -> Option<LstmPlan> {
        let Op::Recurrent(RecurrentOp::Lstm {
            direction,
            batch_major,
            activations,
            clip,
            input_forget: false,
            ..
        }) = &s.op
        else {
            return None;
        };
        let dirs = direction.count();
        let defaults = [Activation::Sigmoid, Activation::Tanh, Activation::Tanh];
        if activations.len() != 3 * dirs || activations.chunks(3).any(|a| a != defaults) {
            return None;
        }
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
        let g = 4 * h;
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
            && shape_of(7).is_none_or(|p| p == [dirs, 3 * h]);
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
                    .map(|d| LstmWeights::pack(kern, d, (input, h), w, r, b, p))
                    .collect(),
            )
        })();
        Some(LstmPlan {
            l: Lstm {
                seq,
                batch,
                input,
                hidden: h,
                batch_major: *batch_major,
                clip: clip.unwrap_or(f32::INFINITY),
            },
            dirs,
            direction: *direction,
            packed,
        })
    }

    /// Runs the layer (or the reference kernel, for uneven sequence lengths).
    pub(crate) fn run(&self, cx: &mut RunCx, s: &Single) -> Result<()> {
        let l = &self.l;
        let (batch, h, dirs) = (l.batch, l.hidden, self.dirs);
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
        let x = match &s.inputs[0] {
            Some(r) => gather(cx, r)?,
            None => smelt_ir::bail!(Internal, "an LSTM without X"),
        };
        let x = x
            .as_f32()
            .ok_or_else(|| smelt_ir::err!(Internal, "LSTM input X is not f32"))?;
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
                    smelt_ir::bail!(Internal, "an LSTM without W or R");
                };
                packed_now = (0..dirs)
                    .map(|d| {
                        LstmWeights::pack(
                            cx.ex.kern,
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
        let scratch = [l.seq, batch, 4, h]
            .iter()
            .try_fold(4u64, |a, &d| a.checked_mul(d as u64))
            .unwrap_or(u64::MAX);
        smelt_ir::limits::check_alloc(scratch, &|| "LSTM input projections".into())?;
        let want_y = matches!(s.outputs.first(), Some(Some(_)));
        let mut y = vec![0f32; if want_y { l.seq * dirs * batch * h } else { 0 }];
        for d in 0..dirs {
            let reverse = self.direction == RnnDirection::Reverse || d == 1;
            // SAFETY: x is dense [seq, batch, input] (or batch-major), y covers every step
            // of every direction, the weights were packed with this plan's kernels.
            unsafe {
                lstm_direction(
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
        let shape_y = match l.batch_major {
            false => vec![l.seq, dirs, batch, h],
            true => vec![batch, l.seq, dirs, h],
        };
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
            (0, shape_y, y),
            (1, state_shape.clone(), flat(&hs)),
            (2, state_shape, flat(&cs)),
        ];
        for (slot, shape, data) in outs {
            let Some(Some(r)) = s.outputs.get(slot) else {
                continue;
            };
            let r: &TensorRef = r;
            let t = Tensor::from_f32(shape, data)?;
            scatter(cx, &t, r).map_err(|e| e.context(format!("LSTM output {slot}")))?;
        }
        Ok(())
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
