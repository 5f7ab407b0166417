//! Elementwise groups long enough to be compiled to machine code (`smelt_kernels::jit`),
//! run through a session on every ISA the machine has, at one and two threads: a chain
//! with broadcast operands (per channel and per row), comparisons and selections, and two
//! outputs, against the reference executor. Tolerance: |plan - reference| <= 1e-6 + 1e-5 |reference| (the same ops in
//! the same order; the reference computes some in f64).

mod common;

use common::{floats, model, tensor_json};
use smelt_ir::{Tensor, Value};
use smelt_kernels::Isa;
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

#[test]
fn compiled_loops_match_the_reference() {
    // 2 x 64 x 33 x 31: 130,944 elements, rows of 31 (odd: every row has a tail).
    let (n, c, h, w) = (2, 64, 33, 31);
    let bias = tensor_json(&[1, c, 1, 1], &floats(c, 3));
    let row = tensor_json(&[1, 1, 1, w], &floats(w, 4));
    let half = tensor_json(&[1], &[0.5]);
    let text = format!(
        r#"graph "g" {{
  input %0 "x": f32[{n},{c},{h},{w}]
  input %1 "y": f32[{n},{c},{h},{w}]
  const %2 "bias" = {bias}
  const %3 "row" = {row}
  const %4 "half" = {half}
  %5 "a" = elementwise.Add (%0, %2) # "add_bias"
  %6 "m" = elementwise.Mul (%5, %1) # "mul_y"
  %7 "d" = elementwise.Sub (%6, %3) # "sub_row"
  %8 "mx" = elementwise.Max (%7, %0) # "max_x"
  %9 "g" = elementwise.Greater (%8, %4) # "gt"
  %10 "s" = elementwise.Where (%9, %8, %1) # "where"
  %11 "ab" = elementwise.Abs (%10) # "abs"
  %12 "q" = elementwise.Sqrt (%11) # "sqrt"
  %13 "f" = elementwise.Floor (%12) # "floor"
  %14 "o" = elementwise.Div (%13, %5) # "div"
  %15 "r" = elementwise.Relu (%14) # "relu"
  %16 "z" = elementwise.Neg (%15) # "neg"
  output %12
  output %16
}}"#
    );
    let model = model(&text);
    let len = n * c * h * w;
    let x = Tensor::from_f32(vec![n, c, h, w], floats(len, 9)).expect("x");
    let y = Tensor::from_f32(vec![n, c, h, w], floats(len, 11)).expect("y");
    let run = |opts: SessionOptions| {
        let s = Session::from_model_with(model.clone(), &opts).expect("compile");
        let out = s
            .run(HashMap::from([
                ("x".to_string(), Value::Tensor(x.clone())),
                ("y".to_string(), Value::Tensor(y.clone())),
            ]))
            .expect("run");
        let names = s.last_plan().expect("plan").kernel_names().to_vec();
        if opts.opt_level > 0 && opts.isa != Some(Isa::Portable) && smelt_kernels::jit::available()
        {
            assert!(
                names.iter().all(|k| k.starts_with("elementwise.jit.")),
                "{names:?}"
            );
        }
        out.iter()
            .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
            .collect::<Vec<_>>()
    };
    let reference = run(SessionOptions {
        opt_level: 0,
        ..Default::default()
    });
    for isa in Isa::supported() {
        for threads in [1, 2] {
            let got = run(SessionOptions {
                isa: Some(isa),
                threads,
                ..Default::default()
            });
            for (k, (g, r)) in got.iter().zip(&reference).enumerate() {
                for (i, (a, b)) in g.iter().zip(r).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-6 + 1e-5 * b.abs() || (a.is_nan() && b.is_nan()),
                        "{isa:?} t{threads} output {k} at {i}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
