//! Golden tests of shape inference.

use super::*;
use crate::manager::tests::{golden, no_eval};
use smelt_ir::text::{parse_graph, print_graph};

#[test]
fn broadcast_add_with_symbols() {
    golden(
        &InferShapes,
        &no_eval(),
        r#"graph "g" {
  input %0 "x": f32[batch,1,16]
  input %1 "y": f32[seq,1]
  input %2 "z": f32[n]
  input %3 "w": f32[k,1,1]
  %4 "a" = elementwise.Add (%0, %1) # "add"
  %5 "b" = elementwise.Less (%4, %2) # "less"
  %6 "c" = elementwise.Sum (%0, %3, %1) # "sum"
  output %4, %5, %6
}"#,
        r#"graph "g" {
  input %0 "x": f32[batch,1,16]
  input %1 "y": f32[seq,1]
  input %2 "z": f32[n]
  input %3 "w": f32[k,1,1]
  %4 "a": f32[batch,seq,16] = elementwise.Add (%0, %1) # "add"
  %5 "b": bool[batch,seq,16] = elementwise.Less (%4, %2) # "less"
  %6 "c": f32[{max(batch, k)},seq,16] = elementwise.Sum (%0, %3, %1) # "sum"
  output %4, %5, %6
}"#,
    );
}

#[test]
fn conv_and_pool_with_a_symbolic_height() {
    golden(
        &InferShapes,
        &no_eval(),
        r#"graph "g" {
  input %0 "x": f32[1,3,h,64]
  input %1 "w": f32[8,3,3,3]
  input %5 "w2": f32[8,8,3,3]
  %2 "a" = nn.Conv {"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[1,1,1,1],"strides":[2,2]} (%0, %1) # "conv"
  %3 "b" = nn.Conv {"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[1,1,1,1],"strides":[]} (%2, %5) # "same"
  %4 "c" = nn.MaxPool {"auto_pad":"SameUpper","ceil_mode":false,"dilations":[],"kernel_shape":[2,2],"pads":[],"storage_order":0,"strides":[2,2]} (%3) # "pool"
  output %4
}"#,
        r#"graph "g" {
  input %0 "x": f32[1,3,h,64]
  input %1 "w": f32[8,3,3,3]
  input %5 "w2": f32[8,8,3,3]
  %2 "a": f32[1,8,{floor((h - 1) / 2) + 1},32] = nn.Conv {"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[1,1,1,1],"strides":[2,2]} (%0, %1) # "conv"
  %3 "b": f32[1,8,{floor((h - 1) / 2) + 1},32] = nn.Conv {"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[1,1,1,1],"strides":[]} (%2, %5) # "same"
  %4 "c": f32[1,8,{ceil((floor((h - 1) / 2) + 1) / 2)},16] = nn.MaxPool {"auto_pad":"SameUpper","ceil_mode":false,"dilations":[],"kernel_shape":[2,2],"pads":[],"storage_order":0,"strides":[2,2]} (%3) # "pool"
  output %4
}"#,
    );
}

#[test]
fn reshape_with_minus_one_and_zero() {
    golden(
        &InferShapes,
        &no_eval(),
        r#"graph "g" {
  input %0 "x": f32[b,s,384]
  const %1 "heads" = {"dtype":"I64","shape":[4],"data":{"I64":[0,0,12,-1]}}
  const %2 "flat" = {"dtype":"I64","shape":[2],"data":{"I64":[-1,384]}}
  %3 "a" = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "split_heads"
  %4 "b" = layout.Reshape {"allowzero":false,"shape":null} (%0, %2) # "flatten"
  output %3, %4
}"#,
        r#"graph "g" {
  input %0 "x": f32[b,s,384]
  const %1 "heads" = {"dtype":"I64","shape":[4],"data":{"I64":[0,0,12,-1]}}
  const %2 "flat" = {"dtype":"I64","shape":[2],"data":{"I64":[-1,384]}}
  %3 "a": f32[b,s,12,32] = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "split_heads"
  %4 "b": f32[{b * s},384] = layout.Reshape {"allowzero":false,"shape":null} (%0, %2) # "flatten"
  output %3, %4
}"#,
    );
}

