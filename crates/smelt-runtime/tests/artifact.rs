//! Compiled artifacts on the example MLP: the artifact's outputs are the same bits as the
//! model compiled at load, across runs and thread counts; its weights are mapped, not
//! copied; a run at another shape names the input; and damaged files (bytes flipped,
//! truncated, another version, a wrong checksum, a well-checksummed but hostile manifest)
//! are errors, never panics. A bucketed artifact runs every batch up to its largest like
//! the model; a memory budget names what does not fit; a thread cap holds.

use smelt_ir::{with_data, AlignedBytes, Backing, ErrorKind, Tensor, Value};
use smelt_runtime::artifact::format::{self, Header, Manifest};
use smelt_runtime::artifact::{write, CompileInfo};
use smelt_runtime::{InputShapes, Session, SessionOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn mlp() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp/model.onnx")
}

fn options(threads: usize) -> SessionOptions {
    let mut shapes = InputShapes::new();
    shapes.set("x", vec![3, 16]);
    SessionOptions {
        input_shapes: shapes,
        threads,
        ..Default::default()
    }
}

/// The artifact of the MLP at x=[3,16].
fn compile(deterministic: bool) -> (Session, Vec<u8>) {
    let s = Session::load_with(&mlp(), &options(2)).expect("compile");
    let plan = s.last_plan().expect("plan");
    let info = CompileInfo {
        target: "native".into(),
        deterministic,
        ..Default::default()
    };
    let bytes = write::encode(&s, &plan, &info).expect("encode");
    (s, bytes)
}

fn from_bytes(b: &[u8], o: &SessionOptions) -> smelt_ir::Result<Session> {
    let file: Arc<dyn Backing> = Arc::new(AlignedBytes::copy_of(b)?);
    Session::from_artifact(file, o, "test")
}

fn x() -> Tensor {
    let v = (0..48).map(|i| (i as f32 * 0.61).sin() * 3.0).collect();
    Tensor::from_f32(vec![3, 16], v).expect("x")
}

fn bits(s: &Session) -> Vec<u32> {
    let out = s.run_ref(&[("x", &x())]).expect("run");
    let Value::Tensor(t) = &out[0].1 else {
        panic!("not a tensor")
    };
    t.as_f32()
        .expect("f32")
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smelt-artifact-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d.join(name)
}

#[test]
fn artifact_runs_bit_identical_to_compile_at_load() {
    let (jit, bytes) = compile(true);
    let want = bits(&jit);
    let path = tmp("mlp.smelt");
    std::fs::write(&path, &bytes).expect("write");
    for threads in [1, 2] {
        let jit_t = Session::load_with(&mlp(), &options(threads)).expect("jit");
        assert_eq!(bits(&jit_t), want, "compile at load, {threads} thread(s)");
        // By magic, not by extension: the file loads through the ONNX entry point.
        let s = Session::load_with(&path, &options(threads)).expect("load");
        assert!(s.artifact().is_some_and(|a| a.deterministic));
        // Every packed weight came from the file, none was packed at load.
        let (taken, stored) = s.artifact().expect("artifact").prepacked;
        assert!(
            stored >= 2 && taken == stored,
            "{taken} of {stored} packs mapped"
        );
        assert_eq!(bits(&s), want, "artifact, {threads} thread(s)");
        assert_eq!(bits(&s), want, "artifact, second run");
        assert_eq!(s.compile_count(), 1);
        let plan = s.last_plan().expect("plan");
        let mapped = (0..)
            .map_while(|i| plan.weight(i))
            .filter(|w| with_data!(w.data(), v => v.is_window()))
            .count();
        assert!(mapped >= 4, "only {mapped} weights are mapped");
    }
    let path2 = tmp("mlp.bin");
    std::fs::copy(&path, &path2).expect("copy");
    assert!(Session::load_with(&path2, &SessionOptions::default()).is_ok());
}

#[test]
fn packs_that_do_not_match_are_packed_again() {
    let (jit, bytes) = compile(true);
    let want = bits(&jit);
    let (h, mut m) = manifest_of(&bytes);
    let n = m.packed.len();
    assert!(n >= 2, "{n} packs");
    // A pack under another key, and one of another length: both packed at load instead.
    m.packed[0].key.push('x');
    m.packed[1].floats -= 1;
    let s = from_bytes(&reencode(&bytes, &h, &m), &options(1)).expect("load");
    assert_eq!(s.artifact().expect("artifact").prepacked, (n - 2, n));
    assert_eq!(bits(&s), want);
}

