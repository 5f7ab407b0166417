//! One backend-test case: discovery on disk, and running it in this process.

use super::compare::{compare, Tolerance};
use smelt_ir::{err, Error, Result, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Finds every case folder (one holding `model.onnx`) under the given paths, sorted.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(err!(Io, "{}: no such file or folder", p.display()));
        }
        walk(p, &mut out)?;
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn walk(p: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if p.is_file() {
        if p.file_name().is_some_and(|n| n == "model.onnx") {
            if let Some(parent) = p.parent() {
                out.push(parent.to_path_buf());
            }
        }
        return Ok(());
    }
    if p.join("model.onnx").is_file() {
        out.push(p.to_path_buf());
        return Ok(());
    }
    let rd = std::fs::read_dir(p).map_err(|e| err!(Io, "{}: {e}", p.display()))?;
    let mut entries: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for e in entries {
        walk(&e, out)?;
    }
    Ok(())
}

/// The outcome of one case.
pub enum Outcome {
    /// Every data set matched.
    Pass,
    /// An output differs from the expected one.
    Mismatch(String),
    /// smelt stopped with an error (of some kind).
    Error(Error),
    /// Nothing to compare (no data sets).
    Skip(String),
}

/// Runs every data set of a case and compares the outputs.
pub fn run_case(dir: &Path, tol: Tolerance, options: &SessionOptions) -> Outcome {
    try_case(dir, tol, options).unwrap_or_else(Outcome::Error)
}

fn try_case(dir: &Path, tol: Tolerance, options: &SessionOptions) -> Result<Outcome> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| err!(Io, "{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("test_data_set_"))
        })
        .collect();
    sets.sort();
    if sets.is_empty() {
        return Ok(Outcome::Skip("no test_data_set folders".into()));
    }
    let session = Session::load_with(&dir.join("model.onnx"), options)?;
    let inputs_sig = session.inputs();
    let outputs_sig = session.outputs();
    for set in &sets {
        let set_name = set
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let required: Vec<_> = inputs_sig.iter().filter(|i| i.required).collect();
        let mut inputs = HashMap::new();
        for (j, path) in numbered(set, "input_")?.into_iter().enumerate() {
            // Positional: the j-th input without a default (backend-test convention), or by name.
            let bytes = std::fs::read(&path).map_err(|e| err!(Io, "{}: {e}", path.display()))?;
            let name = pb_name(&bytes);
            let info = inputs_sig
                .iter()
                .find(|i| Some(i.name.as_str()) == name.as_deref())
                .or_else(|| required.get(j).copied())
                .or_else(|| inputs_sig.get(j))
                .ok_or_else(|| {
                    err!(
                        InvalidInput,
                        "{set_name}: input_{j}.pb has no matching model input"
                    )
                })?;
            let v = smelt_onnx::decode_value_file(&bytes, info.ty.as_ref())
                .map_err(|e| e.context(path.display().to_string()))?;
            inputs.insert(info.name.clone(), v);
        }
        let outputs = session
            .run(inputs)
            .map_err(|e| e.context(set_name.clone()))?;
        let expected = numbered(set, "output_")?;
        if expected.len() != outputs.len() {
            return Ok(Outcome::Mismatch(format!(
                "{set_name}: model has {} outputs, data set has {}",
                outputs.len(),
                expected.len()
            )));
        }
        for (j, path) in expected.iter().enumerate() {
            let bytes = std::fs::read(path).map_err(|e| err!(Io, "{}: {e}", path.display()))?;
            let want: Value = smelt_onnx::decode_value_file(&bytes, outputs_sig[j].ty.as_ref())?;
            if let Err(m) = compare(&outputs[j].1, &want, tol) {
                let name = &outputs[j].0;
                return Ok(Outcome::Mismatch(format!(
                    "{set_name} output '{name}': {m}"
                )));
            }
        }
    }
    Ok(Outcome::Pass)
}

fn numbered(set: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(set)
        .map_err(|e| err!(Io, "{}: {e}", set.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let n = p.file_name()?.to_string_lossy().into_owned();
            let idx = n.strip_prefix(prefix)?.strip_suffix(".pb")?.parse().ok()?;
            Some((idx, p))
        })
        .collect();
    v.sort();
    Ok(v.into_iter().map(|(_, p)| p).collect())
}

/// The `name` field (tag 1, a string in Tensor/Sequence/Optional protos... tag 8 in TensorProto).
fn pb_name(bytes: &[u8]) -> Option<String> {
    use prost::Message;
    let t = smelt_onnx::proto::TensorProto::decode(bytes).ok()?;
    (!t.name.is_empty()).then_some(t.name)
}
