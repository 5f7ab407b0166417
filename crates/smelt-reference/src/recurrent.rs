//! Reference kernels of the recurrent op family: RNN, GRU, LSTM, computed in f64.
//!
//! Each batch entry runs its own `sequence_lens[b]` steps; Y is zero past that length and
//! Y_h / Y_c hold the state after the last step taken (zeros for an empty sequence).

use super::{Ctx, Inputs};
use smelt_ir::op::recurrent::{Activation, RnnDirection};
use smelt_ir::op::RecurrentOp;
use smelt_ir::{bail, ensure, Result, Tensor, Value};

/// Which cell the layer uses.
#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Rnn,
    Gru { linear_before_reset: bool },
    Lstm { input_forget: bool },
}

impl Cell {
    /// Number of gates stacked in W and R.
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 3,
            Cell::Lstm { .. } => 4,
        }
    }

    /// Number of activation functions per direction.
    fn n_act(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 2,
            Cell::Lstm { .. } => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru { .. } => "GRU",
            Cell::Lstm { .. } => "LSTM",
        }
    }
}

/// Attributes shared by the three layers.
struct Layer<'a> {
    cell: Cell,
    hidden_size: Option<i64>,
    direction: RnnDirection,
    batch_major: bool,
    activations: &'a [Activation],
    clip: Option<f32>,
}

/// Runs one op of the family.
pub fn run(op: &RecurrentOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let layer = match op {
        RecurrentOp::Rnn {
            hidden_size,
            direction,
            batch_major,
            activations,
            clip,
        } => Layer {
            cell: Cell::Rnn,
            hidden_size: *hidden_size,
            direction: *direction,
            batch_major: *batch_major,
            activations,
            clip: *clip,
        },
        RecurrentOp::Gru {
            hidden_size,
            direction,
            batch_major,
            activations,
            clip,
            linear_before_reset,
        } => Layer {
            cell: Cell::Gru {
                linear_before_reset: *linear_before_reset,
            },
            hidden_size: *hidden_size,
            direction: *direction,
            batch_major: *batch_major,
            activations,
            clip: *clip,
        },
        RecurrentOp::Lstm {
            hidden_size,
            direction,
            batch_major,
            activations,
            clip,
            input_forget,
        } => Layer {
            cell: Cell::Lstm {
                input_forget: *input_forget,
            },
            hidden_size: *hidden_size,
            direction: *direction,
            batch_major: *batch_major,
            activations,
            clip: *clip,
        },
    };
    run_layer(&layer, x, cx)
}

/// Checks a tensor's shape.
fn expect_shape(t: &Tensor, want: &[usize], what: &str) -> Result<()> {
    ensure!(
        t.shape() == want,
        InvalidModel,
        "{what} should have shape {want:?}, got {:?}",
        t.shape()
    );
    Ok(())
}