#[test]
fn other_shapes_and_isas_are_clear_errors() {
    let (_, bytes) = compile(false);
    let s = from_bytes(&bytes, &SessionOptions::default()).expect("load");
    let x5 = Tensor::from_f32(vec![5, 16], vec![0.0; 80]).expect("x");
    let e = s.run_ref(&[("x", &x5)]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("'x'"), "{e}");
    let mut o = options(1);
    o.input_shapes.set("x", vec![4, 16]);
    let e = from_bytes(&bytes, &o)
        .err()
        .expect("shape mismatch at load");
    assert!(e.to_string().contains("'x'"), "{e}");
    let other = smelt_kernels::Isa::ALL
        .into_iter()
        .find(|i| {
            Some(i.name())
                != s.last_plan()
                    .and_then(|p| p.cpu_setup())
                    .map(|c| c.1.name())
        })
        .expect("another ISA");
    let o = SessionOptions {
        isa: Some(other),
        ..Default::default()
    };
    let e = from_bytes(&bytes, &o).err().expect("ISA mismatch");
    assert!(e.to_string().contains(other.name()), "{e}");
    // An artifact for an ISA this CPU lacks names what it lacks.
    let (h, mut m) = manifest_of(&bytes);
    m.isa = "avx512".into();
    let re = reencode(&bytes, &h, &m);
    match from_bytes(&re, &SessionOptions::default()) {
        Err(e) if !smelt_kernels::Isa::Avx512.is_supported() => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            assert!(e.to_string().contains("AVX-512"), "{e}");
        }
        _ => {}
    }
}

fn manifest_of(bytes: &[u8]) -> (Header, Manifest) {
    let h = Header::parse(bytes).expect("header");
    let m = Manifest::parse(h.manifest(bytes)).expect("manifest");
    (h, m)
}

fn reencode(bytes: &[u8], h: &Header, m: &Manifest) -> Vec<u8> {
    let json = serde_json::to_vec(m).expect("json");
    format::encode(&json, &bytes[h.weights_offset..]).expect("encode")
}

/// Loads (and, when it loads, runs) a damaged artifact; it must not panic.
fn survives(b: &[u8], what: &str) -> bool {
    let r = std::panic::catch_unwind(|| match from_bytes(b, &options(1)) {
        Ok(s) => {
            let _ = s.run_ref(&[("x", &x())]);
            true
        }
        Err(_) => false,
    });
    r.unwrap_or_else(|_| panic!("{what}: panicked"))
}

#[test]
fn flipped_and_truncated_files_are_errors() {
    let (_, bytes) = compile(false);
    let h = Header::parse(&bytes).expect("header");
    let checked = h.weights_offset;
    // Every byte of the header and manifest, and a spread of the weights.
    for at in (0..checked).chain((checked..bytes.len()).step_by(7)) {
        let mut b = bytes.clone();
        b[at] ^= 0x41;
        let loaded = survives(&b, &format!("flip at {at}"));
        if at < format::HEADER_LEN + h.manifest_len {
            assert!(
                !loaded,
                "a flip at byte {at} of the header or manifest loaded"
            );
        } else if at >= checked {
            // Weights are checked on request only (mapping stays lazy).
            let o = SessionOptions {
                verify_weights: true,
                ..options(1)
            };
            let e = from_bytes(&b, &o).err().expect("verified weights");
            assert!(e.to_string().contains("weights checksum"), "{e}");
        }
    }
    for cut in (0..bytes.len()).step_by(3) {
        assert!(
            !survives(&bytes[..cut], &format!("cut at {cut}")),
            "cut at {cut} loaded"
        );
    }
    let mut v = bytes.clone();
    v[8..12].copy_from_slice(&(format::FORMAT_VERSION + 1).to_le_bytes());
    let e = from_bytes(&v, &options(1)).err().expect("other version");
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    let mut c = bytes.clone();
    c[60] ^= 1;
    let e = from_bytes(&c, &options(1)).err().expect("wrong checksum");
    assert!(e.to_string().contains("checksum"), "{e}");
}

