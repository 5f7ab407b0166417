//! Every hostile input of the hardening list gets its exact error kind, and nothing panics:
//! truncated and random bytes, cycles, external data leaving the model's folder (by `..`,
//! an absolute path or a symlink) or shorter than declared, allocation bombs, overflowing
//! shapes, endless loops (deadline and cancel), unknown ops and domains, deep nesting that
//! is valid and must run, and each limit of `SessionOptions`.

use prost::Message;
use smelt_fuzz::hostile;
use smelt_ir::{ErrorKind, Result, Tensor, Value};
use smelt_onnx::proto::ModelProto;
use smelt_runtime::{CancelToken, RunOptions, Session, SessionOptions};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smelt-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir(name).join("model.onnx");
    std::fs::write(&p, bytes).expect("write model");
    p
}

fn x() -> HashMap<String, Value> {
    let t = Tensor::from_f32(vec![2, 3], vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]).unwrap();
    HashMap::from([("x".to_string(), Value::Tensor(t))])
}

fn opts(level: u8) -> SessionOptions {
    SessionOptions {
        opt_level: level,
        ..Default::default()
    }
}

/// Loads and runs a model file on `x`, failing the test on a panic.
fn run_file(path: &Path, o: &SessionOptions, run: &RunOptions) -> Result<Vec<(String, Value)>> {
    catch_unwind(AssertUnwindSafe(|| {
        let s = Session::load_with(path, o)?;
        s.run_with(x(), run)
    }))
    .unwrap_or_else(|_| panic!("{} panicked", path.display()))
}

fn run_model(name: &str, m: &ModelProto, o: &SessionOptions) -> Result<Vec<(String, Value)>> {
    run_file(&write(name, &m.encode_to_vec()), o, &RunOptions::default())
}

fn kind(name: &str, m: &ModelProto, o: &SessionOptions) -> ErrorKind {
    match run_model(name, m, o) {
        Ok(_) => panic!("{name}: expected an error"),
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "{name}: not one line: {e}");
            e.kind()
        }
    }
}

fn both_levels(name: &str, m: &ModelProto, want: ErrorKind) {
    for level in [0, 1] {
        assert_eq!(kind(name, m, &opts(level)), want, "{name} at level {level}");
    }
}

#[test]
fn truncated_and_random_bytes_are_invalid_models() {
    let bytes = hostile::relu().encode_to_vec();
    for cut in 0..bytes.len() {
        if let Err(e) = run_file(
            &write("cut", &bytes[..cut]),
            &opts(1),
            &RunOptions::default(),
        ) {
            assert_eq!(e.kind(), ErrorKind::InvalidModel, "cut at {cut}: {e}");
        }
    }
    let mut rng = smelt_bench_rng(7);
    for i in 0..200 {
        let n = (rng() % 300) as usize;
        let junk: Vec<u8> = (0..n).map(|_| rng() as u8).collect();
        if let Err(e) = run_file(&write("junk", &junk), &opts(1), &RunOptions::default()) {
            assert!(
                matches!(e.kind(), ErrorKind::InvalidModel | ErrorKind::Unsupported),
                "junk {i}: {e}"
            );
        }
    }
}

fn smelt_bench_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[test]
fn cycles_are_invalid_models() {
    both_levels("cycle", &hostile::cycle(), ErrorKind::InvalidModel);
}

#[test]
fn unknown_ops_and_domains_are_unsupported() {
    both_levels(
        "op",
        &hostile::unknown("NoSuchOp", ""),
        ErrorKind::Unsupported,
    );
    both_levels(
        "domain",
        &hostile::unknown("Relu", "com.example.nowhere"),
        ErrorKind::Unsupported,
    );
}

#[test]
fn external_data_stays_in_the_model_folder_and_must_be_whole() {
    let d = dir("external");
    let model_dir = d.join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    std::fs::write(d.join("secret.bin"), [0u8; 24]).unwrap();
    std::fs::write(model_dir.join("short.bin"), [0u8; 8]).unwrap();
    std::os::unix::fs::symlink(d.join("secret.bin"), model_dir.join("link.bin")).unwrap();
    let abs = d.join("secret.bin").display().to_string();
    for (loc, len, why) in [
        ("../secret.bin", Some(24), "leaves the model's folder"),
        (abs.as_str(), Some(24), "leaves the model's folder"),
        ("link.bin", Some(24), "leaves the model's folder"),
        ("short.bin", None, "needs"),
        ("short.bin", Some(24), "past the end"),
    ] {
        let p = model_dir.join("model.onnx");
        std::fs::write(&p, hostile::external(loc, len).encode_to_vec()).unwrap();
        let e = run_file(&p, &opts(1), &RunOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidModel, "{loc}: {e}");
        assert!(e.to_string().contains(why), "{loc}: {e}");
        assert!(e.to_string().contains("tensor 'w'"), "{loc}: {e}");
    }
}

