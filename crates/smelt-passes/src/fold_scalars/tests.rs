//! Golden IR tests for the scalar and bias folding pass.

use super::*;
use crate::manager::tests::{golden, no_eval};

fn check(input: &str, expected: &str) {
    golden(&FoldScalars, &no_eval(), input, expected);
}

/// A graph the pass must leave as it is.
fn unchanged(input: &str) {
    check(input, input);
}

#[test]
fn mul_chain_merges_with_broadcast_constants() {
    check(
        r#"graph "g" {
  input %0 "x": f32[2,3]
  const %1 "a" = {"dtype":"F32","shape":[3],"data":{"F32":[1.0,2.0,3.0]}}
  const %2 "b" = {"dtype":"F32","shape":[],"data":{"F32":[4.0]}}
  %3 "t": f32[2,3] = elementwise.Mul (%0, %1) # "m1"
  %4 "y": f32[2,3] = elementwise.Mul (%2, %3) # "m2"
  output %4
}"#,
        r#"graph "g" {
  input %0 "x": f32[2,3]
  const %1 "a" = {"dtype":"F32","shape":[3],"data":{"F32":[1.0,2.0,3.0]}}
  const %2 "b" = {"dtype":"F32","shape":[],"data":{"F32":[4.0]}}
  const %5 "m2_folded" = {"dtype":"F32","shape":[3],"data":{"F32":[4.0,8.0,12.0]}}
  %4 "y": f32[2,3] = elementwise.Mul (%0, %5) # "m2"
  output %4
}"#,
    );
}

#[test]
fn add_and_sub_chain_merges_into_one_add() {
    // ((x - 1) + 4) - 0.5 = x + 2.5
    check(
        r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "one" = {"dtype":"F32","shape":[1],"data":{"F32":[1.0]}}
  const %2 "four" = {"dtype":"F32","shape":[1],"data":{"F32":[4.0]}}
  const %3 "half" = {"dtype":"F32","shape":[1],"data":{"F32":[0.5]}}
  %4 "a": f32[2] = elementwise.Sub (%0, %1) # "s1"
  %5 "b": f32[2] = elementwise.Add (%4, %2) # "a1"
  %6 "y": f32[2] = elementwise.Sub (%5, %3) # "s2"
  output %6
}"#,
        r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "one" = {"dtype":"F32","shape":[1],"data":{"F32":[1.0]}}
  const %2 "four" = {"dtype":"F32","shape":[1],"data":{"F32":[4.0]}}
  const %3 "half" = {"dtype":"F32","shape":[1],"data":{"F32":[0.5]}}
  const %7 "a1_folded" = {"dtype":"F32","shape":[1],"data":{"F32":[3.0]}}
  const %8 "s2_folded" = {"dtype":"F32","shape":[1],"data":{"F32":[2.5]}}
  %6 "y": f32[2] = elementwise.Add (%0, %8) # "s2"
  output %6
}"#,
    );
}

#[test]
fn div_by_power_of_two_becomes_mul_and_merges_other_div_stays() {
    // (x / 4) * 3 = x * 0.75; x / 3 stays a Div; x / 0.5 becomes x * 2.
    check(
        r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "four" = {"dtype":"F32","shape":[],"data":{"F32":[4.0]}}
  const %2 "three" = {"dtype":"F32","shape":[],"data":{"F32":[3.0]}}
  const %3 "half" = {"dtype":"F32","shape":[],"data":{"F32":[0.5]}}
  %4 "a": f32[2] = elementwise.Div (%0, %1) # "d4"
  %5 "b": f32[2] = elementwise.Mul (%4, %2) # "m3"
  %6 "c": f32[2] = elementwise.Div (%5, %2) # "d3"
  %7 "y": f32[2] = elementwise.Div (%6, %3) # "dhalf"
  output %7
}"#,
        r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "four" = {"dtype":"F32","shape":[],"data":{"F32":[4.0]}}
  const %2 "three" = {"dtype":"F32","shape":[],"data":{"F32":[3.0]}}
  const %3 "half" = {"dtype":"F32","shape":[],"data":{"F32":[0.5]}}
  const %8 "d4_reciprocal" = {"dtype":"F32","shape":[],"data":{"F32":[0.25]}}
  const %9 "m3_folded" = {"dtype":"F32","shape":[],"data":{"F32":[0.75]}}
  const %10 "dhalf_reciprocal" = {"dtype":"F32","shape":[],"data":{"F32":[2.0]}}
  %5 "b": f32[2] = elementwise.Mul (%0, %9) # "m3"
  %6 "c": f32[2] = elementwise.Div (%5, %2) # "d3"
  %7 "y": f32[2] = elementwise.Mul (%6, %10) # "dhalf"
  output %7
}"#,
    );
}

