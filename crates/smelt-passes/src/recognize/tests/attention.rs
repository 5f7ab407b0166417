use super::{check, unchanged};

/// q [B,H,S,D], k as [B,S,H,D] (transposed to [B,H,D,S] like BERT exports), v, a mask.
fn bert(mask_ty: &str, kt_ty: &str, extra: &str) -> String {
    format!(
        r#"graph "g" {{
  input %0 "q": f32[1,2,3,4]
  input %1 "k": f32[1,3,2,4]
  input %2 "v": f32[1,2,3,4]
  input %3 "mask": {mask_ty}
  const %4 "sqrt_d" = {{"dtype":"F32","shape":[],"data":{{"F32":[2.0]}}}}
  %5 "kt"{kt_ty} = layout.Transpose {{"perm":[0,2,3,1]}} (%1) # "self/Transpose_2"
  %6 "qk" = nn.MatMul (%0, %5) # "self/MatMul"
  %7 "z" = elementwise.Div (%6, %4) # "self/Div"
  %8 "s" = elementwise.Add (%7, %3) # "self/Add"
  %9 "p" = reduce.Softmax {{"axis":-1,"coerce_2d":false}} (%8) # "self/Softmax"
  %10 "y" = nn.MatMul (%9, %2) # "self/MatMul_1"{extra}
  output %10
}}"#
    )
}

const ATTENTION: &str = r#"nn.Attention {"is_causal":false,"kv_num_heads":null,"left_window_size":-1,"q_num_heads":null,"qk_matmul_output_mode":0,"right_window_size":-1,"scale":SCALE,"softcap":0.0,"softmax_precision":null}"#;

fn attention(scale: &str) -> String {
    ATTENTION.replace("SCALE", scale)
}

#[test]
fn bert_block_with_padding_mask() {
    check(
        &bert("f32[1,1,1,3]", "", ""),
        &format!(
            r#"graph "g" {{
  input %0 "q": f32[1,2,3,4]
  input %1 "k": f32[1,3,2,4]
  input %2 "v": f32[1,2,3,4]
  input %3 "mask": f32[1,1,1,3]
  const %4 "sqrt_d" = {{"dtype":"F32","shape":[],"data":{{"F32":[2.0]}}}}
  %11 "self/MatMul_1/key_transpose": f32[1,2,3,4] = layout.Transpose {{"perm":[0,2,1,3]}} (%1) # "self/MatMul_1/key_transpose"
  %10 "y" = {} (%0, %11, %2, %3) # "self/MatMul_1"
  output %10
}}"#,
            attention("0.5")
        ),
    );
}

#[test]
fn head_major_key_and_multiplied_scale_without_mask() {
    check(
        r#"graph "g" {
  input %0 "q": f32[2,2,3,4]
  input %1 "k": f32[2,2,5,4]
  input %2 "v": f32[2,2,5,6]
  const %3 "c" = {"dtype":"F32","shape":[],"data":{"F32":[0.25]}}
  %4 "kt" = layout.Transpose {"perm":[0,1,3,2]} (%1) # "kt"
  %5 "qk" = nn.MatMul (%0, %4) # "qk"
  %6 "z" = elementwise.Mul (%3, %5) # "scale"
  %7 "p" = reduce.Softmax {"axis":3,"coerce_2d":false} (%6) # "softmax"
  %8 "y" = nn.MatMul (%7, %2) # "pv"
  output %8
}"#,
        &format!(
            r#"graph "g" {{
  input %0 "q": f32[2,2,3,4]
  input %1 "k": f32[2,2,5,4]
  input %2 "v": f32[2,2,5,6]
  const %3 "c" = {{"dtype":"F32","shape":[],"data":{{"F32":[0.25]}}}}
  %8 "y" = {} (%0, %1, %2) # "pv"
  output %8
}}"#,
            attention("0.25")
        ),
    );
}

/// The op names of `text`'s nodes after the pass.
fn ops_after(text: &str) -> Vec<&'static str> {
    let mut g = smelt_ir::text::parse_graph(text).expect("parse");
    crate::Pass::run(
        &super::super::RecognizeComposites,
        &mut g,
        &super::no_eval(),
    )
    .expect("pass");
    g.nodes.iter().map(|n| n.op.name()).collect()
}

#[test]
fn symbolic_mask_width_is_matched_against_the_key_length() {
    let typed = bert("f32[1,1,1,s]", ": f32[1,2,4,s]", "")
        .replace("\"k\": f32[1,3,2,4]", "\"k\": f32[1,s,2,4]")
        .replace("\"v\": f32[1,2,3,4]", "\"v\": f32[1,2,s,4]");
    assert_eq!(ops_after(&typed), ["Transpose", "Attention"]);
    // Nothing ties this mask's width to the keys': it is expanded to their length.
    assert_eq!(
        ops_after(&bert("f32[1,1,1,s]", "", "")),
        ["Transpose", "Shape", "Expand", "Attention"]
    );
}

#[test]
fn mask_broadcast_over_keys_is_expanded_first() {
    // The Attention op pads a narrow mask with -inf instead of broadcasting it.
    check(
        &bert("f32[1,1,1,1]", "", ""),
        &format!(
            r#"graph "g" {{
  input %0 "q": f32[1,2,3,4]
  input %1 "k": f32[1,3,2,4]
  input %2 "v": f32[1,2,3,4]
  input %3 "mask": f32[1,1,1,1]
  const %4 "sqrt_d" = {{"dtype":"F32","shape":[],"data":{{"F32":[2.0]}}}}
  %11 "self/MatMul_1/key_transpose": f32[1,2,3,4] = layout.Transpose {{"perm":[0,2,1,3]}} (%1) # "self/MatMul_1/key_transpose"
  %12 "self/MatMul_1/key_length" = layout.Shape {{"end":2,"start":1}} (%1) # "self/MatMul_1/key_length"
  %13 "self/MatMul_1/mask_expand" = layout.Expand (%3, %12) # "self/MatMul_1/mask_expand"
  %10 "y" = {} (%0, %11, %2, %13) # "self/MatMul_1"
  output %10
}}"#,
            attention("0.5")
        ),
    );
}

#[test]
fn probabilities_read_elsewhere_are_left_alone() {
    let g = bert("f32[1,1,1,3]", "", "").replace("  output %10", "  output %10, %9");
    unchanged(&g);
}

#[test]
fn three_dimensional_products_are_left_alone() {
    unchanged(
        r#"graph "g" {
  input %0 "q": f32[2,3,4]
  input %1 "kt": f32[2,4,3]
  input %2 "v": f32[2,3,4]
  %3 "qk" = nn.MatMul (%0, %1) # "qk"
  %4 "p" = reduce.Softmax {"axis":-1,"coerce_2d":false} (%3) # "softmax"
  %5 "y" = nn.MatMul (%4, %2) # "pv"
  output %5
}"#,
    );
}