#[test]
fn allocation_bombs_are_resource_exhausted() {
    let huge = [1 << 20, 1 << 20, 2, 3];
    for op in ["ConstantOfShape", "Expand"] {
        both_levels(
            op,
            &hostile::shape_bomb(op, &huge),
            ErrorKind::ResourceExhausted,
        );
    }
    both_levels(
        "tile",
        &hostile::shape_bomb("Tile", &[1 << 40, 1 << 20]),
        ErrorKind::ResourceExhausted,
    );
    both_levels(
        "range",
        &hostile::range_bomb(1 << 62),
        ErrorKind::ResourceExhausted,
    );
}

#[test]
fn overflowing_shapes_are_errors() {
    // Element counts past usize: a limit for values computed at run time...
    both_levels(
        "expand-overflow",
        &hostile::shape_bomb("Expand", &[i64::MAX, 2, 3]),
        ErrorKind::ResourceExhausted,
    );
    both_levels(
        "cos-overflow",
        &hostile::shape_bomb("ConstantOfShape", &[1 << 62, 1 << 62]),
        ErrorKind::ResourceExhausted,
    );
    // ...and a malformed model when the file itself declares them.
    both_levels(
        "init-overflow",
        &hostile::bad_initializer(&[1 << 62, 1 << 62]),
        ErrorKind::InvalidModel,
    );
    both_levels(
        "init-short",
        &hostile::bad_initializer(&[3]),
        ErrorKind::InvalidModel,
    );
    both_levels(
        "reshape-overflow",
        &hostile::shape_bomb("Reshape", &[1 << 62, 1 << 62]),
        ErrorKind::InvalidModel,
    );
}

#[test]
fn endless_loops_stop_at_their_deadline_or_when_cancelled() {
    let p = write("loop", &hostile::endless_loop(i64::MAX).encode_to_vec());
    for level in [0, 1] {
        let mut o = opts(level);
        o.limits.timeout = Some(Duration::from_millis(100));
        let t = Instant::now();
        let e = run_file(&p, &o, &RunOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e}");
        assert!(e.to_string().contains("Loop iteration"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(10));

        let tok = CancelToken::new();
        let run = RunOptions {
            cancel: Some(tok.clone()),
            ..Default::default()
        };
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tok.cancel();
        });
        let e = run_file(&p, &opts(level), &run).unwrap_err();
        canceller.join().unwrap();
        assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    }
    // A loop that ends runs as before.
    let out = run_model("loop3", &hostile::endless_loop(3), &opts(1)).unwrap();
    assert_eq!(out[0].1, x()["x"]);
}

#[test]
fn runs_stop_before_starting_when_cancelled_or_late() {
    let p = write("late", &hostile::chain(4).encode_to_vec());
    for level in [0, 1] {
        let tok = CancelToken::new();
        tok.cancel();
        let run = RunOptions {
            cancel: Some(tok),
            ..Default::default()
        };
        let e = run_file(&p, &opts(level), &run).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);
        let run = RunOptions {
            deadline: Some(Instant::now()),
            ..Default::default()
        };
        let e = run_file(&p, &opts(level), &run).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DeadlineExceeded);
        let run = RunOptions {
            timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        };
        assert!(run_file(&p, &opts(level), &run).is_ok());
    }
}

fn nested_inputs() -> HashMap<String, Value> {
    let mut m = x();
    m.insert(
        "c".into(),
        Value::Tensor(Tensor::from_bools(vec![], vec![true]).unwrap()),
    );
    m
}

#[test]
fn deep_valid_nesting_runs_and_deeper_is_a_limit() {
    for level in [0, 1] {
        let p = write("nest30", &hostile::nested_ifs(30).encode_to_vec());
        let s = Session::load_with(&p, &opts(level)).unwrap();
        let out = s.run(nested_inputs()).unwrap();
        let want = Tensor::from_f32(vec![2, 3], vec![0.0, 2.0, 0.0, 4.0, 0.0, 6.0]).unwrap();
        assert_eq!(out[0].1, Value::Tensor(want), "level {level}");
    }
    let p = write("nest40", &hostile::nested_ifs(40).encode_to_vec());
    let e = Session::load_with(&p, &opts(1)).err().expect("too deep");
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
    let mut o = opts(0);
    o.limits.max_nesting = 5;
    let p = write("nest6", &hostile::nested_ifs(6).encode_to_vec());
    let e = Session::load_with(&p, &o).err().expect("over the limit");
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
    assert!(e.to_string().contains("nest"), "{e}");
}

