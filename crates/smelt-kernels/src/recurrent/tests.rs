use super::*;
use crate::isa_tests;
use crate::testing::rand_vec;

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The operands of one direction, as ONNX lays them out.
struct Operands {
    x: Vec<f32>,
    w: Vec<f32>,
    r: Vec<f32>,
    b: Vec<f32>,
    p: Option<Vec<f32>>,
    h0: Vec<f32>,
    c0: Vec<f32>,
}

/// The plain f64 layer of one direction, straight from the ONNX formulas: (y rows per step,
/// final h, final c).
fn naive(l: &Layer, reverse: bool, o: &Operands) -> (Vec<Vec<f64>>, Vec<f64>, Vec<f64>) {
    let (seq, batch, inp, h) = (l.seq, l.batch, l.input, l.hidden);
    let g = l.kind.gates() * h;
    let mut hs: Vec<f64> = o.h0.iter().map(|&v| v as f64).collect();
    let mut cs: Vec<f64> = o.c0.iter().map(|&v| v as f64).collect();
    let mut ys = vec![Vec::new(); seq];
    let clip = |v: f64| v.clamp(-(l.clip as f64), l.clip as f64);
    let (wb, rb) = (&o.b[..g], &o.b[g..]);
    for step in 0..seq {
        let t = if reverse { seq - 1 - step } else { step };
        let mut hn = vec![0.0; batch * h];
        for b in 0..batch {
            let xo = if l.batch_major {
                b * seq + t
            } else {
                t * batch + b
            } * inp;
            let hp = &hs[b * h..(b + 1) * h];
            // x W_g^T + Wb_g and H R_g^T (on any operand) + Rb_g, per gate row.
            let xw = |row: usize| {
                let w = &o.w[row * inp..(row + 1) * inp];
                let x = &o.x[xo..xo + inp];
                wb[row] as f64
                    + w.iter()
                        .zip(x)
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum::<f64>()
            };
            let hr = |row: usize, v: &[f64]| {
                let r = &o.r[row * h..(row + 1) * h];
                rb[row] as f64 + r.iter().zip(v).map(|(&a, &b)| a as f64 * b).sum::<f64>()
            };
            let act = |v: f64| match l.kind {
                Kind::Rnn(Act::Relu) => v.max(0.0),
                Kind::Rnn(Act::Sigmoid) => sig(v),
                _ => v.tanh(),
            };
            match l.kind {
                Kind::Rnn(_) => {
                    for j in 0..h {
                        hn[b * h + j] = act(clip(xw(j) + hr(j, hp)));
                    }
                }
                Kind::Gru {
                    linear_before_reset,
                } => {
                    let z: Vec<f64> = (0..h).map(|j| sig(clip(xw(j) + hr(j, hp)))).collect();
                    let r: Vec<f64> = (0..h)
                        .map(|j| sig(clip(xw(h + j) + hr(h + j, hp))))
                        .collect();
                    let reset: Vec<f64> = (0..h).map(|j| r[j] * hp[j]).collect();
                    for j in 0..h {
                        let cand = if linear_before_reset {
                            xw(2 * h + j) + r[j] * hr(2 * h + j, hp)
                        } else {
                            xw(2 * h + j) + hr(2 * h + j, &reset)
                        };
                        let cand = clip(cand).tanh();
                        hn[b * h + j] = (1.0 - z[j]) * cand + z[j] * hp[j];
                    }
                }
                Kind::Lstm => {
                    for j in 0..h {
                        let cp = cs[b * h + j];
                        let pre = |gate: usize| xw(gate * h + j) + hr(gate * h + j, hp);
                        let pk = |k: usize| o.p.as_ref().map_or(0.0, |p| p[k * h + j] as f64);
                        let i = sig(clip(pre(0) + pk(0) * cp));
                        let f = sig(clip(pre(2) + pk(2) * cp));
                        let c = clip(pre(3)).tanh();
                        let cn = f * cp + i * c;
                        let o = sig(clip(pre(1) + pk(1) * cn));
                        cs[b * h + j] = cn;
                        hn[b * h + j] = o * cn.tanh();
                    }
                }
            }
        }
        hs = hn;
        ys[t] = hs.clone();
    }
    (ys, hs, cs)
}

