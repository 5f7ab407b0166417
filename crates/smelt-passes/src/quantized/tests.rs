use super::*;

/// `y = MatMul(DQ(xq, 0.5, zx), DQ(wq, scales, zw))` with xq u8 [2, 4], wq i8 [4, 3].
fn graph(zw: i8) -> Graph {
    let mut g = Graph::default();
    let t = |dtype, shape: &[usize]| known(dtype, shape);
    let xq = g.add_value("xq", t(DType::U8, &[2, 4]));
    let sx = g.add_value("sx", t(DType::F32, &[]));
    let zx = g.add_value("zx", t(DType::U8, &[]));
    let wq = g.add_value("wq", t(DType::I8, &[4, 3]));
    let sw = g.add_value("sw", t(DType::F32, &[3]));
    let zwv = g.add_value("zw", t(DType::I8, &[3]));
    let xd = g.add_value("xd", t(DType::F32, &[2, 4]));
    let wd = g.add_value("wd", t(DType::F32, &[4, 3]));
    let y = g.add_value("y", t(DType::F32, &[2, 3]));
    g.inputs.push(smelt_ir::GraphInput {
        id: xq,
        default: None,
    });
    let c = |id, tensor| smelt_ir::Constant { id, tensor };
    g.constants = vec![
        c(sx, Tensor::scalar_f32(0.5)),
        c(zx, Tensor::from_i64(DType::U8, vec![], &[3]).unwrap()),
        c(
            wq,
            Tensor::from_i64(
                DType::I8,
                vec![4, 3],
                &[1, -2, 3, 4, 5, -6, 7, 8, 9, -10, 11, 12],
            )
            .unwrap(),
        ),
        c(sw, Tensor::from_f32(vec![3], vec![0.1, 0.2, 0.4]).unwrap()),
        c(
            zwv,
            Tensor::from_i64(DType::I8, vec![3], &[0, 0, zw as i64]).unwrap(),
        ),
    ];
    let dq = |axis| {
        Op::Quant(QuantOp::DequantizeLinear {
            axis,
            block_size: 0,
            output_dtype: None,
        })
    };
    let node = |name: &str, op, inputs: Vec<ValueId>, out| Node {
        name: name.into(),
        op,
        inputs: inputs.into_iter().map(Some).collect(),
        outputs: vec![Some(out)],
    };
    g.nodes = vec![
        node("dqx", dq(1), vec![xq, sx, zx], xd),
        node("dqw", dq(1), vec![wq, sw, zwv], wd),
        node("mm", Op::Nn(NnOp::MatMul), vec![xd, wd], y),
    ];
    g.outputs.push(y);
    g
}

#[test]
fn a_qdq_matmul_becomes_an_integer_product_with_its_rescale() {
    let mut g = graph(0);
    assert!(rewrite(&mut g));
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(
        ops,
        [
            "DequantizeLinear",
            "DequantizeLinear",
            "MatMulInteger",
            "Cast",
            "Mul"
        ]
    );
    // The rescale is x_scale times each column's weight scale; the result keeps its value.
    let mul = &g.nodes[4];
    let scale = mul.inputs[1].unwrap();
    let t = &g.constants.iter().find(|c| c.id == scale).unwrap().tensor;
    assert_eq!(t.as_f32().unwrap(), &[0.05, 0.1, 0.2]);
    assert_eq!(mul.outputs[0], Some(g.outputs[0]));
}

#[test]
fn non_zero_weight_zero_points_stay_float() {
    let mut g = graph(1);
    assert!(!rewrite(&mut g));
    assert_eq!(g.nodes.len(), 3);
}
