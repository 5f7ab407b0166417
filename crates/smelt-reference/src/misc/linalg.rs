//! Linear algebra: determinants.

use crate::one;
use smelt_ir::{bail, Result, Tensor, Value};

/// Determinant of each square matrix in the last two axes (LU with partial pivoting, in f64).
pub fn det(a: &Tensor) -> Result<Vec<Value>> {
    let r = a.rank();
    if r < 2 || a.shape()[r - 1] != a.shape()[r - 2] {
        bail!(
            InvalidModel,
            "Det needs square matrices in the last two axes, got shape {:?}",
            a.shape()
        );
    }
    if !a.dtype().is_float() {
        bail!(
            Unsupported,
            "Det needs a floating-point tensor, got {}",
            a.dtype()
        );
    }
    let n = a.shape()[r - 1];
    let v = a.to_f64()?;
    let batch = a.shape()[..r - 2].to_vec();
    let dets: Vec<f64> = v
        .chunks(n * n.max(1))
        .map(|m| lu_det(m.to_vec(), n))
        .collect();
    let dets = if n == 0 {
        vec![1.0; smelt_ir::dims_product(&batch)]
    } else {
        dets
    };
    one(Tensor::from_f64(a.dtype(), batch, &dets)?)
}

fn lu_det(mut m: Vec<f64>, n: usize) -> f64 {
    let mut det = 1.0;
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| m[i * n + c].abs().total_cmp(&m[j * n + c].abs()))
            .unwrap_or(c);
        if m[p * n + c] == 0.0 {
            return 0.0;
        }
        if p != c {
            for k in 0..n {
                m.swap(p * n + k, c * n + k);
            }
            det = -det;
        }
        let pivot = m[c * n + c];
        det *= pivot;
        for i in c + 1..n {
            let f = m[i * n + c] / pivot;
            for k in c..n {
                m[i * n + k] -= f * m[c * n + k];
            }
        }
    }
    det
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_determinants() {
        let t =
            Tensor::from_f32(vec![2, 2, 2], vec![1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 1.0, 0.0]).unwrap();
        let out = det(&t).unwrap();
        let d = out[0].tensor().unwrap().to_f64().unwrap();
        assert!(
            (d[0] + 2.0).abs() < 1e-9 && (d[1] + 1.0).abs() < 1e-9,
            "{d:?}"
        );
        assert!(det(&Tensor::from_f32(vec![2, 3], vec![0.0; 6]).unwrap()).is_err());
    }
}