fn check_layer(kern: &Kernels, l: &Layer, reverse: bool, peep: bool, threads: usize, want_y: bool) {
    let (seq, batch, input, hidden) = (l.seq, l.batch, l.input, l.hidden);
    let g = l.kind.gates() * hidden;
    let o = Operands {
        x: rand_vec(seq * batch * input, 1),
        w: rand_vec(g * input, 2),
        r: rand_vec(g * hidden, 3),
        b: rand_vec(2 * g, 4),
        p: peep.then(|| rand_vec(3 * hidden, 5)),
        h0: rand_vec(batch * hidden, 6),
        c0: rand_vec(batch * hidden, 7),
    };
    let pw = Weights::pack(
        kern,
        l.kind,
        0,
        (input, hidden),
        &o.w,
        &o.r,
        Some(&o.b),
        o.p.as_deref(),
    );
    let (ys, hn, cn) = naive(l, reverse, &o);
    let (mut h, mut c) = (o.h0.clone(), o.c0.clone());
    let mut y = vec![f32::NAN; seq * batch * hidden];
    unsafe {
        run_direction(
            kern,
            crate::pool::global(),
            threads,
            l,
            (0, 1, reverse),
            &pw,
            &o.x,
            &mut h,
            &mut c,
            want_y.then_some(&mut y[..]),
        )
    };
    let what = format!("{l:?} reverse {reverse} peepholes {peep} threads {threads} y {want_y}");
    let close = |a: f32, e: f64, name: &str| {
        assert!(
            (a as f64 - e).abs() <= 2e-5 + 2e-5 * e.abs(),
            "{name}: {a} vs {e} ({what})"
        );
    };
    for (t, yt) in ys.iter().enumerate().filter(|_| want_y) {
        for bb in 0..batch {
            for j in 0..hidden {
                let at = if l.batch_major {
                    bb * seq + t
                } else {
                    t * batch + bb
                } * hidden
                    + j;
                close(y[at], yt[bb * hidden + j], "y");
            }
        }
    }
    for i in 0..batch * hidden {
        close(h[i], hn[i], "y_h");
        if l.kind == Kind::Lstm {
            close(c[i], cn[i], "y_c");
        }
    }
}

/// (seq, batch, input, hidden, batch_major, clip, reverse): few rows (the gate kernels),
/// more rows than a tile (the micro-kernels, several row blocks), hidden sizes off the
/// panel width, steps large enough for the threads to split their units, and a tile of
/// rows per thread (threads split the batch).
const SHAPES: &[(usize, usize, usize, usize, bool, f32, bool)] = &[
    (1, 1, 1, 1, false, f32::INFINITY, false),
    (5, 3, 7, 9, false, f32::INFINITY, false),
    (4, 2, 5, 17, true, 0.7, true),
    (6, 8, 16, 33, false, 2.0, true),
    (3, 14, 6, 40, true, f32::INFINITY, false),
    (3, 1, 8, 200, false, f32::INFINITY, true),
    (2, 3, 8, 130, false, f32::INFINITY, false),
    (3, 26, 4, 20, true, 1.5, true),
];

fn check(kern: &Kernels, kind: Kind) {
    for &(seq, batch, input, hidden, batch_major, clip, reverse) in SHAPES {
        let l = Layer {
            kind,
            seq,
            batch,
            input,
            hidden,
            batch_major,
            clip,
        };
        for threads in [1, 2] {
            // Without Y the states take two buffers in turn.
            for want_y in [true, false] {
                check_layer(kern, &l, reverse, false, threads, want_y);
            }
            if kind == Kind::Lstm {
                check_layer(kern, &l, reverse, true, threads, true);
            }
        }
    }
}

isa_tests!(lstm_layer, |k| check(k, Kind::Lstm));
isa_tests!(gru_layer, |k| {
    check(
        k,
        Kind::Gru {
            linear_before_reset: true,
        },
    );
    check(
        k,
        Kind::Gru {
            linear_before_reset: false,
        },
    )
});
isa_tests!(rnn_layer, |k| {
    for act in [Act::Tanh, Act::Relu, Act::Sigmoid] {
        check(k, Kind::Rnn(act))
    }
});

/// The gate kernel's products equal the GEMM micro-kernel's bit for bit, so a layer's result
/// does not depend on how many batch rows share a step.
fn gates_match_micro(kern: &Kernels) {
    let (nr, k) = (kern.micro.nr, 37);
    let a = rand_vec(GATE_ROWS * k, 11);
    let panels: Vec<Vec<f32>> = (0..MAX_GATES)
        .map(|g| rand_vec(k * nr, 12 + g as u64))
        .collect();
    let ptrs: [*const f32; 4] = std::array::from_fn(|g| panels[g].as_ptr());
    for rows in 1..=GATE_ROWS {
        for gates in 1..=MAX_GATES {
            let gs = rows * nr;
            let mut got = vec![f32::NAN; gates * gs];
            unsafe {
                (kern.recurrent_gates)(k, a.as_ptr(), k, rows, &ptrs, gates, got.as_mut_ptr(), gs)
            };
            for g in 0..gates {
                let mut want = vec![f32::NAN; gs];
                unsafe {
                    (kern.micro.for_rows(rows))(
                        k,
                        a.as_ptr(),
                        k as isize,
                        1,
                        ptrs[g],
                        nr as isize,
                        want.as_mut_ptr(),
                        nr,
                        false,
                    )
                };
                let got = &got[g * gs..(g + 1) * gs];
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "rows {rows} gates {gates}: gate {g} differs"
                );
            }
        }
    }
}

isa_tests!(gates_kernel, gates_match_micro);
