use smelt_ir::kernel::{Binary, ScalarOp as S, Unary};
use smelt_kernels::program::{fill_consts, CHUNK};
use smelt_kernels::{Isa, Kernels};
use std::time::Instant;
fn bench(name: &str, ops: Vec<S>, len: usize) {
    let order: Vec<usize> = (0..ops.len()).collect();
    for isa in [Isa::Avx512, Isa::Avx2] {
        let Some(k) = Kernels::for_isa(isa) else {
            continue;
        };
        let mut vals = vec![0.3f32; ops.len() * CHUNK];
        fill_consts(&ops, &mut vals);
        let n = 200_000;
        let t = Instant::now();
        for _ in 0..n {
            (k.eval)(&ops, &order, len, &mut vals, &[]);
            std::hint::black_box(&mut vals);
        }
        let per = t.elapsed().as_secs_f64() / n as f64;
        println!(
            "{name} {isa} len {len}: {:.1} ns, {:.2} cycles/elem",
            per * 1e9,
            per * 3.7e9 / len as f64
        );
    }
}
fn main() {
    bench("none", vec![S::Load(0), S::Load(1)], 192);
    bench(
        "add8",
        vec![
            S::Load(0),
            S::Load(1),
            S::Binary(Binary::Add, 0, 1),
            S::Binary(Binary::Add, 2, 1),
            S::Binary(Binary::Add, 3, 1),
            S::Binary(Binary::Add, 4, 1),
            S::Binary(Binary::Add, 5, 1),
            S::Binary(Binary::Add, 6, 1),
            S::Binary(Binary::Add, 7, 1),
            S::Binary(Binary::Add, 8, 1),
        ],
        192,
    );
    bench("gelu", vec![S::Load(0), S::Unary(Unary::Gelu, 0)], 256);
    bench("silu", vec![S::Load(0), S::Unary(Unary::Silu, 0)], 256);
    bench(
        "sigmoid",
        vec![S::Load(0), S::Unary(Unary::Sigmoid, 0)],
        256,
    );
    bench("tanh", vec![S::Load(0), S::Unary(Unary::Tanh, 0)], 256);
    for len in [256] {
        bench(
            "add",
            vec![S::Load(0), S::Load(1), S::Binary(Binary::Add, 0, 1)],
            len,
        );
        bench("erf", vec![S::Load(0), S::Unary(Unary::Erf, 0)], len);
        bench("exp", vec![S::Load(0), S::Unary(Unary::Exp, 0)], len);
        bench("relu", vec![S::Load(0), S::Unary(Unary::Relu, 0)], len);
        bench(
            "max",
            vec![S::Load(0), S::Load(1), S::Binary(Binary::Max, 0, 1)],
            len,
        );
    }
}
