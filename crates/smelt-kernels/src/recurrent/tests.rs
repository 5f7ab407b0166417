use super::*;
use crate::isa_tests;
use crate::testing::rand_vec;

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The plain f64 LSTM of one direction: (y rows per step, final h, final c).
#[allow(clippy::too_many_arguments)]
fn naive(
    l: &Lstm,
    reverse: bool,
    x: &[f32],
    w: &[f32],
    r: &[f32],
    bias: &[f32],
    peep: Option<&[f32]>,
    h0: &[f32],
    c0: &[f32],
) -> (Vec<Vec<f64>>, Vec<f64>, Vec<f64>) {
    let (seq, batch, inp, h) = (l.seq, l.batch, l.input, l.hidden);
    let mut hs: Vec<f64> = h0.iter().map(|&v| v as f64).collect();
    let mut cs: Vec<f64> = c0.iter().map(|&v| v as f64).collect();
    let mut ys = vec![Vec::new(); seq];
    let clip = |v: f64| v.clamp(-(l.clip as f64), l.clip as f64);
    for step in 0..seq {
        let t = if reverse { seq - 1 - step } else { step };
        let mut hn = vec![0.0; batch * h];
        for b in 0..batch {
            let xo = if l.batch_major {
                b * seq + t
            } else {
                t * batch + b
            } * inp;
            let pre = |gate: usize, j: usize| {
                let row = gate * h + j;
                let mut s = bias[row] as f64;
                for p in 0..inp {
                    s += w[row * inp + p] as f64 * x[xo + p] as f64;
                }
                for p in 0..h {
                    s += r[row * h + p] as f64 * hs[b * h + p];
                }
                s
            };
            for j in 0..h {
                let cp = cs[b * h + j];
                let pk = |k: usize| peep.map_or(0.0, |p| p[k * h + j] as f64);
                let i = sig(clip(pre(0, j) + pk(0) * cp));
                let f = sig(clip(pre(2, j) + pk(2) * cp));
                let c = clip(pre(3, j)).tanh();
                let cn = f * cp + i * c;
                let o = sig(clip(pre(1, j) + pk(1) * cn));
                cs[b * h + j] = cn;
                hn[b * h + j] = o * cn.tanh();
            }
        }
        hs = hn;
        ys[t] = hs.clone();
    }
    (ys, hs, cs)
}

fn check(kern: &Kernels) {
    // (seq, batch, input, hidden, batch_major, clip, peepholes, reverse)
    for &(seq, batch, input, hidden, bm, clip, peep, reverse) in &[
        (1, 1, 1, 1, false, f32::INFINITY, false, false),
        (5, 3, 7, 9, false, f32::INFINITY, true, false),
        (4, 2, 5, 17, true, 0.7, false, true),
        (6, 8, 16, 33, false, 2.0, true, true),
    ] {
        let l = Lstm {
            seq,
            batch,
            input,
            hidden,
            batch_major: bm,
            clip,
        };
        let g = 4 * hidden;
        let x = rand_vec(seq * batch * input, 1);
        let w = rand_vec(g * input, 2);
        let r = rand_vec(g * hidden, 3);
        let b = rand_vec(2 * g, 4);
        let p = rand_vec(3 * hidden, 5);
        let h0 = rand_vec(batch * hidden, 6);
        let c0 = rand_vec(batch * hidden, 7);
        let pw = LstmWeights::pack(
            kern,
            0,
            (input, hidden),
            &w,
            &r,
            Some(&b),
            peep.then_some(&p[..]),
        );
        let bias: Vec<f32> = (0..g).map(|j| b[j] + b[g + j]).collect();
        let (ys, hn, cn) = naive(
            &l,
            reverse,
            &x,
            &w,
            &r,
            &bias,
            peep.then_some(&p[..]),
            &h0,
            &c0,
        );
        let (mut h, mut c) = (h0.clone(), c0.clone());
        let mut y = vec![f32::NAN; seq * batch * hidden];
        unsafe {
            lstm_direction(
                kern,
                crate::pool::global(),
                2,
                &l,
                (0, 1, reverse),
                &pw,
                &x,
                &mut h,
                &mut c,
                Some(&mut y),
            )
        };
        let close = |a: f32, e: f64, what: &str| {
            assert!(
                (a as f64 - e).abs() <= 2e-5 + 2e-5 * e.abs(),
                "{what}: {a} vs {e} (seq {seq} batch {batch} hidden {hidden})"
            );
        };
        for (t, yt) in ys.iter().enumerate() {
            for bb in 0..batch {
                for j in 0..hidden {
                    let at = if bm { bb * seq + t } else { t * batch + bb } * hidden + j;
                    close(y[at], yt[bb * hidden + j], "y");
                }
            }
        }
        for i in 0..batch * hidden {
            close(h[i], hn[i], "y_h");
            close(c[i], cn[i], "y_c");
        }
    }
}

isa_tests!(lstm_layer, check);
