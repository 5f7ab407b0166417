use super::{check, unchanged};

const CONSTS: &str = r#"  input %0 "x": f32[2,3]
  const %1 "sqrt2" = {"dtype":"F32","shape":[],"data":{"F32":[1.4142135]}}
  const %2 "one" = {"dtype":"F32","shape":[],"data":{"F32":[1.0]}}
  const %3 "half" = {"dtype":"F32","shape":[],"data":{"F32":[0.5]}}
  const %4 "rsqrt2" = {"dtype":"F32","shape":[1],"data":{"F32":[0.70710677]}}"#;

fn graph(body: &str, out: u32) -> String {
    format!("graph \"g\" {{\n{CONSTS}\n{body}\n  output %{out}\n}}")
}

fn gelu(name: &str) -> String {
    graph(
        &format!(r#"  %9 "y" = elementwise.Gelu {{"approximate":"None"}} (%0) # "{name}""#),
        9,
    )
}

#[test]
fn erf_form_with_half_last() {
    // The order torch.onnx emits for nn.GELU (BERT, MiniLM).
    check(
        &graph(
            r#"  %5 "u" = elementwise.Div (%0, %1) # "div"
  %6 "e" = elementwise.Erf (%5) # "erf"
  %7 "p" = elementwise.Add (%6, %2) # "add"
  %8 "m" = elementwise.Mul (%0, %7) # "mul"
  %9 "y" = elementwise.Mul (%8, %3) # "mul_1""#,
            9,
        ),
        &gelu("mul_1"),
    );
}

#[test]
fn erf_form_with_half_first_and_reciprocal_constant() {
    check(
        &graph(
            r#"  %5 "u" = elementwise.Mul (%4, %0) # "mul_r"
  %6 "e" = elementwise.Erf (%5) # "erf"
  %7 "p" = elementwise.Add (%2, %6) # "add"
  %8 "h" = elementwise.Mul (%3, %0) # "half_x"
  %9 "y" = elementwise.Mul (%8, %7) # "gelu_out""#,
            9,
        ),
        &gelu("gelu_out"),
    );
}

#[test]
fn erf_form_with_half_on_the_bracket() {
    check(
        &graph(
            r#"  %5 "u" = elementwise.Div (%0, %1) # "div"
  %6 "e" = elementwise.Erf (%5) # "erf"
  %7 "p" = elementwise.Add (%6, %2) # "add"
  %8 "h" = elementwise.Mul (%7, %3) # "half_p"
  %9 "y" = elementwise.Mul (%0, %8) # "out""#,
            9,
        ),
        &gelu("out"),
    );
}

const TANH_CONSTS: &str = r#"  input %0 "x": f32[4]
  const %1 "c" = {"dtype":"F32","shape":[],"data":{"F32":[0.7978846]}}
  const %2 "k" = {"dtype":"F32","shape":[],"data":{"F32":[0.044715]}}
  const %3 "three" = {"dtype":"F32","shape":[],"data":{"F32":[3.0]}}
  const %4 "one" = {"dtype":"F32","shape":[],"data":{"F32":[1.0]}}
  const %5 "half" = {"dtype":"F32","shape":[],"data":{"F32":[0.5]}}"#;

fn tanh_graph(body: &str, out: u32) -> String {
    format!("graph \"g\" {{\n{TANH_CONSTS}\n{body}\n  output %{out}\n}}")
}

#[test]
fn tanh_form_with_pow() {
    check(
        &tanh_graph(
            r#"  %6 "x3" = elementwise.Pow (%0, %3) # "pow"
  %7 "kx3" = elementwise.Mul (%2, %6) # "mul_k"
  %8 "s" = elementwise.Add (%0, %7) # "add_x"
  %9 "t" = elementwise.Mul (%1, %8) # "mul_c"
  %10 "th" = elementwise.Tanh (%9) # "tanh"
  %11 "p" = elementwise.Add (%10, %4) # "add_1"
  %12 "hx" = elementwise.Mul (%5, %0) # "mul_half"
  %13 "y" = elementwise.Mul (%12, %11) # "gelu""#,
            13,
        ),
        &tanh_graph(
            r#"  %13 "y" = elementwise.Gelu {"approximate":"Tanh"} (%0) # "gelu""#,
            13,
        ),
    );
}

#[test]
fn tanh_form_with_cube_as_products() {
    check(
        &tanh_graph(
            r#"  %6 "xx" = elementwise.Mul (%0, %0) # "sq"
  %7 "x3" = elementwise.Mul (%6, %0) # "cube"
  %8 "kx3" = elementwise.Mul (%7, %2) # "mul_k"
  %9 "s" = elementwise.Add (%8, %0) # "add_x"
  %10 "t" = elementwise.Mul (%9, %1) # "mul_c"
  %11 "th" = elementwise.Tanh (%10) # "tanh"
  %12 "p" = elementwise.Add (%4, %11) # "add_1"
  %13 "m" = elementwise.Mul (%0, %12) # "mul_x"
  %14 "y" = elementwise.Mul (%13, %5) # "gelu""#,
            14,
        ),
        &tanh_graph(
            r#"  %14 "y" = elementwise.Gelu {"approximate":"Tanh"} (%0) # "gelu""#,
            14,
        ),
    );
}

#[test]
fn intermediate_read_elsewhere_is_left_alone() {
    unchanged(&graph(
        r#"  %5 "u" = elementwise.Div (%0, %1) # "div"
  %6 "e" = elementwise.Erf (%5) # "erf"
  %7 "p" = elementwise.Add (%6, %2) # "add"
  %8 "m" = elementwise.Mul (%0, %7) # "mul"
  %9 "y" = elementwise.Mul (%8, %3) # "mul_1"
  %10 "z" = elementwise.Relu (%6) # "other_user"
  output %10"#,
        9,
    ));
}

#[test]
fn graph_output_intermediate_is_left_alone() {
    unchanged(&graph(
        r#"  %5 "u" = elementwise.Div (%0, %1) # "div"
  %6 "e" = elementwise.Erf (%5) # "erf"
  %7 "p" = elementwise.Add (%6, %2) # "add"
  %8 "m" = elementwise.Mul (%0, %7) # "mul"
  %9 "y" = elementwise.Mul (%8, %3) # "mul_1"
  output %7"#,
        9,
    ));
}

#[test]
fn wrong_constant_is_left_alone() {
    // Dividing by 1.5 instead of sqrt 2.
    unchanged(
        &graph(
            r#"  %5 "u" = elementwise.Div (%0, %2) # "div"
  %6 "e" = elementwise.Erf (%5) # "erf"
  %7 "p" = elementwise.Add (%6, %2) # "add"
  %8 "m" = elementwise.Mul (%0, %7) # "mul"
  %9 "y" = elementwise.Mul (%8, %3) # "mul_1""#,
            9,
        )
        .replace("[1.0]}}\n  const %3", "[1.5]}}\n  const %3"),
    );
}

#[test]
fn integer_input_is_left_alone() {
    unchanged(
        &graph(
            r#"  %5 "u" = elementwise.Div (%0, %1) # "div"
  %6 "e" = elementwise.Erf (%5) # "erf"
  %7 "p" = elementwise.Add (%6, %2) # "add"
  %8 "m" = elementwise.Mul (%0, %7) # "mul"
  %9 "y" = elementwise.Mul (%8, %3) # "mul_1""#,
            9,
        )
        .replace("f32[2,3]", "i32[2,3]"),
    );
}
