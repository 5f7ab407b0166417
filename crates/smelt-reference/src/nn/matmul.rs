//! MatMul (numpy semantics) and Gemm.

use super::gemm::{dgemm, igemm, sgemm};
use crate::broadcast::{broadcast_shapes, index_map};
use crate::{one, Inputs};
use smelt_ir::op::NnOp;
use smelt_ir::{bail, ensure, numel, DType, Result, Tensor, Value};
use std::borrow::Cow;

/// Element values in the representation a kernel computes in.
pub(super) enum Num<'a> {
    F32(Cow<'a, [f32]>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

/// How a dtype computes: f32 natively, integers exactly, other reals through f64.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    F32,
    F64,
    I64,
}

pub(super) fn kind_of(d: DType) -> Result<Kind> {
    Ok(match d {
        DType::F32 => Kind::F32,
        d if d.is_int() && d != DType::Bool => Kind::I64,
        d if d.is_float() => Kind::F64,
        d => bail!(Unsupported, "unsupported element type {d}"),
    })
}

pub(super) fn load(t: &Tensor, k: Kind) -> Result<Num<'_>> {
    Ok(match k {
        Kind::F32 => match t.as_f32() {
            Some(v) => Num::F32(Cow::Borrowed(v)),
            None => Num::F32(Cow::Owned(
                t.to_f64()?.into_iter().map(|x| x as f32).collect(),
            )),
        },
        Kind::F64 => Num::F64(t.to_f64()?),
        Kind::I64 => Num::I64(t.to_i64()?),
    })
}

pub(super) fn store(d: DType, shape: Vec<usize>, v: Num) -> Result<Tensor> {
    match v {
        Num::F32(v) if d == DType::F32 => Tensor::from_f32(shape, v.into_owned()),
        Num::F32(v) => Tensor::from_f64(d, shape, &v.iter().map(|&x| x as f64).collect::<Vec<_>>()),
        Num::F64(v) => Tensor::from_f64(d, shape, &v),
        Num::I64(v) => Tensor::from_i64(d, shape, &v),
    }
}

/// Numpy matmul: 1-D operands are promoted (and the added axis removed), batch axes broadcast.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Vec<Value>> {
    ensure!(
        a.dtype() == b.dtype(),
        InvalidModel,
        "MatMul operands have different types {} and {}",
        a.dtype(),
        b.dtype()
    );
    ensure!(
        a.rank() >= 1 && b.rank() >= 1,
        InvalidModel,
        "MatMul operands must have rank >= 1, got {:?} and {:?}",
        a.shape(),
        b.shape()
    );
    let kind = kind_of(a.dtype())?;
    let ash: Vec<usize> = if a.rank() == 1 {
        vec![1, a.shape()[0]]
    } else {
        a.shape().to_vec()
    };
    let bsh: Vec<usize> = if b.rank() == 1 {
        vec![b.shape()[0], 1]
    } else {
        b.shape().to_vec()
    };
    let (m, k) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let (k2, n) = (bsh[bsh.len() - 2], bsh[bsh.len() - 1]);
    ensure!(
        k == k2,
        InvalidModel,
        "MatMul inner dimensions differ: {:?} x {:?}",
        a.shape(),
        b.shape()
    );
    let abatch = &ash[..ash.len() - 2];
    let bbatch = &bsh[..bsh.len() - 2];
    let batch = broadcast_shapes(&[abatch, bbatch])?;
    let nb = numel(&batch)?;
    let mut out_shape = batch.clone();
    if a.rank() > 1 {
        out_shape.push(m);
    }
    if b.rank() > 1 {
        out_shape.push(n);
    }
    let total = numel(&[nb, m, n])?;
    let amap = index_map(abatch, &batch);
    let bmap = index_map(bbatch, &batch);
    let out = match (load(a, kind)?, load(b, kind)?) {
        (Num::F32(av), Num::F32(bv)) => {
            let mut c: Vec<f32> = crate::zeroed(&[total], "MatMul's output")?;
            for (i, cb) in c.chunks_mut((m * n).max(1)).enumerate().take(nb) {
                let (ao, bo) = (amap[i] * m * k, bmap[i] * k * n);
                let (a_i, b_i) = (&av[ao..ao + m * k], &bv[bo..bo + k * n]);
                sgemm(m, n, k, a_i, k, b_i, n, cb, n, false);
            }
            Num::F32(Cow::Owned(c))
        }
        (Num::F64(av), Num::F64(bv)) => {
            let mut c: Vec<f64> = crate::zeroed(&[total], "MatMul's output")?;
            for i in 0..nb {
                let (ao, bo) = (amap[i] * m * k, bmap[i] * k * n);
                dgemm(
                    m,
                    n,
                    k,
                    &av[ao..ao + m * k],
                    &bv[bo..bo + k * n],
                    &mut c[i * m * n..(i + 1) * m * n],
                );
            }
            if matches!(a.dtype(), DType::F16 | DType::BF16) {
                // numpy accumulates half types in f32 and rounds from there.
                c.iter_mut().for_each(|v| *v = *v as f32 as f64);
            }
            Num::F64(c)
        }
        (Num::I64(av), Num::I64(bv)) => {
            let mut c: Vec<i64> = crate::zeroed(&[total], "MatMul's output")?;
            for i in 0..nb {
                let (ao, bo) = (amap[i] * m * k, bmap[i] * k * n);
                igemm(
                    m,
                    n,
                    k,
                    &av[ao..ao + m * k],
                    &bv[bo..bo + k * n],
                    &mut c[i * m * n..(i + 1) * m * n],
                );
            }
            Num::I64(c)
        }
        _ => bail!(Internal, "mismatched operand representations"),
    };
    one(store(a.dtype(), out_shape, out)?)
}