/// Every integer of the manifest set to other values, the checksums made right: the
/// plan's validation, not the checksum, must stop what is out of bounds.
#[test]
fn hostile_manifests_with_good_checksums_are_errors_or_run() {
    let (_, bytes) = compile(false);
    let (h, m) = manifest_of(&bytes);
    let json: serde_json::Value = serde_json::to_value(&m).expect("json");
    let mut paths = Vec::new();
    numbers(&json, &mut Vec::new(), &mut paths);
    assert!(paths.len() > 50, "{} numbers", paths.len());
    let mut refused = 0;
    for p in &paths {
        for v in [0u64, 1, 7, 1 << 20, u32::MAX as u64, u64::MAX] {
            let mut j = json.clone();
            let slot = p.iter().fold(&mut j, |j, k| match k {
                Key::I(i) => &mut j[*i],
                Key::S(s) => &mut j[s.as_str()],
            });
            *slot = serde_json::Value::from(v);
            let text = serde_json::to_vec(&j).expect("json");
            let b = format::encode(&text, &bytes[h.weights_offset..]).expect("encode");
            if !survives(&b, &format!("{p:?} = {v}")) {
                refused += 1;
            }
        }
    }
    assert!(refused > paths.len(), "only {refused} mutants refused");
}

#[derive(Debug, Clone)]
enum Key {
    I(usize),
    S(String),
}

