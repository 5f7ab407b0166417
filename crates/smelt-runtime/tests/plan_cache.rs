//! Plans specialized by input shape: correct results at every shape, no recompilation at
//! a seen shape, the compile log's reasons, concurrent runs, and profiles.

use smelt_ir::{Model, Tensor, Value};
use smelt_runtime::{InputShapes, Session, SessionOptions};
use std::collections::HashMap;

/// x[batch, 4] -> MatMul -> +bias -> Relu -> Softmax, plus a transpose and a reduction.
const GRAPH: &str = r#"graph "g" {
  input %0 "x": f32[batch,4]
  const %1 "w" = {"dtype":"F32","shape":[4,3],"data":{"F32":[0.5,-1.0,0.25,1.5,0.75,-0.5,-0.25,0.125,1.0,2.0,-1.5,0.5]}}
  const %2 "b" = {"dtype":"F32","shape":[3],"data":{"F32":[0.1,-0.2,0.3]}}
  %3 "m" = nn.MatMul (%0, %1) # "mm"
  %4 "a" = elementwise.Add (%3, %2) # "bias"
  %5 "r" = elementwise.Relu (%4) # "relu"
  %6 "s" = reduce.Softmax {"axis":-1,"coerce_2d":false} (%5) # "softmax"
  %7 "t" = layout.Transpose {"perm":[1,0]} (%6) # "tr"
  %8 "e" = elementwise.Exp (%7) # "exp"
  output %6
  output %8
}"#;

fn model() -> Model {
    let graph = smelt_ir::text::parse_graph(GRAPH).expect("parse");
    Model {
        graph,
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    }
}

fn session(level: u8) -> Session {
    Session::from_model_with(
        model(),
        &SessionOptions {
            opt_level: level,
            ..Default::default()
        },
    )
    .expect("compile")
}

/// A session keeping at most `max_plans` plans.
fn small_cache(max_plans: usize) -> Session {
    Session::from_model_with(
        model(),
        &SessionOptions {
            max_plans,
            ..Default::default()
        },
    )
    .expect("session")
}

fn input(batch: usize, seed: u64) -> HashMap<String, Value> {
    let mut s = seed;
    let data: Vec<f32> = (0..batch * 4)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect();
    let t = Tensor::from_f32(vec![batch, 4], data).expect("tensor");
    HashMap::from([("x".to_string(), Value::Tensor(t))])
}

fn outputs(s: &Session, batch: usize, seed: u64) -> Vec<Vec<f64>> {
    s.run(input(batch, seed))
        .expect("run")
        .into_iter()
        .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
        .collect()
}

/// |a - b| <= 1e-6 + 1e-5 |b|: the plan reorders no f32 arithmetic here but uses f32 exp.
fn close(a: &[Vec<f64>], b: &[Vec<f64>]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len());
        for (p, q) in x.iter().zip(y) {
            assert!((p - q).abs() <= 1e-6 + 1e-5 * q.abs(), "{p} vs {q}");
        }
    }
}

#[test]
fn every_shape_is_correct_and_seen_shapes_do_not_recompile() {
    let reference = session(0);
    let s = session(1);
    assert_eq!(
        s.compile_count(),
        0,
        "symbolic inputs compile at the first run"
    );
    for (batch, seed) in [(2, 1), (5, 2), (2, 3), (1, 4), (5, 5), (2, 6)] {
        close(&outputs(&s, batch, seed), &outputs(&reference, batch, seed));
    }
    // Three distinct shapes: three compilations, whatever the order of the runs.
    assert_eq!(s.compile_count(), 3);
    let log = s.compilations();
    assert_eq!(log[0].reason, "first compilation");
    assert!(
        log[1].reason.contains("input 'x' has shape [5,4]"),
        "{}",
        log[1].reason
    );
    let plan = s.last_plan().expect("plan");
    let k = plan.kernels().expect("the graph is planned to kernels");
    // MatMul+Add+Relu, Softmax, Exp: the exp reads the softmax (a graph output, stored
    // once) through transposed strides, over another iteration space.
    assert_eq!(k.groups.len(), 3, "{:#?}", k.groups);
    assert!(
        k.rejected
            .iter()
            .any(|r| r.node == "exp" && r.into == "softmax"),
        "{:?}",
        k.rejected
    );
}

