//! Lowering tests: groups, views, placement and the memory plan of small typed graphs.

use super::lower;
use smelt_ir::kernel::{BufferKind, GroupBody, KernelPlan};
use smelt_ir::text::parse_graph;

const CONV: &str = r#"{"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[3,3],"pads":[1,1,1,1],"strides":[]}"#;

fn plan(text: &str) -> KernelPlan {
    let mut g = parse_graph(text).unwrap_or_else(|e| panic!("parse: {e}"));
    lower(&mut g).unwrap_or_else(|e| panic!("lower: {e}"))
}

fn kinds(p: &KernelPlan) -> Vec<String> {
    p.groups
        .iter()
        .map(|g| format!("{}:{}", g.body.kind(), g.ops.join("+")))
        .collect()
}

fn weights(n: usize) -> String {
    format!(
        r#"{{"dtype":"F32","shape":[4,4,3,3],"data":{{"F32":[{}]}}}}"#,
        vec!["0.01"; n].join(",")
    )
}

#[test]
fn conv_takes_activation_and_residual_as_epilogue() {
    let p = plan(&format!(
        r#"graph "g" {{
  input %0 "x": f32[1,4,8,8]
  const %1 "w" = {}
  %2 "c": f32[1,4,8,8] = nn.Conv {CONV} (%0, %1) # "conv"
  %3 "s": f32[1,4,8,8] = elementwise.Sigmoid (%2) # "sig"
  %4 "m": f32[1,4,8,8] = elementwise.Mul (%2, %3) # "silu"
  %5 "y": f32[1,4,8,8] = elementwise.Add (%4, %0) # "residual"
  output %5
}}"#,
        weights(144)
    ));
    assert_eq!(kinds(&p), vec!["anchor:Conv+Sigmoid+Mul+Add"]);
    let GroupBody::Anchor(a) = &p.groups[0].body else {
        panic!()
    };
    // One store, straight into the output buffer.
    assert_eq!(a.epilogue.stores.len(), 1);
    let dst = a.epilogue.stores[0].dst.buffer;
    assert_eq!(p.buffer(dst).kind, BufferKind::Output(0));
    assert_eq!(p.memory.arena_bytes, 0);
}

#[test]
fn concat_pieces_are_written_in_place_and_views_cost_nothing() {
    let p = plan(&format!(
        r#"graph "g" {{
  input %0 "x": f32[1,4,8,8]
  const %1 "w" = {}
  %2 "a": f32[1,4,8,8] = elementwise.Relu (%0) # "relu"
  %3 "b": f32[1,4,8,8] = nn.Conv {CONV} (%0, %1) # "conv"
  %4 "cat": f32[1,8,8,8] = layout.Concat {{"axis":1}} (%2, %3) # "cat"
  %5 "t": f32[1,8,8,8] = layout.Transpose {{"perm":[0,1,3,2]}} (%4) # "tr"
  %6 "y": f32[1,8,8,8] = elementwise.Neg (%5) # "neg"
  output %6
}}"#,
        weights(144)
    ));
    assert_eq!(
        kinds(&p),
        vec!["elementwise:Relu", "anchor:Conv", "elementwise:Neg"]
    );
    // The negation reads the concat buffer through transposed strides.
    let GroupBody::Elementwise(l) = &p.groups[2].body else {
        panic!()
    };
    assert_eq!(l.loads[0].strides, vec![512, 64, 1, 8]);
    // a and b live in the concat's buffer: one arena buffer of 8*64 floats.
    assert_eq!(p.memory.arena_bytes, 2048);
    assert_eq!(p.memory.intermediate_bytes, 2048);
}

#[test]
fn reduction_takes_mask_prologue_and_scale_epilogue_and_arena_reuses_memory() {
    let p = plan(
        r#"graph "g" {
  input %0 "x": f32[2,3,16]
  input %1 "m": f32[2,1,16]
  %2 "a": f32[2,3,16] = elementwise.Add (%0, %1) # "mask"
  %3 "s": f32[2,3,16] = reduce.Softmax {"axis":-1,"coerce_2d":false} (%2) # "softmax"
  %4 "e": f32[2,3,16] = elementwise.Mul (%3, %0) # "scale"
  %5 "r": f32[2,3,1] = reduce.ReduceSum {"axes":[2],"keepdims":true,"noop_with_empty_axes":false} (%4) # "sum"
  %6 "q": f32[2,3,1] = elementwise.Sqrt (%5) # "sqrt"
  %7 "t": f32[2,1,3] = layout.Transpose {"perm":[0,2,1]} (%6) # "tr"
  %8 "u": f32[2,1,3] = elementwise.Exp (%7) # "exp"
  output %8
}"#,
    );
    assert_eq!(
        kinds(&p),
        vec![
            "reduction:Add+Softmax+Mul",
            "reduction:ReduceSum",
            "elementwise:Sqrt",
            "elementwise:Exp"
        ]
    );
    assert!(!p.rejected.is_empty(), "sqrt reads a per-row value");
    let GroupBody::Reduction(r) = &p.groups[1].body else {
        panic!()
    };
    assert!(r.body.stores[0].per_row);
    assert_eq!(r.body.stores[0].dst.shape, vec![2, 3]);
    // The row sums die in the square root, whose (transposed) result reuses them.
    assert_eq!(p.memory.in_place, 1, "{:?}", p.memory);
    // Live together at the sum: the scaled softmax (384 bytes) and the row sums (24,
    // a 64-byte slot); the square roots reuse the sums' slot.
    assert_eq!(p.memory.arena_bytes, 384 + 64, "{:?}", p.memory);
}

