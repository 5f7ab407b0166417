//! Subgraphs compiled as plans: a Loop whose body multiplies its carried state by a captured
//! weight matrix runs its body on kernels (explain says so) and matches the reference
//! executor, which interprets it; a Loop over a few elements stays interpreted, and says
//! why.

use smelt_ir::{Model, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// h <- tanh(h W + b) for `trips` trips, every h also stacked as a scan output. W (`n x n`)
/// and b are the outer graph's inputs, captured by the body.
fn graph(n: usize) -> String {
    format!(
        r#"graph "g" {{
  input %0 "trips": i64[]
  input %1 "h0": f32[4,{n}]
  input %2 "w": f32[{n},{n}]
  input %3 "b": f32[{n}]
  const %4 "cond" = {{"dtype":"Bool","shape":[],"data":{{"Bool":[true]}}}}
  %5 "h", %6 "hs" = control.Loop {{"body":"$graph0"}} (%0, %4, %1) # "loop"
    graph "step" {{
      input %0 "i": i64[]
      input %1 "c": bool[]
      input %2 "h_in": f32[4,{n}]
      capture %3 "w_in": f32[{n},{n}] <- %2
      capture %4 "b_in": f32[{n}] <- %3
      %5 "c_out" = layout.Identity (%1) # "keep"
      %6 "hw" = nn.MatMul (%2, %3) # "matmul"
      %7 "hwb" = elementwise.Add (%6, %4) # "bias"
      %8 "h_out" = elementwise.Tanh (%7) # "tanh"
      %9 "h_scan" = layout.Identity (%8) # "stack"
      output %5, %8, %9
    }}
  output %5
  output %6
}}"#
    )
}

/// The model at `level`; with `const_weights`, W and b are initializers (constants of the
/// outer graph, compiled into the body), not inputs.
fn session(n: usize, level: u8, const_weights: bool) -> Session {
    let mut g = smelt_ir::text::parse_graph(&graph(n)).expect("parse");
    if const_weights {
        let mut given = inputs(n, 0, 1);
        let (w, b) = (g.inputs[2].id, g.inputs[3].id);
        g.inputs.truncate(2);
        for (id, name) in [(w, "w"), (b, "b")] {
            let Some(Value::Tensor(t)) = given.remove(name) else {
                panic!("no {name}")
            };
            g.constants.push(smelt_ir::Constant { id, tensor: t });
        }
    }
    load(g, level)
}

/// A session of the graph `text` writes, at `level`.
fn parsed(text: &str, level: u8) -> Session {
    load(smelt_ir::text::parse_graph(text).expect("parse"), level)
}

/// A session of `g` at `level`.
fn load(g: smelt_ir::Graph, level: u8) -> Session {
    let model = Model {
        graph: g,
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

fn floats(len: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * scale
        })
        .collect()
}

fn inputs(n: usize, trips: i64, seed: u64) -> HashMap<String, Value> {
    let t = |shape: Vec<usize>, v: Vec<f32>| Value::Tensor(Tensor::from_f32(shape, v).expect("t"));
    HashMap::from([
        (
            "trips".to_string(),
            Value::Tensor(Tensor::scalar_i64(trips)),
        ),
        ("h0".to_string(), t(vec![4, n], floats(4 * n, seed, 1.0))),
        (
            "w".to_string(),
            t(vec![n, n], floats(n * n, seed + 1, 2.0 / (n as f32).sqrt())),
        ),
        ("b".to_string(), t(vec![n], floats(n, seed + 2, 0.1))),
    ])
}

/// Runs both sessions and compares every output (the fast tanh and the blocked sums within
/// 1e-4, absolute, of the oracle's: the values lie in [-1, 1]).
fn check(fast: &Session, oracle: &Session, n: usize, trips: i64, seed: u64) {
    let given = |s: &Session| {
        let mut x = inputs(n, trips, seed);
        x.retain(|name, _| s.inputs().iter().any(|i| &i.name == name));
        x
    };
    compare(fast, oracle, given(fast), given(oracle));
}

