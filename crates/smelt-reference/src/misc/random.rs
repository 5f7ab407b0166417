//! Random ops: Bernoulli, RandomUniform(Like), RandomNormal(Like), Multinomial.
//!
//! Draws come from a SplitMix64 generator: seeded runs repeat, but the values cannot match
//! onnxruntime's or numpy's generators, so only shapes and distributions are comparable.

use super::super::{one, Inputs};
use super::{from_f64_rounded, out_numel};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, ensure, DType, Result, Tensor, Value};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0x853c_49e6_748f_ea9b);

struct Rng(u64);

impl Rng {
    fn new(seed: Option<f32>) -> Rng {
        match seed {
            Some(s) if !s.is_nan() => Rng((s as f64).to_bits() ^ 0x9e37_79b9_7f4a_7c15),
            _ => {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0);
                Rng(t ^ COUNTER.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed))
            }
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

fn shape_of(shape: &[i64]) -> Result<Vec<usize>> {
    ensure!(
        shape.iter().all(|&d| d >= 0),
        InvalidModel,
        "negative dimension in shape {shape:?}"
    );
    Ok(shape.iter().map(|&d| d as usize).collect())
}

fn float_type(d: DType) -> Result<DType> {
    ensure!(
        d.is_float(),
        Unsupported,
        "random values need a float type, got {d}"
    );
    Ok(d)
}

/// Runs one random op.
pub fn run(op: &MiscOp, x: &Inputs) -> Result<Vec<Value>> {
    match op {
        MiscOp::Bernoulli { dtype, seed } => {
            let t = x.tensor(0)?;
            let p = t.to_f64()?;
            let mut rng = Rng::new(*seed);
            let v: Vec<f64> = p
                .iter()
                .map(|&p| (rng.uniform() < p) as u8 as f64)
                .collect();
            one(Tensor::from_f64(
                dtype.unwrap_or(t.dtype()),
                t.shape().to_vec(),
                &v,
            )?)
        }
        MiscOp::RandomUniform {
            dtype,
            low,
            high,
            seed,
            shape,
        } => {
            let shape = shape_of(shape)?;
            uniform(float_type(*dtype)?, shape, *low, *high, *seed)
        }
        MiscOp::RandomUniformLike {
            dtype,
            low,
            high,
            seed,
        } => {
            let t = x.tensor(0)?;
            uniform(
                float_type(dtype.unwrap_or(t.dtype()))?,
                t.shape().to_vec(),
                *low,
                *high,
                *seed,
            )
        }
        MiscOp::RandomNormal {
            dtype,
            mean,
            scale,
            seed,
            shape,
        } => {
            let shape = shape_of(shape)?;
            normal(float_type(*dtype)?, shape, *mean, *scale, *seed)
        }
        MiscOp::RandomNormalLike {
            dtype,
            mean,
            scale,
            seed,
        } => {
            let t = x.tensor(0)?;
            normal(
                float_type(dtype.unwrap_or(t.dtype()))?,
                t.shape().to_vec(),
                *mean,
                *scale,
                *seed,
            )
        }
        MiscOp::Multinomial {
            dtype,
            sample_size,
            seed,
        } => {
            let t = x.tensor(0)?;
            ensure!(
                t.rank() == 2,
                InvalidModel,
                "Multinomial: input must be [batch, classes], got {:?}",
                t.shape()
            );
            ensure!(
                *sample_size >= 0,
                InvalidModel,
                "Multinomial: negative sample_size"
            );
            let (b, k) = (t.shape()[0], t.shape()[1]);
            let ss = *sample_size as usize;
            let logits = t.to_f64()?;
            let mut rng = Rng::new(*seed);
            let mut out = Vec::with_capacity(out_numel(&[b, ss])?);
            for r in 0..b {
                let row = &logits[r * k..(r + 1) * k];
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let cdf: Vec<f64> = row
                    .iter()
                    .scan(0.0, |acc, &l| {
                        *acc += (l - m).exp();
                        Some(*acc)
                    })
                    .collect();
                let total = cdf.last().copied().unwrap_or(0.0);
                for _ in 0..ss {
                    let u = rng.uniform() * total;
                    let c = cdf
                        .iter()
                        .position(|&c| u < c)
                        .unwrap_or(k.saturating_sub(1));
                    out.push(c as i64);
                }
            }
            one(Tensor::from_i64(*dtype, vec![b, ss], &out)?)
        }
        _ => bail!(Internal, "{} is not a random op", op.name()),
    }
}

fn uniform(
    dtype: DType,
    shape: Vec<usize>,
    low: f32,
    high: f32,
    seed: Option<f32>,
) -> Result<Vec<Value>> {
    let mut rng = Rng::new(seed);
    let (lo, hi) = (low as f64, high as f64);
    let v: Vec<f64> = (0..out_numel(&shape)?)
        .map(|_| lo + (hi - lo) * rng.uniform())
        .collect();
    one(from_f64_rounded(dtype, shape, v)?)
}

fn normal(
    dtype: DType,
    shape: Vec<usize>,
    mean: f32,
    scale: f32,
    seed: Option<f32>,
) -> Result<Vec<Value>> {
    let mut rng = Rng::new(seed);
    let v: Vec<f64> = (0..out_numel(&shape)?)
        .map(|_| mean as f64 + scale as f64 * rng.normal())
        .collect();
    one(from_f64_rounded(dtype, shape, v)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_is_repeatable() {
        let a: Vec<u64> = (0..3)
            .scan(Rng::new(Some(1.0)), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..3)
            .scan(Rng::new(Some(1.0)), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        let u = Rng::new(Some(3.0)).uniform();
        assert!((0.0..1.0).contains(&u));
    }

    fn bernoulli(p: &Tensor, dtype: Option<DType>, seed: Option<f32>) -> Tensor {
        let v = Value::Tensor(p.clone());
        let op = MiscOp::Bernoulli { dtype, seed };
        let mut out = run(&op, &Inputs::new(vec![Some(&v)])).unwrap();
        match out.remove(0) {
            Value::Tensor(t) => t,
            _ => panic!("Bernoulli returned a non-tensor"),
        }
    }

    #[test]
    fn bernoulli_mean_matches_p() {
        let n = 20_000;
        for &p in &[0.0, 0.1, 0.5, 0.9, 1.0] {
            let t = Tensor::from_f64(DType::F32, vec![n], &vec![p; n]).unwrap();
            let y = bernoulli(&t, None, Some(7.0)).to_f64().unwrap();
            assert!(y.iter().all(|&v| v == 0.0 || v == 1.0), "values not 0/1");
            let mean = y.iter().sum::<f64>() / n as f64;
            // Four standard deviations of the mean of n draws.
            let tol = 4.0 * (p * (1.0 - p) / n as f64).sqrt() + 1e-12;
            assert!((mean - p).abs() <= tol, "p={p}: mean {mean}");
        }
    }

    #[test]
    fn bernoulli_shape_and_dtype() {
        let t = Tensor::from_f64(DType::F32, vec![2, 3, 4], &[0.5; 24]).unwrap();
        let y = bernoulli(&t, None, Some(1.0));
        assert_eq!((y.dtype(), y.shape()), (DType::F32, &[2, 3, 4][..]));
        for dt in [DType::F64, DType::F16, DType::I32, DType::Bool] {
            let y = bernoulli(&t, Some(dt), Some(1.0));
            assert_eq!((y.dtype(), y.shape()), (dt, &[2, 3, 4][..]));
            assert!(y.to_f64().unwrap().iter().all(|&v| v == 0.0 || v == 1.0));
        }
    }

    #[test]
    fn bernoulli_seed_repeats() {
        let t = Tensor::from_f64(DType::F64, vec![1000], &[0.5; 1000]).unwrap();
        let a = bernoulli(&t, None, Some(3.0)).to_f64().unwrap();
        let b = bernoulli(&t, None, Some(3.0)).to_f64().unwrap();
        let c = bernoulli(&t, None, Some(4.0)).to_f64().unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
