//! Tests of reductions, anchors and single ops against direct math and the reference.

use super::tests::{bcast, close, data, dense, ew, run, Builder};
use super::*;
use smelt_ir::kernel::{
    Anchor, Binary, Combine, Loop, Reduction, ScalarOp as S, Single, Stage, Store, TensorRef, Unary,
};
use smelt_ir::op::reduce::Reduction as Axes;
use smelt_ir::op::{AutoPad, NnOp, ReduceOp};
use smelt_ir::Op;
use smelt_reference::eval_op;

fn reduction(
    shape: &[usize],
    reduce_from: usize,
    loads: Vec<TensorRef>,
    ops: Vec<S>,
    stages: Vec<(Combine, usize)>,
    stores: Vec<(usize, TensorRef, bool)>,
) -> GroupBody {
    GroupBody::Reduction(Reduction {
        body: Loop {
            shape: shape.to_vec(),
            loads,
            ops,
            stores: stores
                .into_iter()
                .map(|(value, dst, per_row)| Store {
                    value,
                    dst,
                    per_row,
                })
                .collect(),
        },
        reduce_from,
        stages: stages
            .into_iter()
            .map(|(combine, value)| Stage { combine, value })
            .collect(),
    })
}

#[test]
fn softmax_as_two_stages() {
    let (rows, n) = (4, 1000);
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[rows, n]);
    let out = b.output("y", DType::F32, &[rows, n]);
    let ops = vec![
        S::Load(0),
        S::Reduced(0),
        S::Binary(Binary::Sub, 0, 1),
        S::Unary(Unary::Exp, 2),
        S::Reduced(1),
        S::Binary(Binary::Div, 3, 4),
    ];
    let stages = vec![(Combine::Max, 0), (Combine::Sum, 3)];
    b.group(reduction(
        &[rows, n],
        1,
        vec![dense(x, &[rows, n])],
        ops,
        stages,
        vec![(5, dense(out, &[rows, n]), false)],
    ));
    let p = b.build();
    let xs = Tensor::from_f32(
        vec![rows, n],
        data(rows * n, 4).iter().map(|v| v * 5.0).collect(),
    )
    .unwrap();
    let r = run(&p, &[&xs]);
    let op = Op::Reduce(ReduceOp::Softmax {
        axis: -1,
        coerce_2d: false,
    });
    let want = eval_op(&op, &[Some(&xs)], 1).unwrap();
    close(r[0].as_f32().unwrap(), want[0].as_f32().unwrap(), 1e-5);
}

#[test]
fn layer_norm_with_broadcast_affine() {
    let (rows, n) = (3, 64);
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[rows, n]);
    let gv = data(n, 5);
    let bv = data(n, 6);
    let g = b.weight("gamma", Tensor::from_f32(vec![n], gv.clone()).unwrap());
    let be = b.weight("beta", Tensor::from_f32(vec![n], bv.clone()).unwrap());
    let out = b.output("y", DType::F32, &[rows, n]);
    let sh = [rows, n];
    let ops = vec![
        S::Load(0),
        S::Reduced(0),
        S::Const(1.0 / n as f32),
        S::Binary(Binary::Mul, 1, 2),
        S::Binary(Binary::Sub, 0, 3),
        S::Binary(Binary::Mul, 4, 4),
        S::Reduced(1),
        S::Binary(Binary::Mul, 6, 2),
        S::Const(1e-5),
        S::Binary(Binary::Add, 7, 8),
        S::Unary(Unary::Rsqrt, 9),
        S::Binary(Binary::Mul, 4, 10),
        S::Load(1),
        S::Binary(Binary::Mul, 11, 12),
        S::Load(2),
        S::Binary(Binary::Add, 13, 14),
    ];
    let loads = vec![dense(x, &sh), bcast(g, &[n], &sh), bcast(be, &[n], &sh)];
    b.group(reduction(
        &sh,
        1,
        loads,
        ops,
        vec![(Combine::Sum, 0), (Combine::Sum, 5)],
        vec![(15, dense(out, &sh), false)],
    ));
    let p = b.build();
    let xv = data(rows * n, 7);
    let r = run(&p, &[&Tensor::from_f32(sh.to_vec(), xv.clone()).unwrap()]);
    let mut want = Vec::new();
    for row in xv.chunks(n) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        for (j, &v) in row.iter().enumerate() {
            let y = (v as f64 - mean) / (var + 1e-5).sqrt() * gv[j] as f64 + bv[j] as f64;
            want.push(y as f32);
        }
    }
    close(r[0].as_f32().unwrap(), &want, 1e-5);
}

