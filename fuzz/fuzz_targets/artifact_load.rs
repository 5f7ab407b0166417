//! The artifact loader: any bytes give a session or an error, and a session that loads
//! runs on zero inputs (or gives an error). An odd first byte makes the rest a manifest
//! and weights (split at the first 0xFF, which JSON never holds) wrapped in a header with
//! the right checksums, so the fuzzer reaches the plan checks behind the checksum.
#![no_main]

mod common;

use smelt_ir::{AlignedBytes, Backing, Dim, Tensor, ValueType};
use smelt_runtime::artifact::format;
use smelt_runtime::{Session, SessionOptions};
use std::sync::Arc;

fn file_of(data: &[u8]) -> Option<Vec<u8>> {
    let (&mode, rest) = data.split_first()?;
    if mode & 1 == 0 {
        return Some(rest.to_vec());
    }
    let cut = rest.iter().position(|&b| b == 0xFF).unwrap_or(rest.len());
    let weights = rest.get(cut + 1..).unwrap_or(&[]);
    format::encode(&rest[..cut], weights).ok()
}

fn zeros(s: &Session) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    for i in s.inputs() {
        if let Some(ValueType::Tensor {
            dtype,
            shape: Some(shape),
        }) = &i.ty
        {
            let dims: Option<Vec<usize>> = shape
                .iter()
                .map(|d| match d {
                    Dim::Known(n) => usize::try_from(*n).ok(),
                    _ => None,
                })
                .collect();
            if let Some(t) = dims.and_then(|d| Tensor::zeros(*dtype, d).ok()) {
                out.push((i.name, t));
            }
        }
    }
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(file) = file_of(data) else { return };
    let Ok(bytes) = AlignedBytes::copy_of(&file) else {
        return;
    };
    let bytes: Arc<dyn Backing> = Arc::new(bytes);
    let options = SessionOptions {
        limits: common::limits(),
        threads: 1,
        verify_weights: data.first().is_some_and(|m| m & 2 != 0),
        ..Default::default()
    };
    // Inputs are allocated within the same limits as the run.
    let control = Arc::new(smelt_ir::RunControl::new(common::limits(), None, None));
    let _entered = control.enter();
    if let Ok(s) = Session::from_artifact(bytes, &options, "fuzz") {
        let inputs = zeros(&s);
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let _ = s.run_ref(&refs);
    }
});
