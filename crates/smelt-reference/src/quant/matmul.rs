//! MatMulInteger and QLinearMatMul: numpy-style batched integer matmul with zero points.

use super::super::broadcast::{broadcast_shapes, index_map};
use super::super::Inputs;
use super::{int_values, round_to, saturate_to};
use smelt_ir::{ensure, DType, Result, Tensor};

/// Values of a quantization parameter (scale or zero point) of a matmul operand, one per
/// element of `target`: scalars broadcast, a 1-D parameter is per row (`row`, for A) or per
/// column (for B and the output), a higher-rank one broadcasts numpy-style.
fn expand<T: Copy>(
    vals: &[T],
    shape: &[usize],
    row: bool,
    target: &[usize],
    what: &str,
) -> Result<Vec<T>> {
    let n: usize = smelt_ir::dims_product(target);
    ensure!(!vals.is_empty(), InvalidModel, "{what} is empty");
    if vals.len() == 1 {
        return Ok(vec![vals[0]; n]);
    }
    let mut s = shape.to_vec();
    if row && s.len() == 1 && target.len() >= 2 {
        s.push(1);
    }
    let b = broadcast_shapes(&[&s, target])?;
    ensure!(
        b == target,
        InvalidModel,
        "{what} of shape {shape:?} does not broadcast to {target:?}"
    );
    Ok(index_map(&s, target).into_iter().map(|j| vals[j]).collect())
}

/// An operand's integer values minus its zero point (if any).
fn shifted(x: &Tensor, zp: Option<&Tensor>, row: bool, what: &str) -> Result<Vec<i32>> {
    let mut v = int_values(x, what)?;
    if let Some(z) = zp {
        ensure!(
            z.dtype() == x.dtype(),
            InvalidModel,
            "{what} zero point type {} differs from {}",
            z.dtype(),
            x.dtype()
        );
        let zv = int_values(z, what)?;
        let zs = expand(
            &zv,
            z.shape(),
            row,
            x.shape(),
            &format!("{what} zero point"),
        )?;
        for (e, z) in v.iter_mut().zip(zs) {
            *e = e.wrapping_sub(z);
        }
    }
    Ok(v)
}

/// The result of a batched matmul: values, their shape with M and N kept, the final shape.
struct Product {
    values: Vec<i32>,
    full_shape: Vec<usize>,
    shape: Vec<usize>,
}

