use super::{check, unchanged};

const MEAN: &str =
    r#"reduce.ReduceMean {"axes":[-1],"keepdims":true,"noop_with_empty_axes":false}"#;

fn graph(body: &str, out: u32) -> String {
    let body = body.replace("MEAN", MEAN);
    format!(
        r#"graph "g" {{
  input %0 "x": f32[2,4]
  const %1 "two" = {{"dtype":"F32","shape":[],"data":{{"F32":[2.0]}}}}
  const %2 "eps" = {{"dtype":"F32","shape":[],"data":{{"F32":[0.00001]}}}}
  const %3 "gamma" = {{"dtype":"F32","shape":[4],"data":{{"F32":[1.0,2.0,3.0,4.0]}}}}
  const %4 "beta" = {{"dtype":"F32","shape":[4],"data":{{"F32":[0.1,0.2,0.3,0.4]}}}}
  const %5 "axes" = {{"dtype":"I64","shape":[1],"data":{{"I64":[1]}}}}
{body}
  output %{out}
}}"#
    )
}

#[test]
fn full_decomposition_with_gamma_and_beta() {
    check(
        &graph(
            r#"  %6 "mean" = MEAN (%0) # "ln/ReduceMean"
  %7 "d" = elementwise.Sub (%0, %6) # "ln/Sub"
  %8 "sq" = elementwise.Pow (%7, %1) # "ln/Pow"
  %9 "var" = MEAN (%8) # "ln/ReduceMean_1"
  %10 "ve" = elementwise.Add (%9, %2) # "ln/Add"
  %11 "std" = elementwise.Sqrt (%10) # "ln/Sqrt"
  %12 "n" = elementwise.Div (%7, %11) # "ln/Div"
  %13 "g" = elementwise.Mul (%12, %3) # "ln/Mul"
  %14 "y" = elementwise.Add (%13, %4) # "ln/Add_1""#,
            14,
        ),
        &graph(
            r#"  %14 "y" = nn.LayerNormalization {"axis":-1,"epsilon":0.00001,"stash_type":"F32"} (%0, %3, %4) # "ln/Add_1""#,
            14,
        ),
    );
}

#[test]
fn self_product_reciprocal_axes_input_and_no_affine_get_a_ones_scale() {
    let mean_input =
        r#"reduce.ReduceMean {"axes":null,"keepdims":true,"noop_with_empty_axes":false}"#;
    let mut expected = graph(
        r#"  %12 "n" = nn.LayerNormalization {"axis":-1,"epsilon":0.00001,"stash_type":"F32"} (%0, %16, _) # "ln/Mul_1""#,
        12,
    );
    expected = expected.replace(
        "[1]}}\n",
        "[1]}}\n  const %16 \"ln/Mul_1/ones_scale\" = {\"dtype\":\"F32\",\"shape\":[4],\"data\":{\"F32\":[1.0,1.0,1.0,1.0]}}\n",
    );
    check(
        &graph(
            &format!(
                r#"  %6 "mean" = {mean_input} (%0, %5) # "ln/ReduceMean"
  %7 "d" = elementwise.Sub (%0, %6) # "ln/Sub"
  %8 "sq" = elementwise.Mul (%7, %7) # "ln/Mul"
  %9 "var" = {mean_input} (%8, %5) # "ln/ReduceMean_1"
  %10 "ve" = elementwise.Add (%2, %9) # "ln/Add"
  %11 "std" = elementwise.Sqrt (%10) # "ln/Sqrt"
  %15 "r" = elementwise.Reciprocal (%11) # "ln/Reciprocal"
  %12 "n" = elementwise.Mul (%15, %7) # "ln/Mul_1""#
            ),
            12,
        ),
        &expected,
    );
}

const CORE: &str = r#"  %6 "mean" = MEAN (%0) # "ln/ReduceMean"
  %7 "d" = elementwise.Sub (%0, %6) # "ln/Sub"
  %8 "sq" = elementwise.Pow (%7, %1) # "ln/Pow"
  %9 "var" = MEAN (%8) # "ln/ReduceMean_1"
  %10 "ve" = elementwise.Add (%9, %2) # "ln/Add"
  %11 "std" = elementwise.Sqrt (%10) # "ln/Sqrt"
  %12 "n" = elementwise.Div (%7, %11) # "ln/Div"
  %13 "g" = elementwise.Mul (%12, %3) # "ln/Mul""#;

#[test]
fn variance_read_elsewhere_is_left_alone() {
    unchanged(&graph(&format!("{CORE}\n  output %9"), 13));
}

#[test]
fn wrong_axis_or_exponent_is_left_alone() {
    let axis0 = CORE.replacen(
        "MEAN (%0)",
        r#"reduce.ReduceMean {"axes":[0],"keepdims":true,"noop_with_empty_axes":false} (%0)"#,
        1,
    );
    unchanged(&graph(&axis0, 13));
    let cube = graph(CORE, 13).replace("[2.0]", "[3.0]");
    unchanged(&cube);
}

#[test]
fn missing_gamma_with_unknown_width_is_left_alone() {
    let core = CORE.replace("\n  %13 \"g\" = elementwise.Mul (%12, %3) # \"ln/Mul\"", "");
    unchanged(
        &graph(&core, 12)
            .replace("f32[2,4]", "f32[2,*]")
            .replace("\"x\": f32[2,*]", "\"x\""),
    );
}
