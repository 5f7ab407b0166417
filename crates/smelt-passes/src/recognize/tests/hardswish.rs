use super::{check, unchanged};

const CONSTS: &str = r#"  input %0 "x": f32[1,2,3,3]
  const %1 "three" = {"dtype":"F32","shape":[],"data":{"F32":[3.0]}}
  const %2 "zero" = {"dtype":"F32","shape":[],"data":{"F32":[0.0]}}
  const %3 "six" = {"dtype":"F32","shape":[],"data":{"F32":[6.0]}}
  const %4 "sixth" = {"dtype":"F32","shape":[],"data":{"F32":[0.16666667]}}"#;

fn graph(body: &str, out: u32) -> String {
    format!("graph \"g\" {{\n{CONSTS}\n{body}\n  output %{out}\n}}")
}

fn hardswish(out: u32, name: &str) -> String {
    graph(
        &format!(r#"  %{out} "y" = elementwise.HardSwish (%0) # "{name}""#),
        out,
    )
}

#[test]
fn clip_form_divided_last_as_paddle_exports_it() {
    check(
        &graph(
            r#"  %5 "a" = elementwise.Add (%0, %1) # "p2o.Add.4"
  %6 "c" = elementwise.Clip {"max":null,"min":null} (%5, %2, %3) # "p2o.Clip.0"
  %7 "m" = elementwise.Mul (%0, %6) # "p2o.Mul.2"
  %8 "y" = elementwise.Div (%7, %3) # "p2o.Div.0""#,
            8,
        ),
        &hardswish(8, "p2o.Div.0"),
    );
}

#[test]
fn clip_form_scaled_first_with_attribute_bounds() {
    check(
        &graph(
            r#"  %5 "a" = elementwise.Add (%1, %0) # "add"
  %6 "c" = elementwise.Clip {"max":6.0,"min":0.0} (%5) # "clip"
  %7 "g" = elementwise.Mul (%6, %4) # "scale"
  %8 "y" = elementwise.Mul (%7, %0) # "hswish""#,
            8,
        ),
        &hardswish(8, "hswish"),
    );
}

#[test]
fn clip_form_divided_gate() {
    check(
        &graph(
            r#"  %5 "a" = elementwise.Add (%0, %1) # "add"
  %6 "c" = elementwise.Clip {"max":null,"min":null} (%5, %2, %3) # "clip"
  %7 "g" = elementwise.Div (%6, %3) # "div"
  %8 "y" = elementwise.Mul (%0, %7) # "hswish""#,
            8,
        ),
        &hardswish(8, "hswish"),
    );
}

#[test]
fn hardsigmoid_form() {
    check(
        &graph(
            r#"  %5 "h" = elementwise.HardSigmoid {"alpha":0.16666667,"beta":0.5} (%0) # "hsig"
  %6 "y" = elementwise.Mul (%0, %5) # "hswish""#,
            6,
        ),
        &hardswish(6, "hswish"),
    );
}

#[test]
fn wrong_constants_are_left_alone() {
    // HardSigmoid with the ONNX default alpha 0.2; Clip to 5 instead of 6.
    unchanged(&graph(
        r#"  %5 "h" = elementwise.HardSigmoid {"alpha":0.2,"beta":0.5} (%0) # "hsig"
  %6 "y" = elementwise.Mul (%0, %5) # "gate"
  %7 "a" = elementwise.Add (%0, %1) # "add"
  %8 "c" = elementwise.Clip {"max":5.0,"min":0.0} (%7) # "clip"
  %9 "m" = elementwise.Mul (%0, %8) # "mul"
  %10 "z" = elementwise.Div (%9, %3) # "div"
  output %6"#,
        10,
    ));
}

#[test]
fn product_read_elsewhere_is_left_alone() {
    unchanged(&graph(
        r#"  %5 "a" = elementwise.Add (%0, %1) # "add"
  %6 "c" = elementwise.Clip {"max":null,"min":null} (%5, %2, %3) # "clip"
  %7 "m" = elementwise.Mul (%0, %6) # "mul"
  %8 "y" = elementwise.Div (%7, %3) # "div"
  output %7"#,
        8,
    ));
}
