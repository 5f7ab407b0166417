//! Graphs planned in segments: a shape given by an input's contents (the graph is compiled
//! with those contents as constants), an output whose shape depends on data (NonZero: the
//! nodes after it are planned at run time), each against the reference executor.

use smelt_ir::{Model, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// relu(x) -> NonZero -> Transpose; reshape(x, shape) -> Exp.
const GRAPH: &str = r#"graph "g" {
  input %0 "x": f32[4,6]
  input %1 "shape": i64[2]
  %2 "r" = elementwise.Relu (%0) # "relu"
  %3 "nz" = layout.NonZero (%2) # "nonzero"
  %4 "t" = layout.Transpose {"perm":[1,0]} (%3) # "transpose"
  %5 "rs" = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "reshape"
  %6 "e" = elementwise.Exp (%5) # "exp"
  output %4
  output %6
  output %2
}"#;

fn session(level: u8) -> Session {
    load(GRAPH, level)
}

/// A session of the graph `text` at optimization level `level`.
fn load(text: &str, level: u8) -> Session {
    let model = Model {
        graph: smelt_ir::text::parse_graph(text).expect("parse"),
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    };
    let options = SessionOptions {
        opt_level: level,
        ..Default::default()
    };
    Session::from_model_with(model, &options).expect("load")
}

fn inputs(seed: u64, shape: [i64; 2]) -> HashMap<String, Value> {
    let mut s = seed;
    let x: Vec<f32> = (0..24)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    HashMap::from([
        (
            "x".to_string(),
            Value::Tensor(Tensor::from_f32(vec![4, 6], x).expect("x")),
        ),
        (
            "shape".to_string(),
            Value::Tensor(Tensor::from_i64_vec(vec![2], shape.to_vec()).expect("shape")),
        ),
    ])
}

#[test]
fn segments_match_the_reference_executor() {
    let fast = session(1);
    let oracle = session(0);
    for (seed, shape) in [
        (1, [6, 4]),
        (2, [6, 4]),
        (3, [3, 8]),
        (4, [-1, 12]),
        (5, [3, 8]),
    ] {
        let got = fast.run(inputs(seed, shape)).expect("segments run");
        let want = oracle.run(inputs(seed, shape)).expect("reference run");
        assert_eq!(got.len(), want.len());
        for ((gn, g), (wn, w)) in got.iter().zip(&want) {
            assert_eq!(gn, wn);
            let (g, w) = (
                g.as_tensor().expect("tensor"),
                w.as_tensor().expect("tensor"),
            );
            assert_eq!(g.shape(), w.shape(), "output {gn}, seed {seed}");
            // The fast exp is within a few ulps of the reference's.
            for (a, b) in g.to_f64().unwrap().iter().zip(w.to_f64().unwrap()) {
                assert!((a - b).abs() <= 1e-6 * b.abs(), "output {gn}: {a} vs {b}");
            }
        }
    }
    let plan = fast.last_plan().expect("a plan");
    let seg = plan.segments().expect("the graph runs in segments");
    assert!(
        seg.summary().contains("values of 'shape'"),
        "{}",
        seg.summary()
    );
}

#[test]
fn a_bad_shape_value_is_an_error_naming_the_node() {
    let fast = session(1);
    let e = fast
        .run(inputs(1, [5, 5]))
        .expect_err("24 elements are no 5x5");
    assert!(e.to_string().contains("reshape"), "{e}");
}

/// Three tensors in a sequence, one erased and one inserted at positions that are inputs
/// with defaults, one read back at a third.
const SEQUENCES: &str = r#"graph "seq" {
  input %0 "x": f32[2,3]
  input %1 "y": f32[1,3]
  input %2 "z": f32[3,3]
  input %3 "erase": i64[] = {"dtype":"I64","shape":[],"data":{"I64":[-3]}}
  input %4 "insert": i64[] = {"dtype":"I64","shape":[],"data":{"I64":[-1]}}
  input %5 "at": i64[] = {"dtype":"I64","shape":[],"data":{"I64":[1]}}
  %6 "s1" = sequence.SequenceConstruct (%0, %1, %2) # "construct"
  %7 "s2" = sequence.SequenceErase (%6, %3) # "erase"
  %8 "s3" = sequence.SequenceInsert (%7, %0, %4) # "insert"
  %9 "out" = sequence.SequenceAt (%8, %5) # "at"
  %10 "e" = elementwise.Exp (%9) # "exp"
  output %10
}"#;

#[test]
fn sequences_of_known_structure_run_planned_with_defaulted_positions_baked() {
    let (fast, oracle) = (load(SEQUENCES, 1), load(SEQUENCES, 0));
    let t = |shape: Vec<usize>, base: f32| {
        let n = shape.iter().product::<usize>();
        let v = (0..n).map(|i| base + i as f32 / 8.0).collect();
        Value::Tensor(Tensor::from_f32(shape, v).expect("tensor"))
    };
    let mut feed = HashMap::from([
        ("x".to_string(), t(vec![2, 3], 0.0)),
        ("y".to_string(), t(vec![1, 3], 1.0)),
        ("z".to_string(), t(vec![3, 3], 2.0)),
    ]);
    // Defaults: [x, y, z] -> [y, z] -> [y, x, z] -> x. Given: at 2 reads z.
    for given in [None, Some(2i64)] {
        if let Some(at) = given {
            let at = Tensor::from_i64_vec(vec![], vec![at]).expect("at");
            feed.insert("at".to_string(), Value::Tensor(at));
        }
        let got = fast.run(feed.clone()).expect("run");
        let want = oracle.run(feed.clone()).expect("reference run");
        let (g, w) = (
            got[0].1.as_tensor().expect("tensor"),
            want[0].1.as_tensor().expect("tensor"),
        );
        assert_eq!(g.shape(), w.shape(), "at {given:?}");
        assert_eq!(g.shape(), [[2, 3], [3, 3]][given.is_some() as usize]);
        for (a, b) in g.to_f64().unwrap().iter().zip(w.to_f64().unwrap()) {
            assert!((a - b).abs() <= 1e-6 * b.abs(), "{a} vs {b}");
        }
        // The tail was compiled whole: one kernel plan, nothing on the reference executor.
        let lines = fast.last_plan().expect("a plan").describe().join("\n");
        assert!(!lines.contains("reference executor"), "{lines}");
    }
}