fn run_layer(l: &Layer, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let cell = l.cell;
    let is_lstm = matches!(cell, Cell::Lstm { .. });
    let max_out = if is_lstm { 3 } else { 2 };
    ensure!(
        cx.n_outputs <= max_out,
        InvalidModel,
        "{} has at most {max_out} outputs, got {}",
        cell.name(),
        cx.n_outputs
    );
    let xt = x.tensor(0)?;
    let dtype = xt.dtype();
    ensure!(
        dtype.is_float(),
        Unsupported,
        "{} input must be float, got {dtype}",
        cell.name()
    );
    ensure!(
        xt.rank() == 3,
        InvalidModel,
        "X should have rank 3, got shape {:?}",
        xt.shape()
    );
    let (seq, batch, input) = if l.batch_major {
        (xt.shape()[1], xt.shape()[0], xt.shape()[2])
    } else {
        (xt.shape()[0], xt.shape()[1], xt.shape()[2])
    };
    let dirs = l.direction.count();
    let g = cell.gates();
    let wt = x.tensor(1)?;
    let rt = x.tensor(2)?;
    ensure!(
        rt.rank() == 3,
        InvalidModel,
        "R should have rank 3, got shape {:?}",
        rt.shape()
    );
    let h = match l.hidden_size {
        Some(h) => h as usize,
        None => rt.shape()[2],
    };
    ensure!(h > 0, InvalidModel, "hidden size must be positive");
    // R is [dirs, gates * h, h]: its last dim bounds h before any product of it.
    ensure!(
        h == rt.shape()[2],
        InvalidModel,
        "hidden_size {h} does not match R of shape {:?}",
        rt.shape()
    );
    expect_shape(wt, &[dirs, g * h, input], "W")?;
    expect_shape(rt, &[dirs, g * h, h], "R")?;
    ensure!(
        l.activations.len() == dirs * cell.n_act(),
        InvalidModel,
        "{} expects {} activations, got {}",
        cell.name(),
        dirs * cell.n_act(),
        l.activations.len()
    );
    let xs = xt.to_f64()?;
    let ws = wt.to_f64()?;
    let rs = rt.to_f64()?;
    let bs = match x.opt_tensor(3)? {
        Some(b) => {
            expect_shape(b, &[dirs, 2 * g * h], "B")?;
            b.to_f64()?
        }
        None => vec![0.0; dirs * 2 * g * h],
    };
    let lens: Vec<usize> = match x.opt_ints(4)? {
        Some(v) => {
            ensure!(
                v.len() == batch,
                InvalidModel,
                "sequence_lens has {} values for batch {batch}",
                v.len()
            );
            v.iter()
                .map(|&n| {
                    ensure!(
                        n >= 0 && n as usize <= seq,
                        InvalidInput,
                        "sequence length {n} is outside [0, {seq}]"
                    );
                    Ok(n as usize)
                })
                .collect::<Result<_>>()?
        }
        None => vec![seq; batch],
    };
    // States are held as [dirs, batch, h] whatever the layout.
    let state_shape = if l.batch_major {
        [batch, dirs, h]
    } else {
        [dirs, batch, h]
    };
    let read_state = |i: usize, what: &str| -> Result<Vec<f64>> {
        match x.opt_tensor(i)? {
            None => Ok(vec![0.0; dirs * batch * h]),
            Some(t) => {
                expect_shape(t, &state_shape, what)?;
                let v = t.to_f64()?;
                if !l.batch_major {
                    return Ok(v);
                }
                let mut o = vec![0.0; v.len()];
                for b in 0..batch {
                    for d in 0..dirs {
                        let src = (b * dirs + d) * h;
                        let dst = (d * batch + b) * h;
                        o[dst..dst + h].copy_from_slice(&v[src..src + h]);
                    }
                }
                Ok(o)
            }
        }
    };
    let mut hs = read_state(5, "initial_h")?;
    let mut cs = if is_lstm {
        read_state(6, "initial_c")?
    } else {
        Vec::new()
    };
    let ps = match x.opt_tensor(7)? {
        Some(p) if is_lstm => {
            expect_shape(p, &[dirs, 3 * h], "P")?;
            p.to_f64()?
        }
        _ => vec![0.0; dirs * 3 * h],
    };
    let want_y = cx.outputs_used.first().copied().unwrap_or(false);
    // Y as [seq, dirs, batch, h]; transposed for the batch-major layout at the end.
    let mut y = if want_y {
        vec![0.0; seq * dirs * batch * h]
    } else {
        Vec::new()
    };
    let clip = |v: f64| match l.clip {
        Some(c) => v.clamp(-(c as f64), c as f64),
        None => v,
    };
    let mut gates = vec![0.0; g * h];
    let mut rh = vec![0.0; g * h];
    for d in 0..dirs {
        let reverse = l.direction == RnnDirection::Reverse || d == 1;
        let acts = &l.activations[d * cell.n_act()..(d + 1) * cell.n_act()];
        let w = &ws[d * g * h * input..(d + 1) * g * h * input];
        let r = &rs[d * g * h * h..(d + 1) * g * h * h];
        let wb = &bs[d * 2 * g * h..d * 2 * g * h + g * h];
        let rb = &bs[d * 2 * g * h + g * h..(d + 1) * 2 * g * h];
        let p = &ps[d * 3 * h..(d + 1) * 3 * h];
        for (b, &n) in lens.iter().enumerate() {
            let so = (d * batch + b) * h;
            let mut hp = hs[so..so + h].to_vec();
            let mut cp = if is_lstm {
                cs[so..so + h].to_vec()
            } else {
                Vec::new()
            };
            for step in 0..n {
                let t = if reverse { n - 1 - step } else { step };
                let xo = if l.batch_major {
                    (b * seq + t) * input
                } else {
                    (t * batch + b) * input
                };
                let xv = &xs[xo..xo + input];
                for (j, gv) in gates.iter_mut().enumerate() {
                    let wr = &w[j * input..(j + 1) * input];
                    *gv = wb[j] + wr.iter().zip(xv).map(|(a, b)| a * b).sum::<f64>();
                }
                for (j, v) in rh.iter_mut().enumerate() {
                    let rr = &r[j * h..(j + 1) * h];
                    *v = rr.iter().zip(&hp).map(|(a, b)| a * b).sum::<f64>();
                }
                match cell {
                    Cell::Rnn => {
                        for j in 0..h {
                            hp[j] = acts[0].apply(clip(gates[j] + rh[j] + rb[j]));
                        }
                    }
                    Cell::Gru {
                        linear_before_reset,
                    } => {
                        let mut hn = vec![0.0; h];
                        let z: Vec<f64> = (0..h)
                            .map(|j| acts[0].apply(clip(gates[j] + rh[j] + rb[j])))
                            .collect();
                        let rg: Vec<f64> = (0..h)
                            .map(|j| acts[0].apply(clip(gates[h + j] + rh[h + j] + rb[h + j])))
                            .collect();
                        if linear_before_reset {
                            for j in 0..h {
                                hn[j] = acts[1].apply(clip(
                                    gates[2 * h + j] + rg[j] * (rh[2 * h + j] + rb[2 * h + j]),
                                ));
                            }
                        } else {
                            let reset: Vec<f64> = (0..h).map(|k| rg[k] * hp[k]).collect();
                            for j in 0..h {
                                let rr = &r[(2 * h + j) * h..(2 * h + j + 1) * h];
                                let s: f64 = rr.iter().zip(&reset).map(|(a, b)| a * b).sum();
                                hn[j] = acts[1].apply(clip(gates[2 * h + j] + s + rb[2 * h + j]));
                            }
                        }
                        for j in 0..h {
                            hp[j] = (1.0 - z[j]) * hn[j] + z[j] * hp[j];
                        }
                    }
                    Cell::Lstm { input_forget } => {
                        // Gate order i, o, f, c; peepholes i, o, f.
                        for j in 0..h {
                            let pre = |k: usize| gates[k * h + j] + rh[k * h + j] + rb[k * h + j];
                            let i = acts[0].apply(clip(pre(0) + p[j] * cp[j]));
                            let f = if input_forget {
                                1.0 - i
                            } else {
                                acts[0].apply(clip(pre(2) + p[2 * h + j] * cp[j]))
                            };
                            let c = acts[1].apply(clip(pre(3)));
                            let cn = f * cp[j] + i * c;
                            let o = acts[0].apply(clip(pre(1) + p[h + j] * cn));
                            cp[j] = cn;
                            hp[j] = o * acts[2].apply(cn);
                        }
                    }
                }
                if want_y {
                    let yo = ((t * dirs + d) * batch + b) * h;
                    y[yo..yo + h].copy_from_slice(&hp);
                }
            }
            if n == 0 {
                // An empty sequence yields zero states (as onnxruntime does).
                hp.fill(0.0);
                cp.fill(0.0);
            }
            hs[so..so + h].copy_from_slice(&hp);
            if is_lstm {
                cs[so..so + h].copy_from_slice(&cp);
            }
        }
    }
    let mut outs = Vec::with_capacity(cx.n_outputs);
    for slot in 0..cx.n_outputs {
        if !cx.outputs_used.get(slot).copied().unwrap_or(false) {
            outs.push(Value::Tensor(Tensor::from_f64(dtype, vec![0], &[])?));
            continue;
        }
        let t = match slot {
            0 => {
                if l.batch_major {
                    // [seq, dirs, batch, h] -> [batch, seq, dirs, h]
                    let mut o = vec![0.0; y.len()];
                    for t in 0..seq {
                        for d in 0..dirs {
                            for b in 0..batch {
                                let src = ((t * dirs + d) * batch + b) * h;
                                let dst = ((b * seq + t) * dirs + d) * h;
                                o[dst..dst + h].copy_from_slice(&y[src..src + h]);
                            }
                        }
                    }
                    Tensor::from_f64(dtype, vec![batch, seq, dirs, h], &o)?
                } else {
                    Tensor::from_f64(dtype, vec![seq, dirs, batch, h], &y)?
                }
            }
            1 | 2 => {
                let s = if slot == 1 { &hs } else { &cs };
                if l.batch_major {
                    let mut o = vec![0.0; s.len()];
                    for d in 0..dirs {
                        for b in 0..batch {
                            let src = (d * batch + b) * h;
                            let dst = (b * dirs + d) * h;
                            o[dst..dst + h].copy_from_slice(&s[src..src + h]);
                        }
                    }
                    Tensor::from_f64(dtype, vec![batch, dirs, h], &o)?
                } else {
                    Tensor::from_f64(dtype, vec![dirs, batch, h], s)?
                }
            }
            _ => bail!(Internal, "{} has no output {slot}", cell.name()),
        };
        outs.push(Value::Tensor(t));
    }
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    fn ctx(env: &Env, n: usize) -> Ctx<'_> {
        Ctx {
            n_outputs: n,
            outputs_used: vec![true; n],
            env,
            consts: env,
            control: crate::test_control(),
            depth: 0,
            runner: None,
        }
    }

    #[test]
    fn rnn_identity_weights() {
        // h_t = tanh(x_t + h_{t-1}) with 1x1 weights.
        let xt = Value::Tensor(Tensor::from_f32(vec![2, 1, 1], vec![0.5, 0.25]).unwrap());
        let wt = Value::Tensor(Tensor::from_f32(vec![1, 1, 1], vec![1.0]).unwrap());
        let rt = Value::Tensor(Tensor::from_f32(vec![1, 1, 1], vec![1.0]).unwrap());
        let op = RecurrentOp::Rnn {
            hidden_size: Some(1),
            direction: RnnDirection::Forward,
            batch_major: false,
            activations: vec![Activation::Tanh],
            clip: None,
        };
        let env = Env::new();
        let out = run(
            &op,
            &Inputs::new(vec![Some(&xt), Some(&wt), Some(&rt)]),
            &ctx(&env, 2),
        )
        .unwrap();
        let h1 = 0.5f64.tanh();
        let h2 = (0.25 + h1).tanh();
        let yh = out[1].tensor().unwrap().to_f64().unwrap();
        assert!((yh[0] - h2).abs() < 1e-6);
        assert_eq!(out[0].tensor().unwrap().shape(), &[2, 1, 1, 1]);
    }
}