/// Runs `fast` on `x` and `oracle` on `y` (the same values) and compares every output
/// within 1e-4, absolute.
fn compare(fast: &Session, oracle: &Session, x: HashMap<String, Value>, y: HashMap<String, Value>) {
    let got = fast.run(x).expect("compiled run");
    let want = oracle.run(y).expect("reference run");
    assert_eq!(got.len(), want.len());
    for ((gn, g), (wn, w)) in got.iter().zip(&want) {
        assert_eq!(gn, wn);
        let (g, w) = (
            g.as_tensor().expect("tensor"),
            w.as_tensor().expect("tensor"),
        );
        assert_eq!(g.shape(), w.shape(), "output {gn}");
        let (g, w) = (g.as_f32().expect("f32"), w.as_f32().expect("f32"));
        for (i, (a, b)) in g.iter().zip(w.iter()).enumerate() {
            assert!((a - b).abs() <= 1e-4, "output {gn}[{i}]: {a} vs {b}");
        }
    }
}

#[test]
fn a_loop_body_with_captured_weights_runs_compiled() {
    let n = 96;
    for const_weights in [false, true] {
        let (fast, oracle) = (session(n, 1, const_weights), session(n, 0, const_weights));
        for (trips, seed) in [(7, 1), (1, 2), (0, 3), (12, 4)] {
            check(&fast, &oracle, n, trips, seed);
        }
        let lines = fast.last_plan().expect("a plan").describe().join("\n");
        assert!(
            lines.contains("subgraph 'step': compiled for 1 shape(s), 20 call(s)")
                && lines.contains("kernel groups"),
            "{lines}"
        );
    }
}

#[test]
fn a_loop_over_a_few_elements_stays_interpreted() {
    let n = 3;
    let (fast, oracle) = (session(n, 1, false), session(n, 0, false));
    check(&fast, &oracle, n, 5, 9);
    let lines = fast.last_plan().expect("a plan").describe().join("\n");
    assert!(
        lines.contains("subgraph 'step': on the reference executor (its inputs hold"),
        "{lines}"
    );
}

/// Not a test: prints how long the 256-wide Loop (constant weights, 64 trips) takes a run,
/// for comparing the compiled body with the interpreted one
/// (`SMELT_COMPILE_SUBGRAPHS_MIN=100000000` interprets it). Run with
/// `cargo test --release -p smelt-runtime --test subgraphs -- --ignored --nocapture`.
#[test]
#[ignore]
fn loop_timing_probe() {
    let n = 256;
    let fast = session(n, 1, true);
    for _ in 0..3 {
        let t = std::time::Instant::now();
        for _ in 0..10 {
            let mut x = inputs(n, 64, 1);
            x.retain(|k, _| k == "trips" || k == "h0");
            fast.run(x).expect("run");
        }
        eprintln!(
            "n {n} 64 trips x10: {:.3} ms per run",
            t.elapsed().as_secs_f64() * 100.0
        );
    }
}

/// A Loop inside a Loop's body: the outer body holds a Loop node, so it cannot be planned
/// whole and is interpreted; the inner body, a matrix product, is compiled (once, for all
/// twelve trips); the answers match the oracle's.
#[test]
fn a_nested_loop_matches_the_oracle() {
    let n = 96;
    let text = format!(
        r#"graph "g" {{
  input %0 "trips": i64[]
  input %1 "h0": f32[4,{n}]
  input %2 "w": f32[{n},{n}]
  const %3 "cond" = {{"dtype":"Bool","shape":[],"data":{{"Bool":[true]}}}}
  const %4 "inner_trips" = {{"dtype":"I64","shape":[],"data":{{"I64":[3]}}}}
  %5 "h" = control.Loop {{"body":"$graph0"}} (%0, %3, %1) # "outer"
    graph "outer_step" {{
      input %0 "i": i64[]
      input %1 "c": bool[]
      input %2 "h_in": f32[4,{n}]
      capture %3 "w_in": f32[{n},{n}] <- %2
      capture %4 "k": i64[] <- %4
      capture %5 "c_in": bool[] <- %3
      %6 "c_out" = layout.Identity (%1) # "keep"
      %7 "h_mid" = control.Loop {{"body":"$graph0"}} (%4, %5, %2) # "inner"
        graph "inner_step" {{
          input %0 "j": i64[]
          input %1 "c2": bool[]
          input %2 "x": f32[4,{n}]
          capture %3 "w2": f32[{n},{n}] <- %3
          %4 "c2_out" = layout.Identity (%1) # "keep2"
          %5 "xw" = nn.MatMul (%2, %3) # "mm"
          %6 "x_out" = elementwise.Tanh (%5) # "tanh"
          output %4, %6
        }}
      output %6, %7
    }}
  output %5
}}"#
    );
    let (fast, oracle) = (parsed(&text, 1), parsed(&text, 0));
    let given = || {
        let mut x = inputs(n, 4, 5);
        x.remove("b");
        x
    };
    compare(&fast, &oracle, given(), given());
    let lines = fast.last_plan().expect("a plan").describe().join("\n");
    assert!(
        lines.contains("subgraph 'inner_step': compiled for 1 shape(s), 12 call(s)")
            && lines.contains(
                "subgraph 'outer_step': on the reference executor (it cannot be planned whole)"
            ),
        "{lines}"
    );
}