#[test]
fn unit_steps_are_removed() {
    // (x * 2) * 0.5 merges to x * 1, which goes; x + 0 and x - 0 go; x / 1 goes.
    check(
        r#"graph "g" {
  input %0 "x": f32[b,2]
  const %1 "two" = {"dtype":"F32","shape":[],"data":{"F32":[2.0]}}
  const %2 "half" = {"dtype":"F32","shape":[1],"data":{"F32":[0.5]}}
  const %3 "zero" = {"dtype":"F32","shape":[2],"data":{"F32":[0.0,0.0]}}
  const %4 "one" = {"dtype":"F32","shape":[],"data":{"F32":[1.0]}}
  %5 "a": f32[b,2] = elementwise.Mul (%0, %1) # "m2"
  %6 "b": f32[b,2] = elementwise.Mul (%5, %2) # "mhalf"
  %7 "c": f32[b,2] = elementwise.Add (%3, %6) # "add0"
  %8 "d": f32[b,2] = elementwise.Relu (%7) # "relu"
  %9 "e": f32[b,2] = elementwise.Sub (%8, %3) # "sub0"
  %10 "f": f32[b,2] = elementwise.Div (%9, %4) # "div1"
  %11 "y": f32[b,2] = elementwise.Relu (%10) # "relu2"
  output %11
}"#,
        r#"graph "g" {
  input %0 "x": f32[b,2]
  const %1 "two" = {"dtype":"F32","shape":[],"data":{"F32":[2.0]}}
  const %2 "half" = {"dtype":"F32","shape":[1],"data":{"F32":[0.5]}}
  const %3 "zero" = {"dtype":"F32","shape":[2],"data":{"F32":[0.0,0.0]}}
  const %4 "one" = {"dtype":"F32","shape":[],"data":{"F32":[1.0]}}
  const %12 "mhalf_folded" = {"dtype":"F32","shape":[1],"data":{"F32":[1.0]}}
  %8 "d": f32[b,2] = elementwise.Relu (%0) # "relu"
  %11 "y": f32[b,2] = elementwise.Relu (%8) # "relu2"
  output %11
}"#,
    );
}

#[test]
fn matmul_biases_merge() {
    check(
        r#"graph "g" {
  input %0 "x": f32[b,2]
  const %1 "w" = {"dtype":"F32","shape":[2,2],"data":{"F32":[1.0,2.0,3.0,4.0]}}
  const %2 "b1" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,2.0]}}
  const %3 "b2" = {"dtype":"F32","shape":[1,2],"data":{"F32":[10.0,20.0]}}
  %4 "m": f32[b,2] = nn.MatMul (%0, %1) # "matmul"
  %5 "a": f32[b,2] = elementwise.Add (%4, %2) # "bias1"
  %6 "y": f32[b,2] = elementwise.Add (%5, %3) # "bias2"
  output %6
}"#,
        r#"graph "g" {
  input %0 "x": f32[b,2]
  const %1 "w" = {"dtype":"F32","shape":[2,2],"data":{"F32":[1.0,2.0,3.0,4.0]}}
  const %2 "b1" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,2.0]}}
  const %3 "b2" = {"dtype":"F32","shape":[1,2],"data":{"F32":[10.0,20.0]}}
  const %7 "bias2_folded" = {"dtype":"F32","shape":[1,2],"data":{"F32":[11.0,22.0]}}
  %4 "m": f32[b,2] = nn.MatMul (%0, %1) # "matmul"
  %6 "y": f32[b,2] = elementwise.Add (%4, %7) # "bias2"
  output %6
}"#,
    );
}