fn transpose2<T: Copy>(v: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    for j in 0..cols {
        for i in 0..rows {
            out.push(v[i * cols + j]);
        }
    }
    out
}

/// Gemm: `alpha * op(A) * op(B) + beta * C` with C broadcast to (M, N).
pub fn gemm(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::Gemm {
        alpha,
        beta,
        trans_a,
        trans_b,
    } = op
    else {
        bail!(Internal, "not Gemm")
    };
    let (a, b) = (x.tensor(0)?, x.tensor(1)?);
    let c = x.opt_tensor(2)?;
    ensure!(
        a.dtype() == b.dtype(),
        InvalidModel,
        "Gemm operands have different types {} and {}",
        a.dtype(),
        b.dtype()
    );
    ensure!(
        a.rank() == 2 && b.rank() == 2,
        InvalidModel,
        "Gemm needs 2-D A and B, got {:?} and {:?}",
        a.shape(),
        b.shape()
    );
    let (m, k) = if *trans_a {
        (a.shape()[1], a.shape()[0])
    } else {
        (a.shape()[0], a.shape()[1])
    };
    let (k2, n) = if *trans_b {
        (b.shape()[1], b.shape()[0])
    } else {
        (b.shape()[0], b.shape()[1])
    };
    ensure!(
        k == k2,
        InvalidModel,
        "Gemm inner dimensions differ: {:?} x {:?} (transA={trans_a}, transB={trans_b})",
        a.shape(),
        b.shape()
    );
    let cmap = match c {
        Some(c) => {
            let bs = broadcast_shapes(&[c.shape(), &[m, n]])?;
            ensure!(
                bs == [m, n],
                InvalidModel,
                "Gemm C of shape {:?} does not broadcast to [{m}, {n}]",
                c.shape()
            );
            Some(index_map(c.shape(), &[m, n]))
        }
        None => None,
    };
    let kind = kind_of(a.dtype())?;
    let out = match (load(a, kind)?, load(b, kind)?) {
        (Num::F32(av), Num::F32(bv)) => {
            let av = if *trans_a {
                Cow::Owned(transpose2(&av, k, m))
            } else {
                av
            };
            let bv = if *trans_b {
                Cow::Owned(transpose2(&bv, n, k))
            } else {
                bv
            };
            let mut y: Vec<f32> = crate::zeroed(&[m, n], "Gemm's output")?;
            sgemm(m, n, k, &av, k, &bv, n, &mut y, n, false);
            if *alpha != 1.0 {
                y.iter_mut().for_each(|v| *v *= alpha);
            }
            if let (Some(c), Some(map)) = (c, &cmap) {
                let Num::F32(cv) = load(c, Kind::F32)? else {
                    bail!(Internal, "an F32 operand loaded as another kind")
                };
                for (v, &i) in y.iter_mut().zip(map) {
                    *v += beta * cv[i];
                }
            }
            Num::F32(Cow::Owned(y))
        }
        (Num::F64(av), Num::F64(bv)) => {
            let av = if *trans_a { transpose2(&av, k, m) } else { av };
            let bv = if *trans_b { transpose2(&bv, n, k) } else { bv };
            let mut y: Vec<f64> = crate::zeroed(&[m, n], "Gemm's output")?;
            dgemm(m, n, k, &av, &bv, &mut y);
            let (al, be) = (*alpha as f64, *beta as f64);
            y.iter_mut().for_each(|v| *v *= al);
            if let (Some(c), Some(map)) = (c, &cmap) {
                let cv = c.to_f64()?;
                for (v, &i) in y.iter_mut().zip(map) {
                    *v += be * cv[i];
                }
            }
            Num::F64(y)
        }
        (Num::I64(av), Num::I64(bv)) => {
            let av = if *trans_a { transpose2(&av, k, m) } else { av };
            let bv = if *trans_b { transpose2(&bv, n, k) } else { bv };
            let mut y: Vec<i64> = crate::zeroed(&[m, n], "Gemm's output")?;
            igemm(m, n, k, &av, &bv, &mut y);
            ensure!(
                alpha.fract() == 0.0 && beta.fract() == 0.0,
                InvalidModel,
                "integer Gemm needs integral alpha and beta"
            );
            let (al, be) = (*alpha as i64, *beta as i64);
            y.iter_mut().for_each(|v| *v = v.wrapping_mul(al));
            if let (Some(c), Some(map)) = (c, &cmap) {
                let cv = c.to_i64()?;
                for (v, &i) in y.iter_mut().zip(map) {
                    *v = v.wrapping_add(be.wrapping_mul(cv[i]));
                }
            }
            Num::I64(y)
        }
        _ => bail!(Internal, "mismatched operand representations"),
    };
    one(store(a.dtype(), vec![m, n], out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_1d_and_batch() {
        let a = Tensor::from_f32(vec![2, 1, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let b = Tensor::from_f32(vec![3], vec![1., 0., 1.]).unwrap();
        let r = matmul(&a, &b).unwrap();
        let t = r[0].tensor().unwrap();
        assert_eq!(t.shape(), &[2, 1]);
        assert_eq!(t.as_f32().unwrap(), &[4., 10.]);
        let ai = Tensor::from_i64_vec(vec![1, 2], vec![i64::MAX, 1]).unwrap();
        let bi = Tensor::from_i64_vec(vec![2, 1], vec![1, 1]).unwrap();
        let r = matmul(&ai, &bi).unwrap();
        assert_eq!(r[0].tensor().unwrap().as_i64().unwrap(), &[i64::MIN]);
    }
}
