//! Dropout. Training mode draws its mask like numpy's legacy `RandomState(seed).uniform`
//! (MT19937, 53-bit doubles), so seeded runs match the ONNX reference.

use crate::{Ctx, Inputs};
use smelt_ir::op::nn::DropoutMode;
use smelt_ir::op::NnOp;
use smelt_ir::{bail, ensure, Result, Tensor, Value};

/// Dropout: identity (mask all true) unless training with a positive ratio.
pub fn dropout(op: &NnOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let NnOp::Dropout { mode, seed } = op else {
        bail!(Internal, "not Dropout")
    };
    let xt = x.tensor(0)?;
    let typed_mask = matches!(
        mode,
        DropoutMode::Fixed {
            typed_mask: true,
            ..
        }
    );
    // The mask as bools, or in the input's type for legacy opsets.
    let mask_tensor = |m: Vec<bool>| -> Result<Tensor> {
        let shape = xt.shape().to_vec();
        if typed_mask {
            let v: Vec<f64> = m.iter().map(|&b| b as u8 as f64).collect();
            Tensor::from_f64(xt.dtype(), shape, &v)
        } else {
            Tensor::from_bools(shape, m)
        }
    };
    let (ratio, training) = match mode {
        DropoutMode::Fixed {
            ratio, training, ..
        } => (*ratio as f64, *training),
        DropoutMode::FromInputs => {
            let ratio = match x.opt_tensor(1)? {
                Some(r) => {
                    ensure!(r.len() == 1, InvalidModel, "Dropout ratio must be a scalar");
                    r.to_f64()?[0]
                }
                None => 0.5,
            };
            let training = match x.opt_tensor(2)? {
                Some(t) => {
                    ensure!(
                        t.len() == 1,
                        InvalidModel,
                        "Dropout training_mode must be a scalar"
                    );
                    t.to_bool()?[0]
                }
                None => false,
            };
            (ratio, training)
        }
    };
    if !training || ratio == 0.0 {
        let mut res = vec![Value::Tensor(xt.clone())];
        if cx.n_outputs > 1 {
            res.push(Value::Tensor(mask_tensor(vec![true; xt.len()])?));
        }
        return Ok(res);
    }
    ensure!(
        (0.0..1.0).contains(&ratio),
        InvalidModel,
        "Dropout ratio must be in [0, 1), got {ratio}"
    );
    let s = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0)
    });
    let mut rng = Mt19937::new(s as u32);
    let mask: Vec<bool> = (0..xt.len()).map(|_| rng.next_f64() >= ratio).collect();
    let scale = 1.0 / (1.0 - ratio);
    let y: Vec<f64> = xt
        .to_f64()?
        .iter()
        .zip(&mask)
        .map(|(v, &m)| if m { v * scale } else { 0.0 })
        .collect();
    let mut res = vec![Value::Tensor(Tensor::from_f64(
        xt.dtype(),
        xt.shape().to_vec(),
        &y,
    )?)];
    if cx.n_outputs > 1 {
        res.push(Value::Tensor(mask_tensor(mask)?));
    }
    Ok(res)
}

/// The Mersenne Twister as numpy's legacy RandomState uses it.
struct Mt19937 {
    mt: [u32; 624],
    i: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Self {
        let mut mt = [0u32; 624];
        mt[0] = seed;
        for i in 1..624 {
            mt[i] = 1812433253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { mt, i: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.i >= 624 {
            for k in 0..624 {
                let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % 624] & 0x7fff_ffff);
                let mut v = self.mt[(k + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.mt[k] = v;
            }
            self.i = 0;
        }
        let mut y = self.mt[self.i];
        self.i += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    fn next_f64(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67108864.0 + b) / 9007199254740992.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt_matches_numpy() {
        // numpy.random.RandomState(0).random_sample() == 0.5488135039273248
        let mut r = Mt19937::new(0);
        assert!((r.next_f64() - 0.548_813_503_927_324_8).abs() < 1e-15);
    }
}