#[test]
fn the_node_limit_counts_every_node() {
    let mut o = opts(1);
    o.limits.max_nodes = 100;
    assert!(run_model("chain100", &hostile::chain(100), &o).is_ok());
    assert_eq!(
        kind("chain101", &hostile::chain(101), &o),
        ErrorKind::ResourceExhausted
    );
}

#[test]
fn tensor_and_run_limits_hold_on_both_executors() {
    for level in [0, 1] {
        let mut o = opts(level);
        o.limits.max_tensor_bytes = 16;
        assert_eq!(
            kind("tensor", &hostile::chain(3), &o),
            ErrorKind::ResourceExhausted
        );
        let mut o = opts(level);
        o.limits.max_run_bytes = 20;
        let e = run_model("run", &hostile::chain(3), &o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
        let mut o = opts(level);
        o.limits.max_tensor_bytes = 1 << 20;
        o.limits.max_run_bytes = 1 << 20;
        assert!(run_model("fits", &hostile::chain(3), &o).is_ok());
    }
}

/// Inputs for `single` models: x of the given shape.
fn x_of(shape: &[usize]) -> HashMap<String, Value> {
    let n = shape.iter().product();
    let t = Tensor::from_f32(shape.to_vec(), vec![1.0; n]).unwrap();
    HashMap::from([("x".to_string(), Value::Tensor(t))])
}

fn single_kind(name: &str, m: &ModelProto, level: u8, shape: &[usize]) -> ErrorKind {
    let p = write(name, &m.encode_to_vec());
    let r = catch_unwind(AssertUnwindSafe(|| {
        Session::load_with(&p, &opts(level))?.run(x_of(shape))
    }))
    .unwrap_or_else(|_| panic!("{name} panicked"));
    r.err()
        .unwrap_or_else(|| panic!("{name}: expected an error"))
        .kind()
}

/// The mutant campaign's findings, reduced: each panicked or aborted before its fix.
#[test]
fn campaign_findings_are_errors() {
    use hostile::{int_attr, ints_attr, single, str_attr};
    for level in [0, 1] {
        // MaxPool SAME_UPPER with kernel_shape [2^62, 2]: "capacity overflow" building its
        // tap table.
        let attrs = vec![
            str_attr("auto_pad", "SAME_UPPER"),
            ints_attr("kernel_shape", &[1 << 62, 2]),
        ];
        let m = single("MaxPool", &[1, 3, 32, 32], attrs, &["y"]);
        assert_eq!(
            single_kind("maxpool", &m, level, &[1, 3, 32, 32]),
            ErrorKind::InvalidModel
        );
        // Split with num_outputs 2^62 and two outputs: 2^62 dims allocated in shape inference.
        let m = single(
            "Split",
            &[4, 2],
            vec![int_attr("axis", 0), int_attr("num_outputs", 1 << 62)],
            &["a", "b"],
        );
        assert_eq!(
            single_kind("split", &m, level, &[4, 2]),
            ErrorKind::InvalidModel
        );
    }
    // Tile with repeats [2^40, 2^20] on f32[2, 3] aborted allocating its index table.
    both_levels(
        "tile-finding",
        &hostile::shape_bomb("Tile", &[1 << 40, 1 << 20]),
        ErrorKind::ResourceExhausted,
    );
}

/// A fuzz finding: 860 bytes of JPEG 2000 declaring a 32 x 2^21 image took half a minute
/// to decode; its pixels are now checked against the limits before decoding.
#[test]
fn an_image_declaring_more_pixels_than_the_limits_is_refused() {
    use smelt_ir::op::misc::{MiscOp, PixelFormat};
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/regressions/image/jp2-declares-67M-pixels.jp2"
    );
    let bytes = std::fs::read(path).unwrap();
    let t = Tensor::new(
        smelt_ir::DType::U8,
        vec![bytes.len()],
        smelt_ir::Data::U8(bytes.into()),
    )
    .unwrap();
    let mut limits = smelt_ir::Limits::for_memory(1 << 30);
    limits.max_tensor_bytes = 64 << 20;
    let control = std::sync::Arc::new(smelt_ir::RunControl::new(limits, None, None));
    let _entered = control.enter();
    let op = smelt_ir::Op::Misc(MiscOp::ImageDecoder {
        pixel_format: PixelFormat::Rgb,
    });
    let e = smelt_reference::eval_op(&op, &[Some(&t)], 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
    assert!(e.to_string().contains("32x2097152"), "{e}");
}

/// The fuzzers' ONNX findings (fuzz/regressions/onnx), each with its kind: before their
/// fixes they panicked on an overflow (Attention's head count in shape inference, a
/// 2^63-element dim reaching the lowering's strides) or crashed.
#[test]
fn fuzz_regressions_are_errors() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/regressions/onnx");
    for (file, want) in [
        ("attention-head-overflow.onnx", ErrorKind::InvalidModel),
        (
            "lowering-stride-overflow.onnx",
            ErrorKind::ResourceExhausted,
        ),
        // Gemm's C of [0, 4] for a [3, 4] output: the fused epilogue read past C (a
        // segfault on one thread, garbage on two).
        ("gemm-c-not-broadcast.onnx", ErrorKind::InvalidModel),
        // TreeEnsemble with n_targets = 2^62: the oracle's output buffer overflowed. (Its
        // shape rule now finds the [3, 2^62] output against the declared [3, 2] first.)
        ("tree-ensemble-huge-targets.onnx", ErrorKind::InvalidModel),
        // GRU with hidden_size 2^63 - 1: gates x hidden_size overflowed.
        ("rnn-hidden-size-overflow.onnx", ErrorKind::InvalidModel),
        // ConvInteger padded by nearly 2^64: the oracle's padded extent overflowed.
        ("convinteger-pad-overflow.onnx", ErrorKind::InvalidModel),
        // TfIdfVectorizer with an ngram index of 2^63 - 1: its shape rule's index + 1
        // overflowed.
        ("tfidf-ngram-index-overflow.onnx", ErrorKind::InvalidModel),
    ] {
        let p = Path::new(dir).join(file);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let s = Session::load_with(&p, &opts(1))?;
            s.run(smelt_fuzz::inputs::random_inputs(&s.inputs(), 1)?)
        }))
        .unwrap_or_else(|_| panic!("{file} panicked"));
        assert_eq!(r.err().map(|e| e.kind()), Some(want), "{file}");
    }
}

