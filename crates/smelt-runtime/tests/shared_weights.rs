//! Weights are stored once: every plan of a session (one per input shape) reads the
//! model's constants in place, and so does a second session of a cloned model.

use smelt_ir::{with_data, Model, Tensor};
use smelt_runtime::{InputShapes, Session, SessionOptions};

const GRAPH: &str = r#"graph "g" {
  input %0 "x": f32[batch,4]
  const %1 "w" = {"dtype":"F32","shape":[4,3],"data":{"F32":[0.5,-1.0,0.25,1.5,0.75,-0.5,-0.25,0.125,1.0,2.0,-1.5,0.5]}}
  %2 "m" = nn.MatMul (%0, %1) # "mm"
  %3 "r" = elementwise.Relu (%2) # "relu"
  output %3
}"#;

fn model() -> Model {
    Model {
        graph: smelt_ir::text::parse_graph(GRAPH).expect("parse"),
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    }
}

fn addr(t: &Tensor) -> usize {
    with_data!(t.data(), v => v.as_ptr() as usize)
}

fn plan_weight_addrs(s: &Session, batch: usize) -> Vec<usize> {
    let mut shapes = InputShapes::new();
    shapes.set("x", vec![batch, 4]);
    let p = s.plan_for(&shapes).expect("plan");
    let n = p.kernels().expect("kernel plan").buffers.len();
    (0..n).filter_map(|i| p.weight(i)).map(addr).collect()
}

#[test]
fn plans_and_sessions_share_the_models_weights() {
    let m = model();
    let w = addr(&m.graph.constants[0].tensor);
    let s = Session::from_model_with(m.clone(), &SessionOptions::default()).expect("session");
    let (a, b) = (plan_weight_addrs(&s, 2), plan_weight_addrs(&s, 5));
    assert_eq!(s.compile_count(), 2);
    assert!(a.contains(&w), "plan for batch 2 copied the weight");
    assert!(b.contains(&w), "plan for batch 5 copied the weight");
    let s2 = Session::from_model_with(m, &SessionOptions::default()).expect("session 2");
    assert!(
        plan_weight_addrs(&s2, 3).contains(&w),
        "a second session copied it"
    );
    assert_eq!(addr(&s2.model().graph.constants[0].tensor), w);
}
