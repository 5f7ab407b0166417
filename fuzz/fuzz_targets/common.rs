//! What the ONNX targets share: tight limits, so a fuzzed model fails fast instead of
//! filling the machine, and the structure-aware mutator.

use smelt_ir::Limits;
use std::time::Duration;

/// Limits for one fuzz input: 64 MiB per tensor, 256 MiB per run, 1 s per run.
pub fn limits() -> Limits {
    let mut l = Limits::for_memory(1 << 30);
    l.max_tensor_bytes = 64 << 20;
    l.max_run_bytes = 256 << 20;
    l.max_nodes = 10_000;
    l.timeout = Some(Duration::from_secs(1));
    l
}

#[allow(dead_code)] // Used by the ONNX targets only.
/// The structure-aware mutation of an ONNX model, or libFuzzer's own when the bytes do
/// not decode (or the mutant does not fit).
pub fn mutate(data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    if seed % 4 != 0 {
        if let Some(m) = smelt_fuzz::mutate_bytes(&data[..size], seed as u64) {
            if m.len() <= max_size {
                data[..m.len()].copy_from_slice(&m);
                return m.len();
            }
        }
    }
    libfuzzer_sys::fuzzer_mutate(data, size, max_size)
}