/// A fuzz-smoke finding, replayed as the onnx_run target ran it (its opt level and input
/// seed from the file's length): a reduction of an empty input keeping huge dims made the
/// oracle allocate its output unchecked ("capacity overflow").
#[test]
fn a_reduction_of_an_empty_input_to_a_huge_output_is_an_error() {
    let p = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/regressions/onnx"
    ))
    .join("reduce-empty-input-huge-output.onnx");
    let len = std::fs::read(&p).expect("regression file").len();
    let r = catch_unwind(AssertUnwindSafe(|| {
        let s = Session::load_with(&p, &opts((len % 2) as u8))?;
        s.run(smelt_fuzz::inputs::random_inputs(&s.inputs(), len as u64)?)
    }))
    .unwrap_or_else(|_| panic!("{} panicked", p.display()));
    assert_eq!(
        r.err().map(|e| e.kind()),
        Some(ErrorKind::ResourceExhausted)
    );
}

/// A regression input of fuzz/regressions/onnx, and its length (the fuzz target's seed).
fn regression(name: &str) -> (PathBuf, usize) {
    let p = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/regressions/onnx"
    ))
    .join(name);
    let len = std::fs::read(&p).expect("regression file").len();
    (p, len)
}

/// Loads and runs a regression input as the fuzz target did (random inputs seeded by its
/// length) at `level`, failing the test on a panic.
fn replay(p: &Path, len: usize, level: u8) -> Result<Vec<(String, Value)>> {
    catch_unwind(AssertUnwindSafe(|| {
        let s = Session::load_with(p, &opts(level))?;
        s.run(smelt_fuzz::inputs::random_inputs(&s.inputs(), len as u64)?)
    }))
    .unwrap_or_else(|_| panic!("{} panicked at level {level}", p.display()))
}

/// A campaign finding: a TfIdfVectorizer with max_gram_length near 2^63 over a row of
/// 65,536 tokens tried every gram length up to the row's (hours of work, a fuzz timeout):
/// no gram is longer than the pool's longest, and the walk is bounded. (The file declares
/// its output f32[2^62]; the oracle alone, at level 0, computes its 3 columns; with the
/// passes, shape inference finds the declaration contradicted, an invalid model.)
#[test]
fn a_tfidf_with_a_huge_max_gram_length_counts_only_the_pools_lengths() {
    let (p, len) = regression("tfidf-huge-skip-count.onnx");
    for level in [0, 1] {
        let start = Instant::now();
        let r = replay(&p, len, level);
        if level == 1 {
            let e = r.expect_err("a contradicted declaration");
            assert_eq!(e.kind(), ErrorKind::InvalidModel, "{e}");
            assert!(e.to_string().contains("declared as"), "{e}");
            continue;
        }
        let out = r.unwrap_or_else(|e| panic!("level {level}: {e}"));
        assert_eq!(
            out[0].1.tensor().expect("a tensor").len(),
            3,
            "level {level}"
        );
        // Seconds, not hours (a generous bound: debug build, loaded machine).
        assert!(start.elapsed() < Duration::from_secs(60), "level {level}");
    }
}