#[test]
fn residual_chain_adds_in_place_down_the_chain() {
    // Two residual blocks: each block's second Conv+Add writes over the block's input,
    // which dies there, though that input itself took over the block before it.
    let p = plan(&format!(
        r#"graph "g" {{
  input %0 "x": f32[1,4,8,8]
  const %1 "w" = {}
  %2 "a": f32[1,4,8,8] = elementwise.Relu (%0) # "r0"
  %3 "c1": f32[1,4,8,8] = nn.Conv {CONV} (%2, %1) # "conv1"
  %4 "t1": f32[1,4,8,8] = elementwise.Relu (%3) # "relu1"
  %5 "c2": f32[1,4,8,8] = nn.Conv {CONV} (%4, %1) # "conv2"
  %6 "s1": f32[1,4,8,8] = elementwise.Add (%5, %2) # "add1"
  %7 "c3": f32[1,4,8,8] = nn.Conv {CONV} (%6, %1) # "conv3"
  %8 "t2": f32[1,4,8,8] = elementwise.Relu (%7) # "relu2"
  %9 "c4": f32[1,4,8,8] = nn.Conv {CONV} (%8, %1) # "conv4"
  %10 "s2": f32[1,4,8,8] = elementwise.Add (%9, %6) # "add2"
  %11 "y": f32[1,4,8,8] = nn.Conv {CONV} (%10, %1) # "conv5"
  output %11
}}"#,
        weights(144)
    ));
    assert_eq!(
        kinds(&p),
        vec![
            "elementwise:Relu",
            "anchor:Conv+Relu",
            "anchor:Conv+Add",
            "anchor:Conv+Relu",
            "anchor:Conv+Add",
            "anchor:Conv"
        ]
    );
    // s1 over a, s2 over s1 (so over a): one 1 KiB buffer for the chain, one for t1, t2.
    assert_eq!(p.memory.in_place, 2, "{:?}", p.memory);
    let at = |g: usize| {
        let GroupBody::Anchor(a) = &p.groups[g].body else {
            panic!("group {g} is not an anchor")
        };
        p.buffer(a.epilogue.stores[0].dst.buffer).kind
    };
    assert_eq!(at(2), at(4));
    assert_eq!(p.memory.arena_bytes, 2048, "{:?}", p.memory);
}

#[test]
fn no_output_over_an_input_the_anchor_reads() {
    // conv(a) + a: the convolution still reads a's neighbours while the epilogue stores
    // finished tiles, so the sum may not take over a (it did, and gave wrong sums).
    let p = plan(&format!(
        r#"graph "g" {{
  input %0 "x": f32[1,4,8,8]
  const %1 "w" = {}
  %2 "a": f32[1,4,8,8] = elementwise.Relu (%0) # "r0"
  %3 "c1": f32[1,4,8,8] = nn.Conv {CONV} (%2, %1) # "conv1"
  %4 "s1": f32[1,4,8,8] = elementwise.Add (%3, %2) # "add1"
  %5 "y": f32[1,4,8,8] = nn.Conv {CONV} (%4, %1) # "conv2"
  output %5
}}"#,
        weights(144)
    ));
    assert_eq!(
        kinds(&p),
        vec!["elementwise:Relu", "anchor:Conv+Add", "anchor:Conv"]
    );
    assert_eq!(p.memory.in_place, 0, "{:?}", p.memory);
}

#[test]
fn dequantization_read_only_by_an_epilogue_is_computed_there_from_the_bytes() {
    let p = plan(&format!(
        r#"graph "g" {{
  input %0 "x": f32[1,4,8,8]
  const %1 "w" = {}
  const %2 "s" = {{"dtype":"F32","shape":[],"data":{{"F32":[0.02]}}}}
  const %3 "z" = {{"dtype":"U8","shape":[],"data":{{"U8":[128]}}}}
  %4 "q": u8[1,4,8,8] = quant.QuantizeLinear {{"axis":1,"block_size":0,"output_dtype":null,"precision":null,"saturate":true}} (%0, %2, %3) # "quant"
  %5 "d": f32[1,4,8,8] = quant.DequantizeLinear {{"axis":1,"block_size":0,"output_dtype":null}} (%4, %2, %3) # "dequant"
  %6 "c": f32[1,4,8,8] = nn.Conv {CONV} (%0, %1) # "conv"
  %7 "y": f32[1,4,8,8] = elementwise.Add (%6, %5) # "skip"
  output %7
}}"#,
        weights(144)
    ));
    assert_eq!(
        kinds(&p),
        vec![
            "elementwise:QuantizeLinear",
            "anchor:Conv+DequantizeLinear+Add"
        ]
    );
    // The quantization stores its bytes only; nothing stores the f32 dequantized value.
    let GroupBody::Elementwise(l) = &p.groups[0].body else {
        panic!()
    };
    assert_eq!(l.stores.len(), 1);
    assert_eq!(p.buffer(l.stores[0].dst.buffer).dtype, smelt_ir::DType::U8);
    let GroupBody::Anchor(a) = &p.groups[1].body else {
        panic!()
    };
    assert!(a
        .epilogue
        .loads
        .iter()
        .any(|r| p.buffer(r.buffer).dtype == smelt_ir::DType::U8));
}