const CONV: &str = r#"nn.Conv {"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[],"strides":[]}"#;

#[test]
fn per_channel_add_and_mul_fold_into_conv() {
    // Conv(x, W = [1, 2], b = [1, 1]) + [1, 2]^T, then * [3, 4]^T (as [C,1,1]).
    let head = r#"  input %0 "x": f32[1,1,2,2]
  const %1 "w" = {"dtype":"F32","shape":[2,1,1,1],"data":{"F32":[1.0,2.0]}}
  const %2 "b" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,1.0]}}
  const %3 "c" = {"dtype":"F32","shape":[1,2,1,1],"data":{"F32":[1.0,2.0]}}
  const %4 "s" = {"dtype":"F32","shape":[2,1,1],"data":{"F32":[3.0,4.0]}}"#;
    check(
        &format!(
            r#"graph "g" {{
{head}
  %5 "v": f32[1,2,2,2] = {CONV} (%0, %1, %2) # "conv"
  %6 "a": f32[1,2,2,2] = elementwise.Add (%5, %3) # "add"
  %7 "y": f32[1,2,2,2] = elementwise.Mul (%6, %4) # "mul"
  output %7
}}"#
        ),
        &format!(
            r#"graph "g" {{
{head}
  const %8 "conv_folded_bias" = {{"dtype":"F32","shape":[2],"data":{{"F32":[2.0,3.0]}}}}
  const %9 "conv_scaled_weight" = {{"dtype":"F32","shape":[2,1,1,1],"data":{{"F32":[3.0,8.0]}}}}
  const %10 "conv_folded_bias" = {{"dtype":"F32","shape":[2],"data":{{"F32":[6.0,12.0]}}}}
  %7 "y": f32[1,2,2,2] = {CONV} (%0, %9, %10) # "conv"
  output %7
}}"#
        ),
    );
}

#[test]
fn conv_add_that_is_not_per_channel_stays() {
    unchanged(&format!(
        r#"graph "g" {{
  input %0 "x": f32[1,1,2,2]
  const %1 "w" = {{"dtype":"F32","shape":[2,1,1,1],"data":{{"F32":[1.0,2.0]}}}}
  const %2 "c" = {{"dtype":"F32","shape":[2,1],"data":{{"F32":[1.0,2.0]}}}}
  %3 "v": f32[1,2,2,2] = {CONV} (%0, %1) # "conv"
  %4 "y": f32[1,2,2,2] = elementwise.Add (%3, %2) # "add"
  output %4
}}"#
    ));
}

#[test]
fn intermediate_with_a_second_use_stays() {
    unchanged(
        r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "two" = {"dtype":"F32","shape":[],"data":{"F32":[2.0]}}
  %2 "t": f32[2] = elementwise.Mul (%0, %1) # "m1"
  %3 "u": f32[2] = elementwise.Mul (%2, %1) # "m2"
  %4 "r": f32[2] = elementwise.Relu (%2) # "relu"
  %5 "y": f32[2] = elementwise.Add (%3, %4) # "sum"
  output %5
}"#,
    );
}

#[test]
fn intermediate_graph_output_stays() {
    unchanged(
        r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "two" = {"dtype":"F32","shape":[],"data":{"F32":[2.0]}}
  const %2 "zero" = {"dtype":"F32","shape":[],"data":{"F32":[0.0]}}
  %3 "t": f32[2] = elementwise.Mul (%0, %1) # "m1"
  %4 "u": f32[2] = elementwise.Mul (%3, %1) # "m2"
  %5 "y": f32[2] = elementwise.Add (%4, %2) # "add0"
  output %3, %5
}"#,
    );
}