#[test]
fn per_row_means_and_strided_rows() {
    let sh = [4, 5, 6];
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &sh);
    let mean = b.output("mean", DType::F32, &[4, 1, 1]);
    let sum1 = b.output("sum1", DType::F32, &[4, 6]);
    // Mean over the last two axes, one value per row.
    let row_dst = TensorRef {
        buffer: mean,
        offset: 0,
        shape: vec![4],
        strides: vec![1],
    };
    let ops = vec![
        S::Load(0),
        S::Reduced(0),
        S::Const(1.0 / 30.0),
        S::Binary(Binary::Mul, 1, 2),
    ];
    b.group(reduction(
        &sh,
        1,
        vec![dense(x, &sh)],
        ops,
        vec![(Combine::Sum, 0)],
        vec![(3, row_dst, true)],
    ));
    // Sum over the middle axis: loop [4, 6, 5] reading x transposed.
    let xt = TensorRef {
        buffer: x,
        offset: 0,
        shape: vec![4, 6, 5],
        strides: vec![30, 1, 6],
    };
    let ops = vec![S::Load(0), S::Reduced(0)];
    b.group(reduction(
        &[4, 6, 5],
        2,
        vec![xt],
        ops,
        vec![(Combine::Sum, 0)],
        vec![(1, dense(sum1, &[4, 6]), true)],
    ));
    let p = b.build();
    let xs = Tensor::from_f32(sh.to_vec(), data(120, 8)).unwrap();
    let r = run(&p, &[&xs]);
    let axes = |a: Vec<i64>, keepdims| Axes {
        axes: Some(a),
        keepdims,
        noop_with_empty_axes: false,
    };
    let want = eval_op(
        &Op::Reduce(ReduceOp::ReduceMean(axes(vec![1, 2], true))),
        &[Some(&xs)],
        1,
    )
    .unwrap();
    close(r[0].as_f32().unwrap(), want[0].as_f32().unwrap(), 1e-6);
    assert_eq!(r[0].shape(), want[0].shape());
    let want = eval_op(
        &Op::Reduce(ReduceOp::ReduceSum(axes(vec![1], false))),
        &[Some(&xs)],
        1,
    )
    .unwrap();
    close(r[1].as_f32().unwrap(), want[0].as_f32().unwrap(), 1e-6);
}

#[test]
fn long_rows_sum_accurately() {
    let (rows, n) = (2, 100_000);
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[rows, n]);
    let s = b.output("s", DType::F32, &[rows]);
    let m = b.output("m", DType::F32, &[rows]);
    let ops = vec![S::Load(0), S::Reduced(0), S::Reduced(1)];
    let stages = vec![(Combine::Sum, 0), (Combine::Min, 0)];
    b.group(reduction(
        &[rows, n],
        1,
        vec![dense(x, &[rows, n])],
        ops,
        stages,
        vec![(1, dense(s, &[rows]), true), (2, dense(m, &[rows]), true)],
    ));
    let p = b.build();
    let mut xv: Vec<f32> = data(rows * n, 10).iter().map(|v| v.abs() + 0.1).collect();
    xv[5] = 1e4;
    let r = run(&p, &[&Tensor::from_f32(vec![rows, n], xv.clone()).unwrap()]);
    for (k, row) in xv.chunks(n).enumerate() {
        let want: f64 = row.iter().map(|&v| v as f64).sum();
        let got = r[0].as_f32().unwrap()[k] as f64;
        assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
        let min = row.iter().cloned().fold(f32::INFINITY, f32::min);
        assert_eq!(r[1].as_f32().unwrap()[k], min);
    }
}

