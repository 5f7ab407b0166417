//! Small checks of the reduce kernels.

use super::*;
use crate::{Env, Inputs};
use smelt_ir::op::reduce::Reduction;

fn run1(op: ReduceOp, inputs: Vec<Value>) -> Result<Vec<Value>> {
    let env = Env::new();
    let cx = Ctx {
        n_outputs: 2,
        outputs_used: vec![true, true],
        env: &env,
        consts: &env,
        control: crate::test_control(),
        depth: 0,
        runner: None,
    };
    let x = Inputs::new(inputs.iter().map(Some).collect());
    run(&op, &x, &cx)
}

fn f32s(v: &Value) -> Vec<f32> {
    v.tensor().unwrap().as_f32().unwrap().to_vec()
}

fn t(shape: Vec<usize>, v: Vec<f32>) -> Value {
    Value::Tensor(Tensor::from_f32(shape, v).unwrap())
}

fn red(axes: Option<Vec<i64>>, keepdims: bool) -> Reduction {
    Reduction {
        axes,
        keepdims,
        noop_with_empty_axes: false,
    }
}

#[test]
fn reduce_sum_axes_and_empty_set() {
    let x = t(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
    let out = run1(
        ReduceOp::ReduceSum(red(Some(vec![-1]), false)),
        vec![x.clone()],
    )
    .unwrap();
    assert_eq!(f32s(&out[0]), vec![6., 15.]);
    let axes = Value::Tensor(Tensor::from_i64_vec(vec![1], vec![0]).unwrap());
    let out = run1(ReduceOp::ReduceMax(red(None, true)), vec![x.clone(), axes]).unwrap();
    assert_eq!(out[0].tensor().unwrap().shape(), &[1, 3]);
    assert_eq!(f32s(&out[0]), vec![4., 5., 6.]);
    let empty = t(vec![2, 0], vec![]);
    let out = run1(ReduceOp::ReduceProd(red(Some(vec![1]), false)), vec![empty]).unwrap();
    assert_eq!(f32s(&out[0]), vec![1., 1.]);
    assert!(run1(ReduceOp::ReduceSum(red(Some(vec![2]), false)), vec![x]).is_err());
}

#[test]
fn integer_sums_are_exact() {
    let big = (1i64 << 60) + 1;
    let x = Value::Tensor(Tensor::from_i64_vec(vec![2], vec![big, 1]).unwrap());
    let out = run1(ReduceOp::ReduceSum(red(Some(vec![]), false)), vec![x]).unwrap();
    assert_eq!(out[0].tensor().unwrap().as_i64().unwrap(), &[big + 1]);
}

#[test]
fn argmax_ties_and_topk() {
    let x = t(vec![4], vec![1., 3., 3., 0.]);
    let first = run1(
        ReduceOp::ArgMax {
            axis: 0,
            keepdims: false,
            select_last_index: false,
        },
        vec![x.clone()],
    )
    .unwrap();
    assert_eq!(first[0].tensor().unwrap().as_i64().unwrap(), &[1]);
    let last = run1(
        ReduceOp::ArgMax {
            axis: 0,
            keepdims: true,
            select_last_index: true,
        },
        vec![x.clone()],
    )
    .unwrap();
    assert_eq!(last[0].tensor().unwrap().as_i64().unwrap(), &[2]);
    let top = run1(
        ReduceOp::TopK {
            k: Some(3),
            axis: -1,
            largest: true,
            sorted: true,
        },
        vec![x.clone()],
    )
    .unwrap();
    assert_eq!(f32s(&top[0]), vec![3., 3., 1.]);
    assert_eq!(top[1].tensor().unwrap().as_i64().unwrap(), &[1, 2, 0]);
    assert!(run1(
        ReduceOp::TopK {
            k: Some(5),
            axis: 0,
            largest: true,
            sorted: true
        },
        vec![x]
    )
    .is_err());
}

#[test]
fn softmax_and_cumsum() {
    let x = t(vec![1, 2], vec![0., 0.]);
    let out = run1(
        ReduceOp::Softmax {
            axis: -1,
            coerce_2d: false,
        },
        vec![x],
    )
    .unwrap();
    assert_eq!(f32s(&out[0]), vec![0.5, 0.5]);
    let x = t(vec![3], vec![1., 2., 3.]);
    let axis = Value::Tensor(Tensor::scalar_i64(0));
    let out = run1(
        ReduceOp::CumSum {
            exclusive: true,
            reverse: true,
        },
        vec![x, axis],
    )
    .unwrap();
    assert_eq!(f32s(&out[0]), vec![5., 3., 0.]);
}