#[test]
fn integer_chains_stay() {
    unchanged(
        r#"graph "g" {
  input %0 "x": i64[2]
  const %1 "two" = {"dtype":"I64","shape":[],"data":{"I64":[2]}}
  const %2 "one" = {"dtype":"I64","shape":[],"data":{"I64":[1]}}
  %3 "t": i64[2] = elementwise.Mul (%0, %1) # "m1"
  %4 "u": i64[2] = elementwise.Mul (%3, %1) # "m2"
  %5 "v": i64[2] = elementwise.Div (%4, %1) # "d2"
  %6 "y": i64[2] = elementwise.Mul (%5, %2) # "m_one"
  output %6
}"#,
    );
}

#[test]
fn unit_step_that_broadcasts_to_a_larger_shape_stays() {
    unchanged(
        r#"graph "g" {
  input %0 "x": f32[3]
  const %1 "ones" = {"dtype":"F32","shape":[2,3],"data":{"F32":[1.0,1.0,1.0,1.0,1.0,1.0]}}
  %2 "t": f32[2,3] = elementwise.Mul (%0, %1) # "grow"
  %3 "y": f32[2,3] = elementwise.Relu (%2) # "relu"
  output %3
}"#,
    );
}

/// In a subgraph the types are the model's unconfirmed word: `x + 0` declared to keep x's
/// shape broadcasts x to [3,4] at run time, so it must stay.
#[test]
fn subgraphs_are_left_alone() {
    unchanged(
        r#"graph "g" {
  input %0 "c": bool[]
  input %1 "x": f32[1,4]
  %2 "y": f32[1,4] = control.If {"else_branch":"$graph0","then_branch":"$graph1"} (%0) # "if"
    graph "else" {
      capture %0 "x": f32[1,4] <- %1
      output %0
    }
    graph "then" {
      const %1 "zero" = {"dtype":"F32","shape":[3,4],"data":{"F32":[0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0]}}
      capture %0 "x": f32[1,4] <- %1
      %2 "t": f32[1,4] = elementwise.Add (%0, %1) # "add0"
      %3 "u": f32[1,4] = elementwise.Relu (%2) # "relu"
      output %3
    }
  output %2
}"#,
    );
}

const CONV_T: &str = r#"nn.ConvTranspose {"auto_pad":"NotSet","dilations":[],"group":2,"kernel_shape":[],"output_padding":[],"output_shape":[],"pads":[],"strides":[]}"#;

#[test]
fn per_channel_add_folds_into_conv_transpose_bias_but_mul_stays() {
    // W is [C_in = 2, M / group = 1, 1, 1] with 2 groups: 2 output channels.
    let head = r#"  input %0 "x": f32[1,2,2,2]
  const %1 "w" = {"dtype":"F32","shape":[2,1,1,1],"data":{"F32":[1.0,2.0]}}
  const %2 "c" = {"dtype":"F32","shape":[2,1,1],"data":{"F32":[1.0,2.0]}}"#;
    check(
        &format!(
            r#"graph "g" {{
{head}
  %5 "v": f32[1,2,2,2] = {CONV_T} (%0, %1) # "deconv"
  %6 "y": f32[1,2,2,2] = elementwise.Add (%5, %2) # "add"
  output %6
}}"#
        ),
        &format!(
            r#"graph "g" {{
{head}
  const %7 "deconv_folded_bias" = {{"dtype":"F32","shape":[2],"data":{{"F32":[1.0,2.0]}}}}
  %6 "y": f32[1,2,2,2] = {CONV_T} (%0, %1, %7) # "deconv"
  output %6
}}"#
        ),
    );
    unchanged(&format!(
        r#"graph "g" {{
{head}
  %5 "v": f32[1,2,2,2] = {CONV_T} (%0, %1) # "deconv"
  %6 "y": f32[1,2,2,2] = elementwise.Mul (%5, %2) # "mul"
  output %6
}}"#
    ));
}
