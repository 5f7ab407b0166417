//! Hostile models, built in code: cycles, allocation bombs, overflowing shapes, endless
//! loops, unknown ops and domains, external data that leaves its folder, deep (valid)
//! nesting. The tests run each through the runtime and check the exact error kind.

use smelt_onnx::proto::{
    attribute_proto::attribute_type as at, tensor_proto::data_type, tensor_shape_proto, type_proto,
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// A tensor value's declaration: element type code and dims (None: rank unknown).
pub fn vi(name: &str, elem: i32, dims: Option<&[i64]>) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem,
                shape: dims.map(|dims| TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                            denotation: String::new(),
                        })
                        .collect(),
                }),
            })),
            denotation: String::new(),
        }),
        ..Default::default()
    }
}

/// An f32 declaration with known dims.
pub fn f32_vi(name: &str, dims: &[i64]) -> ValueInfoProto {
    vi(name, data_type::FLOAT, Some(dims))
}

/// A node.
pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: format!(
            "{}_{}",
            op.to_lowercase(),
            outputs.first().copied().unwrap_or("")
        ),
        op_type: op.into(),
        attribute: attrs,
        ..Default::default()
    }
}

/// A graph attribute.
pub fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: at::GRAPH,
        g: Some(g),
        ..Default::default()
    }
}

/// An int64 initializer.
pub fn i64_init(name: &str, dims: &[i64], vals: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: data_type::INT64,
        int64_data: vals.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

/// A model of one graph at opset 21.
pub fn model(g: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: 10,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 21,
        }],
        graph: Some(g),
        ..Default::default()
    }
}

/// y = Relu(x), x and y f32[2, 3].
pub fn relu() -> ModelProto {
    model(GraphProto {
        node: vec![node("Relu", &["x"], &["y"], vec![])],
        name: "relu".into(),
        input: vec![f32_vi("x", &[2, 3])],
        output: vec![f32_vi("y", &[2, 3])],
        ..Default::default()
    })
}

/// a = Relu(b), b = Relu(a): a cycle.
pub fn cycle() -> ModelProto {
    model(GraphProto {
        node: vec![
            node("Relu", &["b"], &["a"], vec![]),
            node("Relu", &["a"], &["b"], vec![]),
            node("Add", &["x", "a"], &["y"], vec![]),
        ],
        name: "cycle".into(),
        input: vec![f32_vi("x", &[2, 3])],
        output: vec![f32_vi("y", &[2, 3])],
        ..Default::default()
    })
}

/// y = `op`(x) in `domain`, for unknown ops and domains.
pub fn unknown(op: &str, domain: &str) -> ModelProto {
    let mut m = relu();
    if let Some(g) = m.graph.as_mut() {
        g.node[0].op_type = op.into();
        g.node[0].domain = domain.into();
    }
    if !domain.is_empty() {
        m.opset_import.push(OperatorSetIdProto {
            domain: domain.into(),
            version: 1,
        });
    }
    m
}

/// `op`(x, shape) where `shape` is an int64 initializer: an allocation bomb when the shape
/// (Expand's, ConstantOfShape's, Tile's repeats, Reshape's...) is huge. `x` is f32[2, 3].
pub fn shape_bomb(op: &str, shape: &[i64]) -> ModelProto {
    let inputs: &[&str] = if op == "ConstantOfShape" {
        &["shape"]
    } else {
        &["x", "shape"]
    };
    model(GraphProto {
        node: vec![node(op, inputs, &["y"], vec![])],
        name: "bomb".into(),
        initializer: vec![i64_init("shape", &[shape.len() as i64], shape)],
        input: vec![f32_vi("x", &[2, 3])],
        output: vec![vi("y", data_type::FLOAT, None)],
        ..Default::default()
    })
}

/// Range(0, limit, 1) in int64: an allocation bomb for a huge limit.
pub fn range_bomb(limit: i64) -> ModelProto {
    model(GraphProto {
        node: vec![
            node("Range", &["start", "limit", "delta"], &["r"], vec![]),
            node(
                "Cast",
                &["r"],
                &["c"],
                vec![AttributeProto {
                    name: "to".into(),
                    r#type: at::INT,
                    i: data_type::FLOAT as i64,
                    ..Default::default()
                }],
            ),
            node("ReduceSum", &["c"], &["s"], vec![]),
            node("Add", &["x", "s"], &["y"], vec![]),
        ],
        name: "range".into(),
        initializer: vec![
            i64_init("start", &[], &[0]),
            i64_init("limit", &[], &[limit]),
            i64_init("delta", &[], &[1]),
        ],
        input: vec![f32_vi("x", &[2, 3])],
        output: vec![vi("y", data_type::FLOAT, None)],
        ..Default::default()
    })
}

/// y = x + w where the initializer w declares `dims` (its data is one float).
pub fn bad_initializer(dims: &[i64]) -> ModelProto {
    let mut m = relu();
    if let Some(g) = m.graph.as_mut() {
        g.node = vec![node("Add", &["x", "w"], &["y"], vec![])];
        g.initializer.push(TensorProto {
            dims: dims.to_vec(),
            data_type: data_type::FLOAT,
            float_data: vec![1.0],
            name: "w".into(),
            ..Default::default()
        });
    }
    m
}

