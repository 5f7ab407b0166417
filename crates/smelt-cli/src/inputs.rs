//! Building model inputs from the command line: `.npy` files, `--shape`, random values.

use smelt_ir::{bail, err, DType, Data, Dim, Result, Tensor, Value, ValueType};
use smelt_runtime::npy;
use smelt_runtime::{InputShapes, IoInfo};
use std::collections::HashMap;
use std::path::PathBuf;

/// Input options shared by commands that run a model.
#[derive(clap::Args, Clone)]
pub struct InputArgs {
    /// An input as NAME=FILE.npy, or NAME=FILE.pb (an ONNX TensorProto, SequenceProto or
    /// MapProto, as the input's type asks) (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub input: Vec<String>,
    /// A concrete input shape as NAME=1x3x224x224 (repeatable), for random inputs.
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shape: Vec<String>,
    /// Fill inputs not given with seeded random values.
    #[arg(long)]
    pub random_inputs: bool,
    /// Seed for --random-inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl InputArgs {
    /// The `--shape` arguments, parsed once (a bad one is an error of kind InvalidInput).
    pub fn shapes(&self) -> Result<InputShapes> {
        parse_shapes(&self.shape)
    }
}

/// Parses `--shape NAME=DIMS` arguments.
pub fn parse_shapes(args: &[String]) -> Result<InputShapes> {
    InputShapes::parse(args).map_err(|e| e.context("--shape"))
}

/// The inputs for a run: files first, then random values for the rest when asked, shaped
/// by `shapes` (checked against the model by the session) where given.
pub fn build_inputs(
    sig: &[IoInfo],
    a: &InputArgs,
    shapes: &InputShapes,
) -> Result<HashMap<String, Value>> {
    let mut out = HashMap::new();
    for spec in &a.input {
        let (name, file) = spec
            .rsplit_once('=')
            .ok_or_else(|| err!(InvalidInput, "--input {spec}: expected NAME=FILE.npy"))?;
        let Some(info) = sig.iter().find(|s| s.name == name) else {
            let known: Vec<&str> = sig.iter().map(|s| s.name.as_str()).collect();
            bail!(
                InvalidInput,
                "--input {spec}: the model has no input '{name}' (inputs: {})",
                known.join(", ")
            );
        };
        let path = PathBuf::from(file);
        let value = if path.extension().is_some_and(|e| e == "pb") {
            let bytes = std::fs::read(&path)
                .map_err(|e| err!(Io, "cannot read {}: {e}", path.display()))?;
            smelt_onnx::decode_value_file(&bytes, info.ty.as_ref())
                .map_err(|e| e.context(file.to_string()))?
        } else {
            Value::Tensor(npy::read(&path)?)
        };
        out.insert(name.to_string(), value);
    }
    let mut rng = SplitMix::new(a.seed);
    let mut symbols: HashMap<String, i64> = HashMap::new();
    let missing: Vec<&IoInfo> = sig
        .iter()
        .filter(|s| s.required && !out.contains_key(&s.name))
        .collect();
    for s in missing {
        if !a.random_inputs {
            bail!(
                InvalidInput,
                "missing required input '{}' (give --input {}=FILE.npy, or --random-inputs)",
                s.name,
                s.name
            );
        }
        let Some(ValueType::Tensor { dtype, shape }) = &s.ty else {
            bail!(
                InvalidInput,
                "input '{}' is not a tensor with a known type; give it with --input",
                s.name
            );
        };
        let dims = match (shapes.get(&s.name), shape) {
            (Some(d), _) => d.to_vec(),
            (None, Some(shape)) => concrete(shape, &s.name, &mut symbols)?,
            (None, None) => bail!(
                InvalidInput,
                "input '{}' has an unknown shape; give --shape {}=DIMS",
                s.name,
                s.name
            ),
        };
        out.insert(
            s.name.clone(),
            Value::Tensor(random_tensor(*dtype, dims, &mut rng)?),
        );
    }
    Ok(out)
}