fn numbers(v: &serde_json::Value, at: &mut Vec<Key>, out: &mut Vec<Vec<Key>>) {
    match v {
        serde_json::Value::Number(n) if n.is_u64() => out.push(at.clone()),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Key::I(i));
                numbers(x, at, out);
                at.pop();
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                at.push(Key::S(k.clone()));
                numbers(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

#[test]
fn sessions_of_one_file_share_its_plan() {
    let (_, bytes) = compile(false);
    let path = tmp("shared.smelt");
    std::fs::write(&path, &bytes).expect("write");
    let a = Session::load_with(&path, &options(1)).expect("a");
    let b = Session::load_with(&path, &options(1)).expect("b");
    let c = Session::load_with(&path, &options(2)).expect("c");
    let plan = |s: &Session| s.last_plan().expect("plan");
    assert!(
        Arc::ptr_eq(&plan(&a), &plan(&b)),
        "a second session re-packed the plan"
    );
    assert!(
        !Arc::ptr_eq(&plan(&a), &plan(&c)),
        "another thread count shared it"
    );
    assert_eq!(bits(&b), bits(&a));
    // Tighter limits are checked against the shared plan too.
    let mut tight = options(1);
    tight.limits.max_run_bytes = 16;
    let e = Session::load_with(&path, &tight)
        .err()
        .expect("over the limit");
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
    // Once no session holds it, the next load maps the file again.
    drop((a, b));
    let d = Session::load_with(&path, &options(1)).expect("d");
    assert_eq!(bits(&d), bits(&c));
}

/// The MLP's artifact with plans for batches 8, 4 and 1 (x is [batch, 16]).
fn bucketed() -> Vec<u8> {
    let s = Session::load_with(&mlp(), &SessionOptions::default()).expect("load");
    let plans: Vec<_> = [8, 4, 1]
        .iter()
        .map(|&b| {
            let mut shapes = InputShapes::new();
            shapes.set("x", vec![b, 16]);
            s.plan_for(&shapes).expect("plan")
        })
        .collect();
    let refs: Vec<&smelt_runtime::Plan> = plans.iter().map(|p| p.as_ref()).collect();
    let info = CompileInfo {
        target: "native".into(),
        ..Default::default()
    };
    write::encode_buckets(&s, &refs, &info).expect("encode")
}

fn rows(n: usize) -> Tensor {
    let v = (0..n * 16).map(|i| (i as f32 * 0.37).cos() * 2.0).collect();
    Tensor::from_f32(vec![n, 16], v).expect("x")
}

fn out_bits(s: &Session, x: &Tensor) -> smelt_ir::Result<(Vec<usize>, Vec<u32>)> {
    let out = s.run_ref(&[("x", x)])?;
    let Value::Tensor(t) = &out[0].1 else {
        panic!("not a tensor")
    };
    let v = t
        .as_f32()
        .expect("f32")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    Ok((t.shape().to_vec(), v))
}

#[test]
fn batch_buckets_run_every_batch_up_to_the_largest_like_the_model() {
    let bytes = bucketed();
    let (_, m) = manifest_of(&bytes);
    assert_eq!(
        m.buckets.iter().map(|b| b.batch).collect::<Vec<_>>(),
        [4, 1]
    );
    // Equal weights are stored once: the file is far smaller than three plans' weights.
    let once = write::encode(
        &Session::load_with(&mlp(), &options(2)).expect("load"),
        &Session::load_with(&mlp(), &options(2))
            .expect("load")
            .last_plan()
            .expect("plan"),
        &CompileInfo::default(),
    )
    .expect("encode");
    assert!(
        bytes.len() < once.len() * 2,
        "{} vs {}",
        bytes.len(),
        once.len()
    );
    let art = from_bytes(&bytes, &options(2)).expect("artifact");
    assert_eq!(art.artifact().expect("fixed").buckets, [1, 4, 8]);
    let jit = Session::load_with(&mlp(), &SessionOptions::default()).expect("jit");
    for n in 1..=8 {
        let x = rows(n);
        let got = out_bits(&art, &x).expect("bucketed run");
        assert_eq!(
            got.0[0], n,
            "batch {n}: the output keeps the real rows only"
        );
        assert_eq!(got, out_bits(&jit, &x).expect("jit run"), "batch {n}");
    }
    let e = out_bits(&art, &rows(9)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("buckets 1, 4, 8"), "{e}");
    // The Value entry point pads and cuts too.
    let mut inputs = std::collections::HashMap::new();
    inputs.insert("x".to_string(), Value::Tensor(rows(3)));
    let out = art.run(inputs).expect("run");
    let Value::Tensor(t) = &out[0].1 else {
        panic!()
    };
    assert_eq!(t.shape()[0], 3);
    // Buckets that do not fall, or a plan whose inputs differ beyond dim 0, are refused.
    let (h, mut m) = manifest_of(&bytes);
    m.buckets.swap(0, 1);
    assert!(from_bytes(&reencode(&bytes, &h, &m), &options(1)).is_err());
    let (h, mut m) = manifest_of(&bytes);
    m.buckets[0].inputs[0].shape[1] = 17;
    assert!(from_bytes(&reencode(&bytes, &h, &m), &options(1)).is_err());
    // A bucket whose stated batch, or an output's dim 0, is not its inputs' batch.
    let (h, mut m) = manifest_of(&bytes);
    m.buckets[0].batch = 3;
    assert!(from_bytes(&reencode(&bytes, &h, &m), &options(1)).is_err());
    let (h, mut m) = manifest_of(&bytes);
    m.outputs[0].shape[0] = 7;
    assert!(from_bytes(&reencode(&bytes, &h, &m), &options(1)).is_err());
}

#[test]
fn memory_budgets_name_what_does_not_fit_and_thread_caps_hold() {
    let (_, bytes) = compile(false);
    let f = smelt_runtime::artifact::budget::Footprint::of(&bytes).expect("footprint");
    assert!(f.weights_section > 0 && f.arenas > 0 && f.outputs == 3 * 4 * f_outputs(&bytes));
    f.check(f.total() as u64).expect("fits exactly");
    let e = f.check(f.total() as u64 - 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
    let msg = e.to_string();
    assert!(msg.contains("largest") && msg.contains("weight '"), "{msg}");
    let capped = write::amend(&bytes, |m| {
        m.max_threads = Some(1);
        m.decisions = vec!["threads: at most 1".into()];
    })
    .expect("amend");
    let s = from_bytes(&capped, &options(2)).expect("load");
    let plan = s.last_plan().expect("plan");
    assert_eq!(plan.cpu_setup().map(|c| c.0), Some(1), "the cap holds");
    assert_eq!(
        s.artifact().expect("fixed").decisions,
        ["threads: at most 1"]
    );
    let zero = write::amend(&bytes, |m| m.max_threads = Some(0)).expect("amend");
    assert!(from_bytes(&zero, &options(2)).is_err());
}

/// Elements per row of the MLP's output.
fn f_outputs(bytes: &[u8]) -> usize {
    let (_, m) = manifest_of(bytes);
    m.outputs[0].shape[1..].iter().product()
}

/// A session of graph `g` with the default options.
fn session_of(g: smelt_ir::Graph) -> Session {
    let model = smelt_ir::Model {
        graph: g,
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    };
    Session::from_model_with(model, &SessionOptions::default()).expect("load")
}

/// What a run reads lies together at the start of the weights section: every small weight
/// and every pack before any large weight (which only a loader that packs again reads),
/// so the large ones are not mapped beside them.
#[test]
fn what_runs_read_comes_before_the_large_weights() {
    let mut g = smelt_ir::text::parse_graph(
        r#"graph "g" {
  input %0 "x": f32[4,128]
  const %1 "w" = {"dtype":"F32","shape":[1],"data":{"F32":[0.0]}}
  const %2 "b" = {"dtype":"F32","shape":[1],"data":{"F32":[0.0]}}
  %3 "y" = nn.MatMul (%0, %1) # "mm"
  %4 "z" = elementwise.Add (%3, %2) # "bias"
  output %4
}"#,
    )
    .expect("parse");
    // A 128 KiB weight (large) and its bias (small), in place of the placeholders.
    let w: Vec<f32> = (0..128 * 256).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..256).map(|i| i as f32 / 256.0).collect();
    for c in &mut g.constants {
        let (shape, data) = if g.values[c.id.0 as usize].name == "w" {
            (vec![128, 256], w.clone())
        } else {
            (vec![256], b.clone())
        };
        c.tensor = Tensor::from_f32(shape, data).expect("tensor");
        g.values[c.id.0 as usize].ty = None;
    }
    let s = session_of(g);
    let plan = s.last_plan().expect("plan");
    let bytes = write::encode(&s, &plan, &CompileInfo::default()).expect("encode");
    let (_, m) = manifest_of(&bytes);
    let (small, large): (Vec<_>, Vec<_>) = m
        .weights
        .iter()
        .map(|w| (w.offset, 4 * w.shape.iter().product::<usize>()))
        .partition(|&(_, bytes)| bytes < format::SMALL_WEIGHT_BYTES);
    assert_eq!(large.len(), 1, "{:?}", m.weights);
    assert!(!m.packed.is_empty(), "the MatMul's weight is packed");
    let read_end = small
        .iter()
        .copied()
        .chain(m.packed.iter().map(|p| (p.offset, 4 * p.floats)))
        .map(|(at, len)| at + len)
        .max()
        .expect("something is read");
    assert!(
        read_end <= large[0].0,
        "read up to {read_end}, large weight at {}",
        large[0].0
    );
    // And it loads and runs to the same bits as the session it came from.
    let x: Vec<f32> = (0..4 * 128).map(|i| (i as f32 * 0.37).sin()).collect();
    let x = Tensor::from_f32(vec![4, 128], x).expect("x");
    let loaded = from_bytes(&bytes, &SessionOptions::default()).expect("load");
    assert_eq!(
        out_bits(&loaded, &x).expect("artifact run"),
        out_bits(&s, &x).expect("session run")
    );
}

/// With batch buckets too: every bucket's small weights and packs come before the large
/// weights, the large weight the buckets share is stored once, and each bucket runs like
/// the session. (Here the buckets share their pack as well; the writer places every
/// bucket's large weights after all buckets' packs, so packs a bucket has of its own come
/// before them too.)
#[test]
fn buckets_keep_what_runs_read_together() {
    let mut g = smelt_ir::text::parse_graph(
        r#"graph "g" {
  input %0 "x": f32[batch,128]
  const %1 "w" = {"dtype":"F32","shape":[1],"data":{"F32":[0.0]}}
  %2 "y" = nn.MatMul (%0, %1) # "mm"
  output %2
}"#,
    )
    .expect("parse");
    let w: Vec<f32> = (0..128 * 256).map(|i| (i % 5) as f32 - 2.0).collect();
    g.constants[0].tensor = Tensor::from_f32(vec![128, 256], w).expect("w");
    g.values[g.constants[0].id.0 as usize].ty = None;
    let s = session_of(g);
    let plans: Vec<_> = [8, 2]
        .iter()
        .map(|&b| {
            let mut shapes = InputShapes::new();
            shapes.set("x", vec![b, 128]);
            s.plan_for(&shapes).expect("plan")
        })
        .collect();
    let refs: Vec<&smelt_runtime::Plan> = plans.iter().map(|p| p.as_ref()).collect();
    let bytes = write::encode_buckets(&s, &refs, &CompileInfo::default()).expect("encode");
    let (_, m) = manifest_of(&bytes);
    let large_at: Vec<usize> = std::iter::once(&m.weights)
        .chain(m.buckets.iter().map(|b| &b.weights))
        .flat_map(|ws| ws.iter())
        .filter(|w| 4 * w.shape.iter().product::<usize>() >= format::SMALL_WEIGHT_BYTES)
        .map(|w| w.offset)
        .collect();
    assert_eq!(large_at.len(), 2, "one large weight per bucket");
    assert_eq!(large_at[0], large_at[1], "stored once");
    let packs_end = std::iter::once(&m.packed)
        .chain(m.buckets.iter().map(|b| &b.packed))
        .flat_map(|ps| ps.iter())
        .map(|p| p.offset + 4 * p.floats)
        .max()
        .expect("packs");
    assert!(
        packs_end <= large_at[0],
        "packs to {packs_end}, large weight at {}",
        large_at[0]
    );
    let loaded = from_bytes(&bytes, &SessionOptions::default()).expect("load");
    for b in [8, 2, 1] {
        let x: Vec<f32> = (0..b * 128).map(|i| (i as f32 * 0.11).cos()).collect();
        let x = Tensor::from_f32(vec![b, 128], x).expect("x");
        assert_eq!(
            out_bits(&loaded, &x).expect("artifact run"),
            out_bits(&s, &x).expect("session run"),
            "batch {b}"
        );
    }
}
