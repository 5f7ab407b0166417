use super::*;
use crate::proto::{
    tensor_shape_proto::{dimension, Dimension},
    type_proto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

fn value_info(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A model of graph `g` importing the default domain at `opset`.
fn model_of(g: GraphProto, opset: i64) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(g),
        ..Default::default()
    }
}

fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * scale)
        .collect()
}

/// x [1, 4, 5, 5] -> Conv 3x3 (6 channels, bias) -> BatchNormalization -> Relu -> Flatten
/// -> Gemm (transB, 3 outputs, bias).
fn model(opset: i64) -> ModelProto {
    let bn = |name: &str, v: Vec<f32>| f32_tensor(name, &[6], &v);
    let g = GraphProto {
        node: vec![
            node(
                "Conv",
                "conv".into(),
                vec!["x".into(), "w".into(), "b".into()],
                "c".into(),
                vec![AttributeProto {
                    name: "pads".into(),
                    r#type: attribute_type::INTS,
                    ints: vec![1, 1, 1, 1],
                    ..Default::default()
                }],
            ),
            node(
                "BatchNormalization",
                "bn".into(),
                vec![
                    "c".into(),
                    "gamma".into(),
                    "beta".into(),
                    "mean".into(),
                    "var".into(),
                ],
                "n".into(),
                vec![],
            ),
            node("Relu", "relu".into(), vec!["n".into()], "r".into(), vec![]),
            node(
                "Flatten",
                "flat".into(),
                vec!["r".into()],
                "f".into(),
                vec![],
            ),
            node(
                "Gemm",
                "fc".into(),
                vec!["f".into(), "fw".into(), "fb".into()],
                "y".into(),
                vec![int_attr("transB", 1)],
            ),
        ],
        initializer: vec![
            f32_tensor("w", &[6, 4, 3, 3], &ramp(216, 0.01)),
            f32_tensor("b", &[6], &ramp(6, 0.02)),
            bn("gamma", vec![1.0, 0.5, 2.0, 1.5, 0.8, 1.2]),
            bn("beta", ramp(6, 0.1)),
            bn("mean", ramp(6, 0.05)),
            bn("var", vec![1.0, 2.0, 0.5, 1.0, 4.0, 0.25]),
            f32_tensor("fw", &[3, 150], &ramp(450, 0.003)),
            f32_tensor("fb", &[3], &[0.1, -0.2, 0.3]),
        ],
        input: vec![value_info("x", &[1, 4, 5, 5])],
        output: vec![value_info("y", &[1, 3])],
        ..Default::default()
    };
    model_of(g, opset)
}

fn ranges() -> HashMap<String, Range> {
    HashMap::from([
        (
            "x".to_string(),
            Range {
                min: -1.0,
                max: 1.0,
            },
        ),
        ("f".to_string(), Range { min: 0.0, max: 3.0 }),
    ])
}

#[test]
fn batchnorm_folds_and_products_become_qdq_that_imports() {
    let mut m = model(13);
    let g = m.graph.as_mut().unwrap();
    assert_eq!(fold_batchnorm(g), 1);
    assert!(g.node.iter().all(|n| n.op_type != "BatchNormalization"));
    let t = targets(g, &["Conv", "MatMul", "Gemm"]);
    assert_eq!(
        t.iter()
            .map(|t| (t.activation.as_str(), t.axis))
            .collect::<Vec<_>>(),
        [("x", 0), ("f", 0)]
    );
    write_qdq(
        &mut m,
        &t,
        &ranges(),
        QdqOptions {
            per_channel: true,
            reduce_range: false,
            residuals: Default::default(),
        },
    )
    .unwrap();
    let g = m.graph.as_ref().unwrap();
    let ops: Vec<&str> = g.node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops.iter().filter(|o| **o == "QuantizeLinear").count(), 2);
    assert_eq!(ops.iter().filter(|o| **o == "DequantizeLinear").count(), 6);
    // The float weights and the folded statistics are gone; int8 weights per channel.
    let names: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    assert!(!names.contains("fw") && !names.contains("gamma") && !names.contains("w"));
    let fwq = g
        .initializer
        .iter()
        .find(|t| t.name == "fw_quantized")
        .unwrap();
    assert_eq!(fwq.data_type, DataType::Int8 as i32);
    let scales = f32_initializer(g, "fw_scale").unwrap();
    assert_eq!(scales.1, [3]);
    // Each weight within half a step of its value.
    let fw = ramp(450, 0.003);
    for (i, &q) in fwq.raw_data.iter().enumerate() {
        let s = scales.0[i / 150];
        assert!((q as i8 as f32 * s - fw[i]).abs() <= s / 2.0 + 1e-7);
    }
    // smelt imports the file it wrote.
    let bytes = encode(&m);
    let proto = crate::decode_model(&bytes, smelt_ir::Limits::process_default()).unwrap();
    crate::import_model(&proto, None, false).unwrap();
}