#[test]
fn known_dims_refine_declared_symbols_and_conflicts_are_errors() {
    let text = r#"graph "g" {
  input %0 "x": f32[2,3]
  %1 "y": f32[d0,3] = elementwise.Relu (%0) # "relu"
  output %1
}"#;
    let mut g = parse_graph(text).unwrap();
    assert!(infer_types(&mut g).unwrap());
    assert!(print_graph(&g).contains(r#"%1 "y": f32[2,3]"#));
    assert!(
        !infer_types(&mut g).unwrap(),
        "a second run changes nothing"
    );
    let bad = text.replace("f32[d0,3] =", "f32[5,3] =");
    let e = infer_types(&mut parse_graph(&bad).unwrap()).unwrap_err();
    assert!(e.to_string().contains("relu (Relu)"), "{e}");
}

#[test]
fn input_shapes_bind_symbols_everywhere() {
    let mut g = parse_graph(
        r#"graph "g" {
  input %0 "x": f32[batch,seq]
  %1 "y": f32[batch,{seq * 2}] = elementwise.Relu (%0) # "relu"
  output %1
}"#,
    )
    .unwrap();
    set_input_shapes(&mut g, &[("x".to_string(), vec![4, 8])]).unwrap();
    let text = print_graph(&g);
    assert!(text.contains(r#"input %0 "x": f32[4,8]"#), "{text}");
    assert!(text.contains(r#"%1 "y": f32[4,16]"#), "{text}");
    assert!(set_input_shapes(&mut g, &[("x".to_string(), vec![4])]).is_err());
    assert!(set_input_shapes(&mut g, &[("nope".to_string(), vec![4])])
        .unwrap_err()
        .to_string()
        .contains("nope"));
}

/// Runs the pass on a one-node graph around `node` (inputs %0 x: f32[2,3], %1 s: i64[2]
/// and the constants given) and returns the error.
fn invalid(consts: &str, node: &str) -> smelt_ir::Error {
    let text = format!(
        "graph \"g\" {{\n  input %0 \"x\": f32[2,3]\n  input %1 \"s\": i64[2]\n{consts}\n  %9 \"y\" = {node} # \"bad\"\n  output %9\n}}"
    );
    let mut g = parse_graph(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    InferShapes
        .run(&mut g, &no_eval())
        .expect_err(&format!("should be invalid: {node}"))
}

#[test]
fn invalid_nodes_are_errors_not_unknowns() {
    let c = |v: &str| {
        format!(
            "  const %2 \"c\" = {{\"dtype\":\"I64\",\"shape\":[{}],\"data\":{{\"I64\":[{v}]}}}}",
            v.split(',').count()
        )
    };
    let cases = [
        (
            c("-5,3"),
            "layout.Reshape {\"allowzero\":false,\"shape\":null} (%0, %2)",
            "-5",
        ),
        (
            c("-1,-1"),
            "layout.Reshape {\"allowzero\":false,\"shape\":null} (%0, %2)",
            "-1",
        ),
        (
            c("4,2"),
            "layout.Reshape {\"allowzero\":false,\"shape\":null} (%0, %2)",
            "6 elements",
        ),
        (
            c("-1,4"),
            "layout.Reshape {\"allowzero\":false,\"shape\":null} (%0, %2)",
            "6 elements",
        ),
        (
            c("0,0,0"),
            "layout.Reshape {\"allowzero\":false,\"shape\":null} (%0, %2)",
            "rank 2",
        ),
        (
            String::new(),
            "layout.Transpose {\"perm\":[0,2,1]} (%0)",
            "permutation",
        ),
        (
            String::new(),
            "layout.Transpose {\"perm\":[0,0]} (%0)",
            "permutation",
        ),
        (
            String::new(),
            "layout.Concat {\"axis\":2} (%0, %0)",
            "axis 2",
        ),
        (c("3,2"), "elementwise.Add (%0, %2)", "broadcast"),
        (
            String::new(),
            "layout.Squeeze {\"axes\":[0]} (%0)",
            "squeeze",
        ),
        (
            String::new(),
            "layout.Unsqueeze {\"axes\":[0,0]} (%0)",
            "repeat",
        ),
        (String::new(), "nn.MatMul (%0, %0)", "contracted"),
        (c("2,-3"), "layout.Expand (%0, %2)", "-3"),
        (
            c("1,1,1"),
            "layout.Tile {\"legacy_axis\":false} (%0, %2)",
            "repeats",
        ),
        (
            String::new(),
            "reduce.ArgMax {\"axis\":5,\"keepdims\":true,\"select_last_index\":false} (%0)",
            "axis 5",
        ),
    ];
    for (consts, node, needle) in cases {
        let e = invalid(&consts, node);
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidModel, "{node}: {e}");
        let text = e.to_string();
        assert!(text.contains("node bad ("), "{node}: {text}");
        assert!(
            text.contains(needle),
            "{node}: '{text}' should mention '{needle}'"
        );
    }
}

#[test]
fn declarations_inference_cannot_confirm_are_dropped_and_contradictions_fail() {
    // The target comes from an input: the output is unknown, whatever the model declares.
    let text = r#"graph "g" {
  input %0 "x": f32[2,3]
  input %1 "s": i64[2]
  %2 "r": f32[2,3] = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "reshape"
  %3 "y": f32[2,3] = elementwise.Relu (%2) # "relu"
  %4 "z": f32[2,3] = elementwise.Relu (%0) # "relu2"
  output %3, %4
}"#;
    let mut g = parse_graph(text).unwrap();
    assert!(InferShapes.run(&mut g, &no_eval()).unwrap());
    let out = print_graph(&g);
    assert!(
        out.contains(r#"%2 "r": f32[?,?] = layout.Reshape"#),
        "{out}"
    );
    assert!(
        out.contains(r#"%3 "y": f32[?,?] = elementwise.Relu"#),
        "{out}"
    );
    assert!(
        out.contains(r#"%4 "z": f32[2,3] = elementwise.Relu"#),
        "{out}"
    );
    // A declaration that contradicts inference is an error naming the node.
    for bad in [
        "f32[3,2] = elementwise.Relu (%0)",
        "f64[2,3] = elementwise.Relu (%0)",
        "f32[2] = elementwise.Relu (%0)",
    ] {
        let t = text.replace(r#"f32[2,3] = elementwise.Relu (%0)"#, bad);
        let e = InferShapes
            .run(&mut parse_graph(&t).unwrap(), &no_eval())
            .unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidModel, "{e}");
        assert!(e.to_string().contains("node relu2 (Relu)"), "{e}");
    }
}

#[test]
fn stft_irfft_and_feature_extractor_shapes() {
    golden(
        &InferShapes,
        &no_eval(),
        r#"graph "g" {
  input %0 "x": f32[b,64,1]
  input %1 "t": f32[3,10]
  input %2 "i": i64[1,4]
  input %8 "spec": f32[b,5,2]
  const %3 "step" = {"dtype":"I64","shape":[],"data":{"I64":[8]}}
  const %4 "len" = {"dtype":"I64","shape":[],"data":{"I64":[16]}}
  %5 "s" = misc.Stft {"onesided":true} (%0, %3, _, %4) # "stft"
  %6 "f" = misc.ArrayFeatureExtractor (%1, %2) # "afe"
  %7 "i" = misc.Dft {"axis":1,"inverse":true,"onesided":true} (%8) # "irfft"
  output %5, %6, %7
}"#,
        r#"graph "g" {
  input %0 "x": f32[b,64,1]
  input %1 "t": f32[3,10]
  input %2 "i": i64[1,4]
  input %8 "spec": f32[b,5,2]
  const %3 "step" = {"dtype":"I64","shape":[],"data":{"I64":[8]}}
  const %4 "len" = {"dtype":"I64","shape":[],"data":{"I64":[16]}}
  %5 "s": f32[b,7,9,2] = misc.Stft {"onesided":true} (%0, %3, _, %4) # "stft"
  %6 "f": f32[3,4] = misc.ArrayFeatureExtractor (%1, %2) # "afe"
  %7 "i": f32[b,8,1] = misc.Dft {"axis":1,"inverse":true,"onesided":true} (%8) # "irfft"
  output %5, %6, %7
}"#,
    );
}

#[test]
fn shape_operands_lists_every_value_a_shape_waits_on() {
    // Slice's starts, ends, axes and steps all decide its shape, and Pad's pads and axes:
    // every one that is not a constant is listed (a plan in segments compiles its tail with
    // all of them baked in, not one per recompile).
    let g = parse_graph(
        r#"graph "g" {
  input %0 "x": f32[20,10,5]
  input %1 "starts": i64[1]
  input %2 "ends": i64[1]
  input %3 "axes": i64[1]
  input %4 "steps": i64[1]
  input %5 "pads": i64[2]
  input %6 "pad_axes": i64[1]
  %7 "s" = layout.Slice {"axes":null,"ends":null,"starts":null} (%0, %1, %2, %3, %4) # "slice"
  %8 "p" = layout.Pad {"mode":"Constant","pads":null} (%0, %5, _, %6) # "pad"
  output %7, %8
}"#,
    )
    .unwrap();
    let names: std::collections::BTreeSet<&str> = shape_operands(&g)
        .unwrap()
        .into_iter()
        .map(|v| g.name_of(v))
        .collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["axes", "ends", "pad_axes", "pads", "starts", "steps"]
    );
}