/// A fuzz finding: an AveragePool over an empty image (a zero dim) of 2^31 - 1 channels
/// looped over every channel's zero output positions in the oracle (10 s under the fuzzer's
/// coverage, past its 1 s deadline); an empty output is now computed without a loop.
#[test]
fn a_pool_of_an_empty_image_with_huge_channels_is_quick() {
    let (p, len) = regression("avgpool-empty-image-huge-channels.onnx");
    for level in [0, 1] {
        let start = Instant::now();
        let r = replay(&p, len, level);
        if let Ok(out) = &r {
            assert_eq!(
                out[0].1.tensor().expect("a tensor").len(),
                0,
                "level {level}"
            );
        }
        // Well under the fuzz target's second, in a debug build on a loaded machine.
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "level {level}: {r:?}"
        );
    }
}

/// A fuzz finding: a LogSoftmax over [1, 2^31 - 1, 0] (a Reshape of an empty input) made
/// the fused reduction walk its 2^31 empty rows (a minute; the fuzz target timed out).
/// Such an empty shape is now refused wherever it appears (its other axes span more than a
/// tensor may hold): the oracle's Reshape and the compiled plan's buffer both say so.
#[test]
fn a_softmax_of_empty_rows_is_quick() {
    let (p, len) = regression("logsoftmax-empty-rows-huge-dim.onnx");
    for level in [0, 1] {
        let start = Instant::now();
        let r = replay(&p, len, level);
        let e = r.err().unwrap_or_else(|| panic!("level {level} ran"));
        assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "level {level}: {e}");
        assert!(e.to_string().contains("spans 2147483647"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(2), "level {level}");
    }
}

/// A fuzz finding: a ConvTranspose whose kernel_shape has fewer entries than spatial axes
/// indexed past it in shape inference (a panic); the executors name the mismatch.
#[test]
fn a_conv_transpose_kernel_shape_of_the_wrong_rank_is_an_invalid_model() {
    let (p, len) = regression("conv-transpose-kernel-shape-rank.onnx");
    for level in [0, 1] {
        let r = replay(&p, len, level);
        assert_eq!(
            r.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidModel),
            "level {level}"
        );
    }
}

/// A fuzz finding: a Concat of [2^31 - 1, 0] inputs walked its 2^31 empty chunks in the
/// oracle (a fuzz timeout); an empty output takes nothing.
#[test]
fn a_concat_of_empty_inputs_with_a_huge_outer_dim_is_quick() {
    let (p, len) = regression("concat-empty-huge-outer.onnx");
    for level in [0, 1] {
        let start = Instant::now();
        let _ = replay(&p, len, level);
        assert!(start.elapsed() < Duration::from_secs(2), "level {level}");
    }
}

/// A campaign finding: a ConvTranspose whose strides, dilations and output padding make
/// its unpadded output extent overflow i64 panicked in the oracle's size arithmetic.
#[test]
fn a_conv_transpose_whose_output_size_overflows_is_an_invalid_model() {
    let (p, len) = regression("conv-transpose-output-overflow.onnx");
    for level in [0, 1] {
        let r = replay(&p, len, level);
        assert_eq!(
            r.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidModel),
            "level {level}"
        );
    }
}

/// A campaign finding: a max pool in ceil mode over an input dim near 2^63 overflowed
/// shape inference's rounding up (a panic where arithmetic is checked).
#[test]
fn a_ceil_mode_pool_over_a_huge_dim_is_an_invalid_model() {
    let (p, len) = regression("pool-ceil-mode-huge-dim.onnx");
    for level in [0, 1] {
        let r = replay(&p, len, level);
        // The oracle does not infer shapes: there the input's declared 2^63 columns are
        // what cannot be had.
        let want = if level == 0 {
            ErrorKind::ResourceExhausted
        } else {
            ErrorKind::InvalidModel
        };
        assert_eq!(r.err().map(|e| e.kind()), Some(want), "level {level}");
    }
}

/// A campaign finding: a linear Resize whose random scales shrink the image to nothing ran
/// the fused epilogue over empty rows, whose prefetch of the row's last element underflowed
/// (a panic where arithmetic is checked); and a zero scale, which the oracle rejects, was
/// planned as an empty output. The input's zero scale is now an invalid input at every
/// level (and nonzero scales that empty the image give an empty output, at every level).
#[test]
fn a_resize_by_a_zero_scale_is_an_invalid_input_at_every_level() {
    let (p, len) = regression("resize-linear-empty-rows.onnx");
    for level in [0, 1] {
        let r = replay(&p, len, level);
        assert_eq!(
            r.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidInput),
            "level {level}"
        );
    }
    for level in [0, 1] {
        let s = Session::load_with(&p, &opts(level)).expect("loads");
        let mut inputs =
            smelt_fuzz::inputs::random_inputs(&s.inputs(), len as u64).expect("inputs");
        for (name, v) in inputs.iter_mut() {
            if name == "scales" {
                *v = Value::Tensor(
                    Tensor::from_f32(vec![4], vec![1.0, 1.0, 0.25, 0.25]).expect("scales"),
                );
            }
        }
        let out = s
            .run(inputs)
            .unwrap_or_else(|e| panic!("level {level}: {e}"));
        assert_eq!(
            out[0].1.tensor().expect("a tensor").len(),
            0,
            "level {level}"
        );
    }
}