#[test]
fn activation_parameters_cover_zero_and_the_range() {
    assert_eq!(
        activation_params(Range {
            min: 0.0,
            max: 2.55
        }),
        (0.01, 0)
    );
    let (s, z) = activation_params(Range {
        min: -1.0,
        max: 1.0,
    });
    assert!((s - 2.0 / 255.0).abs() < 1e-7 && (127..=128).contains(&z));
    assert_eq!(activation_params(Range { min: 0.0, max: 0.0 }), (1.0, 0));
}

#[test]
fn per_channel_qdq_needs_opset_13() {
    let mut m = model(11);
    let g = m.graph.as_mut().unwrap();
    let t = targets(g, &["Conv", "Gemm"]);
    let e = write_qdq(
        &mut m,
        &t,
        &ranges(),
        QdqOptions {
            per_channel: true,
            reduce_range: false,
            residuals: Default::default(),
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("opset 13"), "{e}");
    assert!(write_qdq(
        &mut m,
        &t,
        &ranges(),
        QdqOptions {
            per_channel: false,
            reduce_range: false,
            residuals: Default::default(),
        }
    )
    .is_ok());
}

#[test]
fn reduced_range_weights_stay_within_63() {
    let mut m = model(13);
    let g = m.graph.as_mut().unwrap();
    fold_batchnorm(g);
    let t = targets(g, &["Conv", "Gemm"]);
    let o = QdqOptions {
        per_channel: true,
        reduce_range: true,
        residuals: Default::default(),
    };
    write_qdq(&mut m, &t, &ranges(), o).unwrap();
    let g = m.graph.as_ref().unwrap();
    let q: Vec<i8> = g
        .initializer
        .iter()
        .filter(|t| t.data_type == DataType::Int8 as i32 && t.name.ends_with("_quantized"))
        .flat_map(|t| t.raw_data.iter().map(|&b| b as i8))
        .collect();
    assert!(!q.is_empty());
    assert!(q.iter().all(|&v| (-63..=63).contains(&v)));
    assert!(q.iter().any(|&v| v.abs() == 63));
}

#[test]
fn dynamic_products_read_transposed_weights_as_k_by_n() {
    let mut m = model(13);
    let g = m.graph.as_mut().unwrap();
    let t = targets(g, &["MatMul", "Gemm"]);
    let opts = QdqOptions {
        per_channel: true,
        reduce_range: false,
        residuals: Default::default(),
    };
    assert_eq!(dynamic::write_dynamic(&mut m, &t, opts).unwrap(), 1);
    let g = m.graph.as_ref().unwrap();
    let ops: Vec<&str> = g.node.iter().map(|n| n.op_type.as_str()).collect();
    let at = |op: &str| ops.iter().position(|o| *o == op).unwrap();
    // The activation's quantization, the scale product, then the integer product, and the
    // Gemm's output name kept by its bias Add.
    assert!(at("DynamicQuantizeLinear") < at("MatMulInteger"));
    assert!(at("Mul") < at("MatMulInteger"));
    assert_eq!(g.node.last().unwrap().op_type, "Add");
    assert_eq!(g.node.last().unwrap().output, ["y"]);
    assert!(!ops.contains(&"Gemm"));
    // fw [3, 150] (transB) becomes int8 [150, 3] with one scale per output column.
    let q = g
        .initializer
        .iter()
        .find(|t| t.name == "fw_kn_quantized")
        .unwrap();
    assert_eq!(q.dims, [150, 3]);
    let scales = f32_initializer(g, "fw_kn_scale").unwrap();
    assert_eq!(scales.1, [3]);
    let fw = ramp(450, 0.003);
    for (i, &b) in q.raw_data.iter().enumerate() {
        let (k, n) = (i / 3, i % 3);
        let s = scales.0[n];
        assert!((b as i8 as f32 * s - fw[n * 150 + k]).abs() <= s / 2.0 + 1e-7);
    }
    assert!(!g.initializer.iter().any(|t| t.name == "fw"));
    let bytes = encode(&m);
    let proto = crate::decode_model(&bytes, smelt_ir::Limits::process_default()).unwrap();
    crate::import_model(&proto, None, false).unwrap();
    // Opset 10 has no DynamicQuantizeLinear.
    let mut old = model(10);
    let t = targets(old.graph.as_ref().unwrap(), &["Gemm"]);
    let e = dynamic::write_dynamic(&mut old, &t, opts).unwrap_err();
    assert!(e.to_string().contains("opset 11"), "{e}");
}

/// x [1, 2, 4, 4] -> 1x1 Conv -> Relu (r) -> 1x1 Conv -> Add r (a skip connection from a
/// rectifier) -> Add x (from the graph input).
fn residual_model() -> ModelProto {
    let conv = |name: &str, x: &str, w: &str, y: &str| {
        node(
            "Conv",
            name.into(),
            vec![x.into(), w.into()],
            y.into(),
            vec![],
        )
    };
    let add = |name: &str, a: &str, b: &str, y: &str| {
        node(
            "Add",
            name.into(),
            vec![a.into(), b.into()],
            y.into(),
            vec![],
        )
    };
    let g = GraphProto {
        node: vec![
            conv("c1", "x", "w1", "c"),
            node("Relu", "relu".into(), vec!["c".into()], "r".into(), vec![]),
            conv("c2", "r", "w2", "d"),
            add("skip", "d", "r", "s"),
            add("raw", "s", "x", "y"),
        ],
        initializer: vec![
            f32_tensor("w1", &[2, 2, 1, 1], &ramp(4, 0.1)),
            f32_tensor("w2", &[2, 2, 1, 1], &ramp(4, 0.2)),
        ],
        input: vec![value_info("x", &[1, 2, 4, 4])],
        output: vec![value_info("y", &[1, 2, 4, 4])],
        ..Default::default()
    };
    model_of(g, 13)
}

#[test]
fn skip_connections_read_the_dequantized_activation_as_asked() {
    let ranges = HashMap::from([
        (
            "x".to_string(),
            Range {
                min: -1.0,
                max: 1.0,
            },
        ),
        ("r".to_string(), Range { min: 0.0, max: 2.0 }),
    ]);
    for (residuals, skip, raw) in [
        (Residuals::Auto, "r_dequantized", "x"),
        (Residuals::Quantized, "r_dequantized", "x_dequantized"),
        (Residuals::Float, "r", "x"),
    ] {
        let mut m = residual_model();
        let t = targets(m.graph.as_ref().unwrap(), &["Conv"]);
        let opts = QdqOptions {
            per_channel: true,
            reduce_range: false,
            residuals,
        };
        write_qdq(&mut m, &t, &ranges, opts).unwrap();
        let g = m.graph.as_ref().unwrap();
        let input_of = |name: &str, k: usize| {
            let n = g.node.iter().find(|n| n.name == name).unwrap();
            n.input[k].clone()
        };
        assert_eq!(input_of("skip", 1), skip, "{residuals:?}");
        assert_eq!(input_of("raw", 1), raw, "{residuals:?}");
        // Every value is written before it is read.
        let mut known: HashSet<String> = g.initializer.iter().map(|t| t.name.clone()).collect();
        known.insert("x".into());
        for n in &g.node {
            for i in n.input.iter().filter(|i| !i.is_empty()) {
                assert!(
                    known.contains(i),
                    "{residuals:?}: {} reads {i} first",
                    n.name
                );
            }
            known.extend(n.output.iter().cloned());
        }
        crate::import_model(&m, None, false).expect("imports");
    }
}

/// ids [2, 3] (int64) -> Gather of a 300 x 20 float table -> y; a second, 2 x 20 table
/// gathered too (under the size bound), and a third read by a Gather and an Add.
fn embedding_model() -> ModelProto {
    let gather = |name: &str, t: &str, y: &str| {
        node(
            "Gather",
            name.into(),
            vec![t.into(), "ids".into()],
            y.into(),
            vec![],
        )
    };
    let mut ids = value_info("ids", &[2, 3]);
    if let Some(type_proto::Value::TensorType(t)) =
        ids.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = DataType::Int64 as i32;
    }
    let g = GraphProto {
        node: vec![
            gather("words", "table", "y"),
            gather("types", "small", "z"),
            gather("shared", "both", "s"),
            node(
                "Add",
                "reuse".into(),
                vec!["both".into(), "both".into()],
                "b2".into(),
                vec![],
            ),
        ],
        initializer: vec![
            f32_tensor("table", &[300, 20], &ramp(6000, 0.01)),
            f32_tensor("small", &[2, 20], &ramp(40, 0.01)),
            f32_tensor("both", &[300, 20], &ramp(6000, 0.02)),
        ],
        input: vec![ids],
        output: vec![
            value_info("y", &[2, 3, 20]),
            value_info("z", &[2, 3, 20]),
            value_info("s", &[2, 3, 20]),
            value_info("b2", &[300, 20]),
        ],
        ..Default::default()
    };
    model_of(g, 13)
}