#[test]
fn the_cache_keeps_at_most_max_plans() {
    let s = small_cache(2);
    let reference = session(0);
    for batch in [1, 2, 3, 1] {
        close(&outputs(&s, batch, 7), &outputs(&reference, batch, 7));
    }
    // Batch 1 was evicted by batch 3 and compiled again.
    assert_eq!(s.compile_count(), 4);
    assert!(s.compilations()[3].reason.contains("evicted"));
    // Batch 3 is still cached.
    close(&outputs(&s, 3, 8), &outputs(&reference, 3, 8));
    assert_eq!(s.compile_count(), 4);
}

#[test]
fn static_shapes_compile_at_load_and_many_threads_share_a_plan() {
    let s = Session::from_model_with(
        model(),
        &SessionOptions {
            input_shapes: InputShapes::parse(&["x=3x4"]).expect("shape"),
            ..Default::default()
        },
    )
    .expect("compile");
    assert_eq!(s.compile_count(), 1);
    let want = outputs(&session(0), 3, 9);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..20 {
                    close(&outputs(&s, 3, 9), &want);
                }
            });
        }
    });
    assert_eq!(s.compile_count(), 1);
}

#[test]
fn profile_events_name_the_source_nodes() {
    let s = session(1);
    let (_, events) = s.run_profiled(input(2, 1)).expect("run");
    let nodes: Vec<&str> = events
        .iter()
        .flat_map(|e| e.nodes.iter().map(|n| n.as_str()))
        .collect();
    for n in ["mm", "bias", "relu", "softmax", "exp"] {
        assert!(nodes.contains(&n), "{n} missing from {nodes:?}");
    }
    let trace = smelt_runtime::profile::chrome_trace(&[(0.0, events)]);
    let json: serde_json::Value = serde_json::from_str(&trace).expect("trace is JSON");
    assert_eq!(json["traceEvents"][0]["ph"], "X");
    assert!(json["traceEvents"][0]["args"]["onnx_nodes"].is_array());
}

#[test]
fn a_wrong_shape_for_a_static_input_names_the_input() {
    let err = Session::from_model_with(
        model(),
        &SessionOptions {
            input_shapes: InputShapes::parse(&["x=3x5"]).expect("shape"),
            ..Default::default()
        },
    )
    .err()
    .expect("an error");
    assert!(err.to_string().contains("input 'x'"), "{err}");
    assert_eq!(err.kind(), smelt_ir::ErrorKind::InvalidInput, "{err}");
}

#[test]
fn runs_at_one_new_shape_compile_it_once() {
    let s = session(1);
    let want = outputs(&session(0), 6, 3);
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                start.wait();
                close(&outputs(&s, 6, 3), &want);
            });
        }
    });
    assert_eq!(s.compile_count(), 1, "{:?}", s.compilations());
}

#[test]
fn idle_arenas_are_given_back() {
    let s = session(1);
    let want = outputs(&session(0), 3, 2);
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| close(&outputs(&s, 3, 2), &want));
        }
    });
    let plan = s.last_plan().expect("plan");
    assert!(plan.idle_arenas() >= 1);
    assert!(s.release_idle_arenas() > 0);
    assert_eq!(plan.idle_arenas(), 0);
    // The plan still runs, with a fresh arena.
    close(&outputs(&s, 3, 2), &want);
    assert_eq!(plan.idle_arenas(), 1);
}

#[test]
fn the_compile_log_is_bounded() {
    let s = small_cache(2);
    for batch in 1..=300 {
        s.run(input(batch, 1)).expect("run");
    }
    assert_eq!(s.compile_count(), 300);
    let log = s.compilations();
    assert_eq!(log.len(), 256);
    assert!(log[255].reason.contains("[300,4]"), "{}", log[255].reason);
}
