//! Tests that malformed plans and inputs give errors, never panics.

use super::tests::{dense, ew, Builder};
use super::*;
use smelt_ir::kernel::{BufferId, ScalarOp as S, TensorRef, Unary};

#[test]
fn validation_errors_are_errors() {
    let base = || {
        let mut b = Builder::new();
        let x = b.input("x", DType::F32, &[4]);
        let out = b.output("out", DType::F32, &[4]);
        (b, x, out)
    };
    let check = |b: Builder, needle: &str| {
        let e = CpuPlan::new(b.plan).err().expect("must fail").to_string();
        assert!(e.contains(needle), "{e}");
    };
    // A window past its buffer's end.
    let (mut b, x, out) = base();
    let far = TensorRef {
        buffer: x,
        offset: 1,
        shape: vec![4],
        strides: vec![1],
    };
    b.group(ew(
        &[4],
        vec![far],
        vec![S::Load(0)],
        vec![(0, dense(out, &[4]))],
    ));
    check(b, "outside buffer");
    // An operand that is not an earlier op.
    let (mut b, x, out) = base();
    b.group(ew(
        &[4],
        vec![dense(x, &[4])],
        vec![S::Load(0), S::Unary(Unary::Neg, 1)],
        vec![(1, dense(out, &[4]))],
    ));
    check(b, "not earlier");
    // A store value out of range, and a load that does not exist.
    let (mut b, x, out) = base();
    b.group(ew(
        &[4],
        vec![dense(x, &[4])],
        vec![S::Load(0)],
        vec![(5, dense(out, &[4]))],
    ));
    check(b, "store 0");
    let (mut b, x, out) = base();
    b.group(ew(
        &[4],
        vec![dense(x, &[4])],
        vec![S::Load(3)],
        vec![(0, dense(out, &[4]))],
    ));
    check(b, "load 3");
    // Writing an input, Acc outside an anchor, a negative reach, a huge broadcast shape.
    let (mut b, x, _) = base();
    b.group(ew(
        &[4],
        vec![dense(x, &[4])],
        vec![S::Load(0)],
        vec![(0, dense(x, &[4]))],
    ));
    check(b, "read only");
    let (mut b, _, out) = base();
    b.group(ew(&[4], vec![], vec![S::Acc], vec![(0, dense(out, &[4]))]));
    check(b, "Acc");
    let (mut b, x, out) = base();
    let back = TensorRef {
        buffer: x,
        offset: 0,
        shape: vec![4],
        strides: vec![-1],
    };
    b.group(ew(
        &[4],
        vec![back],
        vec![S::Load(0)],
        vec![(0, dense(out, &[4]))],
    ));
    check(b, "outside buffer");
    let (mut b, x, out) = base();
    let huge = vec![usize::MAX / 2, 4];
    let zero = TensorRef {
        buffer: x,
        offset: 0,
        shape: huge.clone(),
        strides: vec![0, 0],
    };
    let o = TensorRef {
        buffer: out,
        offset: 0,
        shape: huge.clone(),
        strides: vec![0, 1],
    };
    b.group(ew(&huge, vec![zero], vec![S::Load(0)], vec![(0, o)]));
    assert!(CpuPlan::new(b.plan).is_err());
    // Misaligned or oversized arena buffers, rank mismatches, wrong shapes.
    let (mut b, _, _) = base();
    let t = b.arena("t", DType::F32, &[4]);
    b.plan.buffers[t.0 as usize].kind = BufferKind::Arena { offset: 4 };
    check(b, "aligned");
    let (mut b, _, _) = base();
    b.arena("t", DType::F32, &[4]);
    b.plan.memory.arena_bytes = 8;
    check(b, "exceed");
    let (mut b, x, out) = base();
    let bad = TensorRef {
        buffer: x,
        offset: 0,
        shape: vec![4],
        strides: vec![],
    };
    b.group(ew(
        &[4],
        vec![bad],
        vec![S::Load(0)],
        vec![(0, dense(out, &[4]))],
    ));
    check(b, "strides");
    let (mut b, x, out) = base();
    b.group(ew(
        &[2, 2],
        vec![dense(x, &[2, 2])],
        vec![S::Load(0)],
        vec![(0, dense(out, &[4]))],
    ));
    check(b, "shape");
    let (mut b, x, out) = base();
    b.group(ew(
        &[4],
        vec![dense(BufferId(9), &[4])],
        vec![S::Load(0)],
        vec![(0, dense(out, &[4]))],
    ));
    let _ = x;
    check(b, "no buffer");
}

#[test]
fn input_checks_name_the_input() {
    let mut b = Builder::new();
    let x = b.input("pixels", DType::F32, &[4]);
    let out = b.output("out", DType::F32, &[4]);
    b.group(ew(
        &[4],
        vec![dense(x, &[4])],
        vec![S::Load(0)],
        vec![(0, dense(out, &[4]))],
    ));
    let p = b.build();
    let wrong = Tensor::from_f32(vec![5], vec![0.0; 5]).unwrap();
    let e = p
        .run(&[&wrong], &mut Arena::new(0), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("pixels"), "{e}");
    assert!(p.run(&[], &mut Arena::new(0), None).is_err());
}
