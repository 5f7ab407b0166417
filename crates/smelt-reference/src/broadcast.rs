//! Numpy-style broadcasting: result shapes and index maps from result to operand.

use smelt_ir::{bail, strides, Result};

/// The broadcast shape of several operand shapes.
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                bail!(InvalidModel, "shapes {:?} do not broadcast", shapes);
            }
        }
    }
    Ok(out)
}

/// For each flat index of `out`, the flat index of the operand of shape `src` it reads.
pub fn index_map(src: &[usize], out: &[usize]) -> Vec<usize> {
    let n: usize = smelt_ir::dims_product(out);
    if src == out {
        return (0..n).collect();
    }
    let off = out.len() - src.len();
    let ss = strides(src);
    // Stride 0 where the operand is broadcast.
    let eff: Vec<usize> = (0..out.len())
        .map(|i| {
            if i < off || src[i - off] == 1 {
                0
            } else {
                ss[i - off]
            }
        })
        .collect();
    let mut res = Vec::with_capacity(n);
    let mut idx = vec![0usize; out.len()];
    let mut cur = 0usize;
    for _ in 0..n {
        res.push(cur);
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            cur += eff[d];
            if idx[d] < out[d] {
                break;
            }
            cur -= eff[d] * idx[d];
            idx[d] = 0;
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_maps() {
        assert_eq!(
            broadcast_shapes(&[&[2, 1, 3], &[4, 1]]).unwrap(),
            vec![2, 4, 3]
        );
        assert!(broadcast_shapes(&[&[2], &[3]]).is_err());
        assert_eq!(index_map(&[3], &[2, 3]), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(index_map(&[2, 1], &[2, 3]), vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(index_map(&[], &[2]), vec![0, 0]);
    }
}