/// numpy.matmul on i32 with wrapping accumulation.
fn matmul_i32(a: &[i32], ash: &[usize], b: &[i32], bsh: &[usize]) -> Result<Product> {
    ensure!(
        !ash.is_empty() && !bsh.is_empty(),
        InvalidModel,
        "matmul operands must have rank >= 1, got {ash:?} and {bsh:?}"
    );
    let a2 = if ash.len() == 1 {
        vec![1, ash[0]]
    } else {
        ash.to_vec()
    };
    let b2 = if bsh.len() == 1 {
        vec![bsh[0], 1]
    } else {
        bsh.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    ensure!(
        k == k2,
        InvalidModel,
        "matmul inner dimensions differ: {ash:?} x {bsh:?}"
    );
    let abatch = &a2[..a2.len() - 2];
    let bbatch = &b2[..b2.len() - 2];
    let batch = broadcast_shapes(&[abatch, bbatch])?;
    let nb: usize = smelt_ir::dims_product(&batch);
    let amap = index_map(abatch, &batch);
    let bmap = index_map(bbatch, &batch);
    // The output's size is checked against the run's limits before it is allocated
    // (fuzz finding: 65536 x 3 by 3 x 65536 asked for 16 GiB).
    let count = (nb as u64)
        .saturating_mul(m as u64)
        .saturating_mul(n as u64);
    smelt_ir::limits::check_alloc(count.saturating_mul(4), &|| {
        format!("the integer matmul's output ({nb} x {m} x {n})")
    })?;
    let mut out = vec![0i32; nb * m * n];
    for bi in 0..nb {
        let ao = amap[bi] * m * k;
        let bo = bmap[bi] * k * n;
        let oo = bi * m * n;
        for i in 0..m {
            let orow = &mut out[oo + i * n..oo + (i + 1) * n];
            for kk in 0..k {
                let av = a[ao + i * k + kk];
                if av == 0 {
                    continue;
                }
                let brow = &b[bo + kk * n..bo + (kk + 1) * n];
                for (o, &bv) in orow.iter_mut().zip(brow) {
                    *o = o.wrapping_add(av.wrapping_mul(bv));
                }
            }
        }
    }
    let mut full_shape = batch.clone();
    full_shape.extend([m, n]);
    let mut shape = batch;
    if ash.len() > 1 {
        shape.push(m);
    }
    if bsh.len() > 1 {
        shape.push(n);
    }
    Ok(Product {
        values: out,
        full_shape,
        shape,
    })
}

/// MatMulInteger: inputs A, B, optional a_zero_point, b_zero_point; i32 output.
pub fn matmul_integer(x: &Inputs) -> Result<Tensor> {
    let a = x.tensor(0)?;
    let b = x.tensor(1)?;
    let av = shifted(a, x.opt_tensor(2)?, true, "A")?;
    let bv = shifted(b, x.opt_tensor(3)?, false, "B")?;
    let p = matmul_i32(&av, a.shape(), &bv, b.shape())?;
    Tensor::from_i64(
        DType::I32,
        p.shape,
        &p.values.iter().map(|&v| v as i64).collect::<Vec<_>>(),
    )
}

/// QLinearMatMul: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp. The requantization
/// multiplier `a_scale * b_scale / y_scale` is computed in the scales' type, as numpy does.
pub fn qlinear_matmul(x: &Inputs) -> Result<Tensor> {
    let a = x.tensor(0)?;
    let a_scale = x.tensor(1)?;
    let b = x.tensor(3)?;
    let b_scale = x.tensor(4)?;
    let y_scale = x.tensor(6)?;
    let y_zp = x.opt_tensor(7)?;
    let av = shifted(a, x.opt_tensor(2)?, true, "a")?;
    let bv = shifted(b, x.opt_tensor(5)?, false, "b")?;
    let p = matmul_i32(&av, a.shape(), &bv, b.shape())?;
    let fs = &p.full_shape;
    let prec = a_scale.dtype();
    let sa = expand(&a_scale.to_f64()?, a_scale.shape(), true, fs, "a_scale")?;
    let sb = expand(&b_scale.to_f64()?, b_scale.shape(), false, fs, "b_scale")?;
    let sy = expand(&y_scale.to_f64()?, y_scale.shape(), false, fs, "y_scale")?;
    let zy = match y_zp {
        Some(z) => expand(&z.to_f64()?, z.shape(), false, fs, "y_zero_point")?,
        None => vec![0.0; p.values.len()],
    };
    let v: Vec<f64> = (0..p.values.len())
        .map(|i| {
            let mult = round_to(prec, round_to(prec, sa[i] * sb[i]) / sy[i]);
            p.values[i] as f64 * mult + zy[i]
        })
        .collect();
    saturate_to(y_zp.map_or(a.dtype(), |z| z.dtype()), p.shape, &v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_and_vector_matmul() {
        let p = matmul_i32(&[1, 2, 3, 4], &[2, 2], &[1, 1], &[2]).unwrap();
        assert_eq!(p.values, vec![3, 7]);
        assert_eq!(p.shape, vec![2]);
        let p = matmul_i32(&[1, 2], &[1, 2], &[1, 0, 0, 1, 2, 0, 0, 2], &[2, 2, 2]).unwrap();
        assert_eq!(p.values, vec![1, 2, 2, 4]);
        assert_eq!(p.shape, vec![2, 1, 2]);
        assert!(matmul_i32(&[1, 2], &[2], &[1, 2, 3], &[3]).is_err());
    }
}