#[test]
fn embedding_tables_become_int8_with_the_dequantization_after_the_gather() {
    for per_channel in [true, false] {
        let mut m = embedding_model();
        let opts = QdqOptions {
            per_channel,
            reduce_range: false,
            residuals: Default::default(),
        };
        assert_eq!(dynamic::quantize_gathers(&mut m, opts, 4096).unwrap(), 1);
        let g = m.graph.as_ref().unwrap();
        let find = |name: &str| g.node.iter().position(|n| n.name == name).unwrap();
        let words = &g.node[find("words")];
        assert_eq!(words.input[0], "table_quantized");
        let dq = &g.node[find("words") + 1];
        assert_eq!(dq.op_type, "DequantizeLinear");
        assert_eq!(dq.input[0], words.output[0]);
        assert_eq!(dq.output[0], "y");
        let axis = dq.attribute.iter().find(|a| a.name == "axis").map(|a| a.i);
        assert_eq!(axis, per_channel.then_some(-1));
        let q = g
            .initializer
            .iter()
            .find(|t| t.name == "table_quantized")
            .unwrap();
        assert_eq!(q.data_type, DataType::Int8 as i32);
        // Under the bound, or read by another node: float as before.
        assert_eq!(g.node[find("types")].input[0], "small");
        assert_eq!(g.node[find("shared")].input[0], "both");
        assert!(g.initializer.iter().all(|t| t.name != "table"));
        crate::import_model(&m, None, false).expect("imports");
    }
}