/// A campaign finding: a Reshape whose shape input declares 2^40 elements made shape
/// inference allocate a rank-2^40 shape ("capacity overflow", or an abort under ulimit).
#[test]
fn a_shape_operand_declaring_a_huge_rank_is_no_allocation() {
    let mut m = hostile::shape_bomb("Reshape", &[2, 3]);
    if let Some(g) = m.graph.as_mut() {
        g.initializer.clear();
        g.input.push(hostile::vi(
            "shape",
            smelt_onnx::proto::tensor_proto::data_type::INT64,
            Some(&[1 << 40]),
        ));
    }
    let p = write("reshape-rank", &m.encode_to_vec());
    for level in [0, 1] {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let s = Session::load_with(&p, &opts(level))?;
            s.run(smelt_fuzz::inputs::random_inputs(&s.inputs(), 1)?)
        }))
        .unwrap_or_else(|_| panic!("level {level} panicked"));
        assert_eq!(
            r.err().map(|e| e.kind()),
            Some(ErrorKind::ResourceExhausted)
        );
    }
}

/// A fuzz finding: the memory plan gave a Softmax its input's bytes, and the row kernel's
/// in-place path copied a row onto itself (undefined behaviour that debug builds catch).
/// It now runs in place and matches the oracle.
#[test]
fn a_softmax_sharing_its_input_bytes_matches_the_oracle() {
    let p = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/regressions/onnx"
    ))
    .join("softmax-in-place.onnx");
    let run = |level| {
        let s = Session::load_with(&p, &opts(level)).unwrap();
        let outs = s
            .run(smelt_fuzz::inputs::random_inputs(&s.inputs(), 1).unwrap())
            .unwrap();
        outs.into_iter()
            .map(|(_, v)| v.into_tensor().unwrap().to_f64().unwrap())
            .collect::<Vec<_>>()
    };
    let (fast, oracle) = (run(1), run(0));
    assert_eq!(fast.len(), oracle.len());
    for (a, b) in fast.iter().zip(&oracle) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5, "{x} vs {y}");
        }
    }
}

/// A campaign finding: a Pad whose pads make one output dim near 2^62 built the oracle's
/// per-axis source maps (one entry per output position) before checking the output's
/// size, and filled the machine (a fuzz out-of-memory). The size is checked first now.
#[test]
fn a_pad_to_a_huge_dim_is_refused_before_anything_is_allocated() {
    let (p, len) = regression("pad-huge-output-dim.onnx");
    for level in [0, 1] {
        let start = Instant::now();
        let r = replay(&p, len, level);
        // The oracle meets the huge Pad output; the compiler's constant folding refuses the
        // Add after it first.
        let want = if level == 0 {
            ErrorKind::ResourceExhausted
        } else {
            ErrorKind::InvalidModel
        };
        assert_eq!(r.err().map(|e| e.kind()), Some(want), "level {level}");
        assert!(start.elapsed() < Duration::from_secs(60), "level {level}");
    }
}

/// A campaign finding: an EyeLike over an empty input of 2^62 rows (and no columns) walked
/// every row looking for its diagonal (a fuzz timeout). Only rows whose diagonal lies in
/// the matrix are visited now. The empty input itself is now refused (its 2^62 rows span
/// more than a tensor may hold); the compiler refuses the output's declared 5 columns.
#[test]
fn an_eye_like_over_an_empty_input_with_huge_rows_is_quick() {
    let (p, len) = regression("eyelike-empty-huge-rows.onnx");
    let start = Instant::now();
    assert_eq!(
        replay(&p, len, 0).err().map(|e| e.kind()),
        Some(ErrorKind::ResourceExhausted)
    );
    assert!(start.elapsed() < Duration::from_secs(60));
    assert_eq!(
        replay(&p, len, 1).err().map(|e| e.kind()),
        Some(ErrorKind::InvalidModel)
    );
}

/// A campaign finding: an LSTM whose initial_h has an unknown batch dim, bound at run time
/// to another batch than X's, was indexed past its end by the fast recurrent kernel (a
/// panic). Initial states of the wrong size go to the oracle, which names the mismatch.
#[test]
fn an_lstm_initial_state_of_the_wrong_batch_is_an_error_not_a_panic() {
    let (p, len) = regression("lstm-initial-state-wrong-batch.onnx");
    for level in [0, 1] {
        let r = replay(&p, len, level);
        assert_eq!(
            r.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidModel),
            "level {level}"
        );
    }
}