/// A body that cannot be planned whole (its Slice is bounded by the trip number, so its
/// plan would compile a tail per trip) stays interpreted, and explain says why.
#[test]
fn a_body_in_segments_stays_interpreted() {
    let n = 96;
    let text = format!(
        r#"graph "g" {{
  input %0 "trips": i64[]
  input %1 "h0": f32[64,{n}]
  const %2 "cond" = {{"dtype":"Bool","shape":[],"data":{{"Bool":[true]}}}}
  const %3 "one" = {{"dtype":"I64","shape":[1],"data":{{"I64":[1]}}}}
  %4 "h", %5 "rows" = control.Loop {{"body":"$graph0"}} (%0, %2, %1) # "loop"
    graph "slicer" {{
      input %0 "i": i64[]
      input %1 "c": bool[]
      input %2 "h_in": f32[64,{n}]
      capture %3 "one_in": i64[1] <- %3
      %4 "c_out" = layout.Identity (%1) # "keep"
      %5 "start" = layout.Unsqueeze {{"axes":[0]}} (%0) # "unsq"
      %6 "end" = elementwise.Add (%5, %3) # "end"
      %7 "row" = layout.Slice {{"axes":null,"ends":null,"starts":null}} (%2, %5, %6) # "slice"
      %8 "h_out" = elementwise.Tanh (%2) # "tanh"
      output %4, %8, %7
    }}
  output %4
  output %5
}}"#
    );
    let (fast, oracle) = (parsed(&text, 1), parsed(&text, 0));
    let given = || {
        let mut x = inputs(n, 5, 7);
        x.retain(|k, _| k == "trips");
        let h0 = Tensor::from_f32(vec![64, n], floats(64 * n, 3, 1.0)).expect("h0");
        x.insert("h0".into(), Value::Tensor(h0));
        x
    };
    compare(&fast, &oracle, given(), given());
    let lines = fast.last_plan().expect("a plan").describe().join("\n");
    assert!(
        lines.contains("subgraph 'slicer': on the reference executor (it cannot be planned whole)"),
        "{lines}"
    );
}

/// A run's deadline stops a Loop whose body is compiled: DeadlineExceeded, not a hang; the
/// next run without one still runs the body compiled.
#[test]
fn a_deadline_stops_a_loop_with_a_compiled_body() {
    let n = 96;
    let fast = session(n, 1, true);
    let mut x = inputs(n, 1_000_000, 1);
    x.retain(|k, _| k == "trips" || k == "h0");
    let opts = smelt_runtime::RunOptions {
        timeout: Some(std::time::Duration::from_millis(20)),
        ..Default::default()
    };
    let err = fast
        .run_with(x, &opts)
        .expect_err("a million trips in 20 ms");
    assert_eq!(err.kind(), smelt_ir::ErrorKind::DeadlineExceeded, "{err}");
    let oracle = session(n, 0, true);
    check(&fast, &oracle, n, 3, 2);
    let lines = fast.last_plan().expect("a plan").describe().join("\n");
    assert!(
        lines.contains("subgraph 'step': compiled for 1 shape(s)"),
        "{lines}"
    );
}