/// y = x + w where w (f32[2, 3], 24 bytes) lives in external data at `location`, said to
/// be `length` bytes long.
pub fn external(location: &str, length: Option<u64>) -> ModelProto {
    let mut m = relu();
    let mut entries = vec![StringStringEntryProto {
        key: "location".into(),
        value: location.into(),
    }];
    if let Some(l) = length {
        entries.push(StringStringEntryProto {
            key: "length".into(),
            value: l.to_string(),
        });
    }
    if let Some(g) = m.graph.as_mut() {
        g.node = vec![node("Add", &["x", "w"], &["y"], vec![])];
        g.initializer.push(TensorProto {
            dims: vec![2, 3],
            data_type: data_type::FLOAT,
            name: "w".into(),
            data_location: 1,
            external_data: entries,
            ..Default::default()
        });
    }
    m
}

/// A Loop with `trips` iterations (condition always true) whose body passes x through:
/// endless for i64::MAX trips, within its memory.
pub fn endless_loop(trips: i64) -> ModelProto {
    let body = GraphProto {
        node: vec![
            node("Identity", &["cond_in"], &["cond_out"], vec![]),
            node("Identity", &["v_in"], &["v_out"], vec![]),
        ],
        name: "body".into(),
        input: vec![
            vi("i", data_type::INT64, Some(&[])),
            vi("cond_in", data_type::BOOL, Some(&[])),
            f32_vi("v_in", &[2, 3]),
        ],
        output: vec![
            vi("cond_out", data_type::BOOL, Some(&[])),
            f32_vi("v_out", &[2, 3]),
        ],
        ..Default::default()
    };
    let cond = TensorProto {
        dims: vec![],
        data_type: data_type::BOOL,
        int32_data: vec![1],
        name: "cond".into(),
        ..Default::default()
    };
    model(GraphProto {
        node: vec![node(
            "Loop",
            &["m", "cond", "x"],
            &["y"],
            vec![graph_attr("body", body)],
        )],
        name: "loop".into(),
        initializer: vec![i64_init("m", &[], &[trips]), cond],
        input: vec![f32_vi("x", &[2, 3])],
        output: vec![f32_vi("y", &[2, 3])],
        ..Default::default()
    })
}

/// `depth` Ifs nested in each other's then-branches, all taken when `c` is true; the
/// innermost returns Relu(x), each else-branch returns x. Valid at any depth.
pub fn nested_ifs(depth: usize) -> ModelProto {
    fn level(d: usize) -> GraphProto {
        let out = format!("y{d}");
        if d == 0 {
            return GraphProto {
                node: vec![node("Relu", &["x"], &[&out], vec![])],
                name: "leaf".into(),
                output: vec![f32_vi(&out, &[2, 3])],
                ..Default::default()
            };
        }
        let els = format!("e{d}");
        let else_branch = GraphProto {
            node: vec![node("Identity", &["x"], &[&els], vec![])],
            name: format!("else{d}"),
            output: vec![f32_vi(&els, &[2, 3])],
            ..Default::default()
        };
        GraphProto {
            node: vec![node(
                "If",
                &["c"],
                &[&out],
                vec![
                    graph_attr("then_branch", level(d - 1)),
                    graph_attr("else_branch", else_branch),
                ],
            )],
            name: format!("level{d}"),
            output: vec![f32_vi(&out, &[2, 3])],
            ..Default::default()
        }
    }
    let mut g = level(depth);
    g.name = "nested".into();
    g.input = vec![f32_vi("x", &[2, 3]), vi("c", data_type::BOOL, Some(&[]))];
    model(g)
}

/// A chain of `n` Relu nodes.
pub fn chain(n: usize) -> ModelProto {
    let names: Vec<String> = (0..=n)
        .map(|i| {
            if i == 0 {
                "x".into()
            } else if i == n {
                "y".into()
            } else {
                format!("t{i}")
            }
        })
        .collect();
    let mut m = relu();
    if let Some(g) = m.graph.as_mut() {
        g.node = (0..n)
            .map(|i| node("Relu", &[&names[i]], &[&names[i + 1]], vec![]))
            .collect();
    }
    m
}

/// An int attribute.
pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: at::INT,
        i: v,
        ..Default::default()
    }
}

/// A string attribute.
pub fn str_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: at::STRING,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// An ints attribute.
pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: at::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// `op`(x) with these attributes and outputs, x f32 of `dims` (a campaign finding's shape).
pub fn single(op: &str, dims: &[i64], attrs: Vec<AttributeProto>, outputs: &[&str]) -> ModelProto {
    model(GraphProto {
        node: vec![node(op, &["x"], outputs, attrs)],
        name: op.to_lowercase(),
        input: vec![f32_vi("x", dims)],
        output: outputs
            .iter()
            .map(|o| vi(o, data_type::FLOAT, None))
            .collect(),
        ..Default::default()
    })
}