fn concrete(shape: &[Dim], name: &str, symbols: &mut HashMap<String, i64>) -> Result<Vec<usize>> {
    shape
        .iter()
        .map(|d| match d {
            Dim::Known(n) => Ok(*n as usize),
            Dim::Sym(smelt_ir::DimExpr::Sym(s)) => {
                let v = *symbols.entry(s.clone()).or_insert_with(|| {
                    errln!("note: input '{name}': symbolic dimension '{s}' set to 1 (use --shape to choose)");
                    1
                });
                Ok(v as usize)
            }
            other => d
                .eval(symbols)
                .map(|v| v as usize)
                .ok_or_else(|| err!(InvalidInput, "input '{name}': cannot choose a value for dimension {other}; give --shape")),
        })
        .collect()
}

/// Per input, the smallest constant table it indexes (see `smelt_bench::indices`); an
/// artifact has no graph to look at, so it records them when compiled.
pub fn index_limits(session: &smelt_runtime::Session) -> HashMap<String, i64> {
    match session.artifact() {
        Some(a) => a.index_limits.clone(),
        None => smelt_bench::indices::index_limits(&session.model().graph),
    }
}

/// The seeded generator random inputs are drawn from (the bench crate's splitmix64).
pub use smelt_bench::rng::Rng as SplitMix;

/// A random tensor: floats uniform in [0, 1), integers in [0, 10), random booleans. Its
/// size is checked against the running thread's limits before anything is allocated.
pub fn random_tensor(dtype: DType, shape: Vec<usize>, rng: &mut SplitMix) -> Result<Tensor> {
    use smelt_ir::limits::{check_shape, try_vec};
    let what = || format!("a random {dtype} input {shape:?}");
    let n = check_shape(dtype, &shape, &what)?;
    if dtype == DType::Bool {
        let mut v = try_vec(n, false, &what)?;
        v.iter_mut().for_each(|b| *b = rng.next_u64() & 1 == 1);
        return Tensor::new(dtype, shape, Data::Bool(v.into()));
    }
    if dtype == DType::Str {
        let mut v = try_vec(n, String::new(), &what)?;
        v.iter_mut()
            .enumerate()
            .for_each(|(i, s)| *s = format!("s{i}"));
        return Tensor::new(dtype, shape, Data::Str(v.into()));
    }
    if dtype == DType::F32 {
        // The same values as through f64 below, without the f64 copy.
        let mut v = try_vec(n, 0f32, &what)?;
        for x in v.iter_mut() {
            // One draw at a time: vectorized for a CPU without 64-bit vector multiplies
            // (this binary's baseline), LLVM's emulated ones took 5 ns a float.
            *x = std::hint::black_box(rng.next_f64()) as f32;
        }
        return Tensor::from_f32(shape, v);
    }
    let mut v = try_vec(n, 0f64, &what)?;
    if dtype.is_int() {
        v.iter_mut().for_each(|x| *x = (rng.next_u64() % 10) as f64);
    } else {
        v.iter_mut().for_each(|x| *x = rng.next_f64());
    }
    Tensor::from_f64(dtype, shape, &v)
}

/// Makes a random input plausible for the model: an input named like a mask becomes ones,
/// and integers that index a constant table (`limits`, from `smelt_bench::indices`) stay
/// below its size. Returns how the values were chosen.
pub fn make_plausible(
    name: &str,
    t: &mut Tensor,
    limits: &HashMap<String, i64>,
    rng: &mut SplitMix,
) -> Result<String> {
    if smelt_bench::indices::is_mask(name) && t.dtype() != DType::Str {
        let ones = smelt_ir::limits::try_vec(t.len(), 1.0, &|| format!("input '{name}'"))?;
        *t = Tensor::from_f64(t.dtype(), t.shape().to_vec(), &ones)?;
        return Ok("ones (mask)".to_string());
    }
    if let (true, Some(&limit)) = (t.dtype().is_int(), limits.get(name)) {
        let mut v = smelt_ir::limits::try_vec(t.len(), 0.0, &|| format!("input '{name}'"))?;
        v.iter_mut()
            .for_each(|x| *x = (rng.next_u64() % limit.max(1) as u64) as f64);
        *t = Tensor::from_f64(t.dtype(), t.shape().to_vec(), &v)?;
        return Ok(format!(
            "random in [0, {limit}) (indexes a table of {limit})"
        ));
    }
    Ok(if t.dtype().is_int() {
        "random in [0, 10)"
    } else {
        "random in [0, 1)"
    }
    .to_string())
}