/// A fuzz finding: a MatMul of [2, 4, 65536, 0] by [2, 4, 0, 65536] made the oracle allocate
/// its 128 GiB output unchecked (an abort); the compiled plan refused it already.
#[test]
fn a_matmul_over_an_empty_inner_axis_to_a_huge_output_is_refused() {
    let (p, len) = regression("matmul-empty-inner-huge-output.onnx");
    for level in [0, 1] {
        let e = replay(&p, len, level).err();
        assert_eq!(
            e.map(|e| e.kind()),
            Some(ErrorKind::ResourceExhausted),
            "level {level}"
        );
    }
}

/// A fuzz finding: a Gather of bool indices [65536, 4, 5, 6] into [3, 4, 5, 6] data: the
/// oracle took the bools as indices and listed the 943 million gathered positions (7.5 GB
/// of usize) before the output's size check. Indices must be integers now, and the list is
/// sized only after the output shape is checked: with int64 indices the same Gather is
/// refused at once under a 64 MiB tensor limit.
#[test]
fn a_gather_to_a_huge_output_is_refused_before_listing_its_positions() {
    let (p, len) = regression("gather-bool-indices-huge-output.onnx");
    for level in [0, 1] {
        let e = replay(&p, len, level).err();
        assert_eq!(
            e.map(|e| e.kind()),
            Some(ErrorKind::InvalidModel),
            "level {level}"
        );
    }
    let mut m = hostile::single("Gather", &[3, 4, 5, 6], vec![], &["y"]);
    let g = m.graph.as_mut().expect("graph");
    g.node[0].input.push("i".into());
    g.input.push(hostile::vi("i", 7, Some(&[65536, 4, 5, 6])));
    let file = write("gather-huge", &m.encode_to_vec());
    let mut o = opts(0);
    o.limits.max_tensor_bytes = 64 << 20;
    let start = Instant::now();
    let r = catch_unwind(AssertUnwindSafe(|| {
        let s = Session::load_with(&file, &o)?;
        let mut inputs = x_of(&[3, 4, 5, 6]);
        let ids = Tensor::from_i64_vec(vec![65536, 4, 5, 6], vec![1; 65536 * 120])?;
        inputs.insert("i".into(), Value::Tensor(ids));
        s.run(inputs)
    }))
    .expect("no panic");
    assert_eq!(
        r.err().map(|e| e.kind()),
        Some(ErrorKind::ResourceExhausted)
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

/// A fuzz finding: a TfIdfVectorizer over 65,536 rows of 99 tokens with 6 skips counted for
/// seconds past the run's 1 s deadline (the deadline was checked only between nodes; in
/// the instrumented build it ran over 10 s). The count checks the deadline as it goes.
#[test]
fn a_long_tfidf_count_stops_at_the_deadline() {
    assert_eq!(
        replay_with_timeout("tfidf-long-count-past-deadline.onnx", 0, 20),
        Some(ErrorKind::DeadlineExceeded)
    );
}

/// Replays a regression file at `level` under a `ms` timeout, as the fuzz target does
/// (its inputs seeded by the file's length): the error's kind, if any.
fn replay_with_timeout(name: &str, level: u8, ms: u64) -> Option<ErrorKind> {
    let (p, len) = regression(name);
    let mut o = opts(level);
    o.limits.timeout = Some(Duration::from_millis(ms));
    let r = catch_unwind(AssertUnwindSafe(|| {
        let s = Session::load_with(&p, &o)?;
        s.run(smelt_fuzz::inputs::random_inputs(&s.inputs(), len as u64)?)
    }))
    .expect("no panic");
    r.err().map(|e| e.kind())
}

/// A regression whose oracle run (level 0) stops at a 20 ms deadline, and that the passes
/// (level 1) reject as an invalid model: its declared output contradicts the shape rule.
fn stops_on_the_oracle_and_is_invalid_with_the_passes(name: &str) {
    assert_eq!(
        replay_with_timeout(name, 0, 20),
        Some(ErrorKind::DeadlineExceeded)
    );
    assert_eq!(
        replay_with_timeout(name, 1, 20_000),
        Some(ErrorKind::InvalidModel)
    );
}

/// A fuzz finding (onnx_run, a slow unit): a GridSample of 65,536 channels over 232 grid
/// points, a 15-million-value output whose declared shape the oracle does not check (the
/// passes reject the model: its declared output contradicts the shape rule). Unchecked it
/// ran 1.2 s in a release build past a 1 s deadline, over 10 s instrumented; the oracle
/// now checks the run every 65,536 taps.
#[test]
fn a_wide_grid_sample_stops_at_the_deadline() {
    stops_on_the_oracle_and_is_invalid_with_the_passes("gridsample-wide-past-deadline.onnx");
}

/// A fuzz finding (onnx_run, a timeout): LRN with `size` 2^40 over 65,536 channels of
/// 5x65536x5x5, each of its 8 million outputs summing all the channels' squares (5e11
/// steps) on the oracle, whose declared output the passes reject. It ran past libFuzzer's
/// 20 s limit instrumented; the oracle now checks the run as each channel's window is
/// summed.
#[test]
fn a_wide_lrn_window_stops_at_the_deadline() {
    stops_on_the_oracle_and_is_invalid_with_the_passes("lrn-wide-window-past-deadline.onnx");
}

/// A review finding: the oracle's misc family (GridSample, Resize, the signal, random and
/// vision ops) capped outputs at 2^31 elements but not at the run's limits; the same wide
/// GridSample, its 15-million-value output counted at the oracle's 8-byte working width,
/// is refused under a 64 MiB tensor limit before it allocates.
#[test]
fn a_wide_grid_sample_is_refused_under_a_small_tensor_limit() {
    let (p, len) = regression("gridsample-wide-past-deadline.onnx");
    let mut o = opts(0);
    o.limits.max_tensor_bytes = 64 << 20;
    let r = catch_unwind(AssertUnwindSafe(|| {
        let s = Session::load_with(&p, &o)?;
        s.run(smelt_fuzz::inputs::random_inputs(&s.inputs(), len as u64)?)
    }))
    .expect("no panic");
    let e = r.expect_err("over the tensor limit");
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
}

/// A fuzz finding (onnx_run, out of memory): MatMulInteger of 65536 x 3 by 3 x 65536, a
/// 16 GiB output the oracle allocated unchecked (its declared [4, 2] output lets the passes
/// reject the model). The oracle now checks the output against the run's limits first.
#[test]
fn a_huge_integer_matmul_is_refused_before_it_allocates() {
    let name = "matmulinteger-huge-output.onnx";
    assert_eq!(
        replay_with_timeout(name, 0, 20_000),
        Some(ErrorKind::ResourceExhausted)
    );
    assert_eq!(
        replay_with_timeout(name, 1, 20_000),
        Some(ErrorKind::InvalidModel)
    );
}

/// A campaign finding (a timeout): an inverse one-sided DFT over 65,536 points, whose
/// 131,070-point lines the oracle summed directly, O(n^2) each (minutes); lengths that are
/// not powers of two now go through Bluestein's chirp-z.
#[test]
fn a_long_dft_of_an_odd_length_is_fast() {
    let (p, len) = regression("dft-irfft-huge-batch.onnx");
    for level in [0, 1] {
        let start = Instant::now();
        let _ = replay(&p, len, level);
        assert!(start.elapsed() < Duration::from_secs(60), "level {level}");
    }
}

/// A campaign finding (a slow unit): a Cast from float8 of 3.4 million elements, whose
/// random input was encoded and output decoded code by code with `powi`, every value
/// searched over all codes; both now go through per-type tables.
#[test]
fn a_cast_of_millions_of_float8_values_is_fast() {
    let (p, len) = regression("cast-fp8-millions.onnx");
    for level in [0, 1] {
        let start = Instant::now();
        let _ = replay(&p, len, level);
        assert!(start.elapsed() < Duration::from_secs(20), "level {level}");
    }
}

/// A campaign finding: RoiAlign with a region of infinite size, whose adaptive sampling grid
/// saturated to 2^64 - 1 samples a side: the count of samples overflowed. It is counted
/// checked now, the outer bins included.
#[test]
fn a_roialign_with_an_unbounded_sampling_grid_is_an_error() {
    let (p, len) = regression("roialign-sample-count-overflow.onnx");
    for (level, want) in [
        (0, ErrorKind::ResourceExhausted),
        (1, ErrorKind::InvalidModel),
    ] {
        let e = replay(&p, len, level).expect_err("an error");
        assert_eq!(e.kind(), want, "level {level}: {e}");
    }
}

/// A campaign finding (a slow unit, rebuilt by hand): MaxPool with a 65536 x 2 window and
/// SAME_LOWER padding over 32 x 32: the oracle walked every kernel position of every window
/// (2^27); it now builds each window from the taps inside the input.
#[test]
fn a_pooling_window_far_wider_than_its_input_is_fast_on_the_oracle() {
    let (p, _) = regression("maxpool-huge-window.onnx");
    let start = Instant::now();
    let out = replay(&p, 0, 0).expect("the oracle pools it");
    assert_eq!(out[0].1.tensor().expect("a tensor").len(), 3 * 32 * 32);
    assert!(start.elapsed() < Duration::from_secs(20));
}