#[test]
fn conv_anchor_with_bias_relu_and_residual() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[1, 2, 5, 5]);
    let res = b.input("res", DType::F32, &[1, 3, 5, 5]);
    let wt = Tensor::from_f32(vec![3, 2, 3, 3], data(54, 11)).unwrap();
    let bt = Tensor::from_f32(vec![3], vec![0.5, -0.25, 1.0]).unwrap();
    let w = b.weight("w", wt.clone());
    let bias = b.weight("b", bt.clone());
    let out = b.output("y", DType::F32, &[1, 3, 5, 5]);
    let sh = [1, 3, 5, 5];
    let conv = Op::Nn(NnOp::Conv {
        auto_pad: AutoPad::NotSet,
        dilations: vec![],
        group: 1,
        kernel_shape: vec![3, 3],
        pads: vec![1, 1, 1, 1],
        strides: vec![],
    });
    let bias_ref = TensorRef {
        buffer: bias,
        offset: 0,
        shape: sh.to_vec(),
        strides: vec![0, 1, 0, 0],
    };
    b.group(GroupBody::Anchor(Anchor {
        op: conv.clone(),
        inputs: vec![Some(dense(x, &[1, 2, 5, 5])), Some(dense(w, &[3, 2, 3, 3]))],
        shape: sh.to_vec(),
        epilogue: Loop {
            shape: sh.to_vec(),
            loads: vec![bias_ref, dense(res, &sh)],
            ops: vec![
                S::Acc,
                S::Load(0),
                S::Binary(Binary::Add, 0, 1),
                S::Unary(Unary::Relu, 2),
                S::Load(1),
                S::Binary(Binary::Add, 3, 4),
            ],
            stores: vec![Store {
                value: 5,
                dst: dense(out, &sh),
                per_row: false,
            }],
        },
    }));
    let p = b.build();
    let xs = Tensor::from_f32(vec![1, 2, 5, 5], data(50, 12)).unwrap();
    let rs = Tensor::from_f32(sh.to_vec(), data(75, 13)).unwrap();
    let r = run(&p, &[&xs, &rs]);
    let c = eval_op(&conv, &[Some(&xs), Some(&wt), Some(&bt)], 1).unwrap();
    let want: Vec<f32> = c[0]
        .as_f32()
        .unwrap()
        .iter()
        .zip(rs.as_f32().unwrap())
        .map(|(&a, &b)| a.max(0.0) + b)
        .collect();
    // The fast convolution sums in another order than the reference: 1e-5 relative.
    close(r[0].as_f32().unwrap(), &want, 1e-5);
}

#[test]
fn matmul_anchor_on_a_transposed_input() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[2, 4, 3]);
    let wt = Tensor::from_f32(vec![4, 5], data(20, 14)).unwrap();
    let w = b.weight("w", wt.clone());
    let out = b.output("y", DType::F32, &[2, 3, 5]);
    let xt = TensorRef {
        buffer: x,
        offset: 0,
        shape: vec![2, 3, 4],
        strides: vec![12, 1, 3],
    };
    b.group(GroupBody::Anchor(Anchor {
        op: Op::Nn(NnOp::MatMul),
        inputs: vec![Some(xt), Some(dense(w, &[4, 5]))],
        shape: vec![2, 3, 5],
        epilogue: Loop {
            shape: vec![2, 3, 5],
            loads: vec![],
            ops: vec![S::Acc, S::Const(0.5), S::Binary(Binary::Mul, 0, 1)],
            stores: vec![Store {
                value: 2,
                dst: dense(out, &[2, 3, 5]),
                per_row: false,
            }],
        },
    }));
    let p = b.build();
    let xv = data(24, 15);
    let r = run(&p, &[&Tensor::from_f32(vec![2, 4, 3], xv.clone()).unwrap()]);
    // x transposed by hand, then the reference MatMul.
    let mut t = vec![0.0; 24];
    for bi in 0..2 {
        for i in 0..3 {
            for k in 0..4 {
                t[bi * 12 + i * 4 + k] = xv[bi * 12 + k * 3 + i];
            }
        }
    }
    let tt = Tensor::from_f32(vec![2, 3, 4], t).unwrap();
    let m = eval_op(&Op::Nn(NnOp::MatMul), &[Some(&tt), Some(&wt)], 1).unwrap();
    let want: Vec<f32> = m[0].as_f32().unwrap().iter().map(|v| v * 0.5).collect();
    close(r[0].as_f32().unwrap(), &want, 1e-6);
}

