//! Inputs for a fuzzed model: every required tensor input with a declared element type
//! gets seeded values, its symbolic or unknown dims set to 1, allocated within the running
//! thread's limits (so a declared 2^40 dim is a ResourceExhausted error, not an abort).

use smelt_bench::rng::Rng;
use smelt_ir::limits::{check_shape, try_vec};
use smelt_ir::{DType, Dim, Result, Tensor, Value, ValueType};
use smelt_runtime::IoInfo;
use std::collections::HashMap;

/// Seeded inputs for a model's signature (inputs that are not tensors are left out).
pub fn random_inputs(sig: &[IoInfo], seed: u64) -> Result<HashMap<String, Value>> {
    let mut rng = Rng::new(seed);
    let mut out = HashMap::new();
    for i in sig.iter().filter(|i| i.required) {
        let Some(ValueType::Tensor { dtype, shape }) = &i.ty else {
            continue;
        };
        let dims: Vec<usize> = match shape {
            Some(s) => s
                .iter()
                .map(|d| match d {
                    Dim::Known(n) => usize::try_from(*n).unwrap_or(usize::MAX),
                    _ => 1,
                })
                .collect(),
            None => vec![1],
        };
        let what = || format!("input '{}'", i.name);
        let n = check_shape(*dtype, &dims, &what)?;
        let t = match dtype {
            DType::Str => {
                let v = try_vec(n, "s".to_string(), &what)?;
                Tensor::from_strings(dims, v)?
            }
            _ => {
                let mut v = try_vec(n, 0f64, &what)?;
                for x in v.iter_mut() {
                    *x = (rng.next_u64() % 5) as f64;
                }
                Tensor::from_f64(*dtype, dims, &v)?
            }
        };
        out.insert(i.name.clone(), Value::Tensor(t));
    }
    Ok(out)
}