fn max_pool() -> Op {
    Op::Nn(NnOp::MaxPool {
        auto_pad: AutoPad::NotSet,
        ceil_mode: false,
        dilations: vec![],
        kernel_shape: vec![2, 2],
        pads: vec![],
        storage_order: 0,
        strides: vec![2, 2],
    })
}

#[test]
fn single_max_pool_matches_the_reference() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[1, 2, 4, 4]);
    let t = b.arena("t", DType::F32, &[1, 2, 2, 2]);
    let out = b.output("y", DType::F32, &[1, 2, 2, 2]);
    let idx = b.output("i", DType::I64, &[1, 2, 2, 2]);
    b.group(GroupBody::Single(Single {
        op: max_pool(),
        inputs: vec![Some(dense(x, &[1, 2, 4, 4]))],
        outputs: vec![
            Some(dense(t, &[1, 2, 2, 2])),
            Some(dense(idx, &[1, 2, 2, 2])),
        ],
    }));
    b.group(ew(
        &[1, 2, 2, 2],
        vec![dense(t, &[1, 2, 2, 2])],
        vec![S::Load(0)],
        vec![(0, dense(out, &[1, 2, 2, 2]))],
    ));
    let p = b.build();
    let xs = Tensor::from_f32(vec![1, 2, 4, 4], data(32, 16)).unwrap();
    let r = run(&p, &[&xs]);
    let want = eval_op(&max_pool(), &[Some(&xs)], 2).unwrap();
    assert_eq!(r, want);
}

#[test]
fn single_shape_mismatch_names_the_op() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[1, 1, 4, 4]);
    let out = b.output("y", DType::F32, &[1, 1, 3, 3]);
    b.group(GroupBody::Single(Single {
        op: max_pool(),
        inputs: vec![Some(dense(x, &[1, 1, 4, 4]))],
        outputs: vec![Some(dense(out, &[1, 1, 3, 3]))],
    }));
    let p = b.build();
    let xs = Tensor::from_f32(vec![1, 1, 4, 4], data(16, 17)).unwrap();
    let e = p
        .run(&[&xs], &mut Arena::new(0), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("MaxPool"), "{e}");
}

#[test]
fn reduction_validation_errors() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[2, 3]);
    let out = b.output("y", DType::F32, &[2]);
    // Stage 0 reads stage 1.
    let ops = vec![S::Load(0), S::Reduced(1), S::Binary(Binary::Add, 0, 1)];
    b.group(reduction(
        &[2, 3],
        1,
        vec![dense(x, &[2, 3])],
        ops,
        vec![(Combine::Sum, 2), (Combine::Max, 0)],
        vec![(0, dense(out, &[2]), true)],
    ));
    assert!(CpuPlan::new(b.plan.clone()).is_err());
    // A per-row store of the wrong shape, reduce_from past the rank.
    b.plan.groups.clear();
    b.group(reduction(
        &[2, 3],
        1,
        vec![dense(x, &[2, 3])],
        vec![S::Load(0)],
        vec![(Combine::Sum, 0)],
        vec![(0, dense(out, &[2]), false)],
    ));
    assert!(CpuPlan::new(b.plan.clone()).is_err());
    // Per-row values reading loads of empty rows.
    let mut e = Builder::new();
    let x0 = e.input("x", DType::F32, &[2, 0]);
    let o = e.output("y", DType::F32, &[2]);
    e.group(reduction(
        &[2, 0],
        1,
        vec![dense(x0, &[2, 0])],
        vec![S::Load(0)],
        vec![(Combine::Sum, 0)],
        vec![(0, dense(o, &[2]), true)],
    ));
    assert!(CpuPlan::new(e.plan).is_err());
    b.plan.groups.clear();
    b.group(reduction(
        &[2, 3],
        3,
        vec![dense(x, &[2, 3])],
        vec![S::Load(0)],
        vec![(Combine::Sum, 0)],
        vec![],
    ));
    assert!(CpuPlan::new(b.plan.clone()).is_err());
}
