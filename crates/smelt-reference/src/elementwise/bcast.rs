//! Broadcast iteration without index maps: the output is walked in runs along the innermost
//! (coalesced) dimension, each operand advancing by stride 1 or 0 within a run.

use super::super::broadcast::broadcast_shapes;
use smelt_ir::{numel, Result};

/// How to walk the broadcast output of several operands.
pub struct Plan {
    /// The output shape.
    pub shape: Vec<usize>,
    /// Number of output elements.
    pub n: usize,
    /// Coalesced dimensions (outermost first).
    dims: Vec<usize>,
    /// Per operand, its stride along each coalesced dimension (0 where broadcast).
    strides: Vec<Vec<usize>>,
}

impl Plan {
    /// The plan for operands of the given shapes; an error when they do not broadcast.
    pub fn new(shapes: &[&[usize]]) -> Result<Plan> {
        let shape = broadcast_shapes(shapes)?;
        let n = numel(&shape)?;
        if n == 0 {
            // Nothing to walk; the other dims of an empty output may be huge (no products).
            return Ok(Plan {
                shape,
                n,
                dims: Vec::new(),
                strides: vec![Vec::new(); shapes.len()],
            });
        }
        let rank = shape.len();
        // Effective strides per operand on the full output rank.
        let mut eff: Vec<Vec<usize>> = Vec::with_capacity(shapes.len());
        for s in shapes {
            let off = rank - s.len();
            let mut st = vec![0usize; rank];
            let mut acc = 1usize;
            for i in (0..s.len()).rev() {
                st[off + i] = if s[i] == 1 { 0 } else { acc };
                acc *= s[i];
            }
            eff.push(st);
        }
        // Drop size-1 output dims, then merge neighbours that are contiguous for every operand.
        let mut dims: Vec<usize> = Vec::new();
        let mut strides: Vec<Vec<usize>> = vec![Vec::new(); shapes.len()];
        for d in 0..rank {
            if shape[d] == 1 {
                continue;
            }
            if let Some(&last) = dims.last() {
                let mergeable = eff
                    .iter()
                    .zip(&strides)
                    .all(|(e, st)| st.last().copied() == Some(e[d] * shape[d]));
                if mergeable {
                    let k = dims.len() - 1;
                    dims[k] = last * shape[d];
                    for (e, st) in eff.iter().zip(strides.iter_mut()) {
                        st[k] = e[d];
                    }
                    continue;
                }
            }
            dims.push(shape[d]);
            for (e, st) in eff.iter().zip(strides.iter_mut()) {
                st.push(e[d]);
            }
        }
        Ok(Plan {
            shape,
            n,
            dims,
            strides,
        })
    }

    /// Calls `f(offsets, len, inner_strides)` for each run of the output in order: `offsets[k]`
    /// is where operand `k` starts, `inner_strides[k]` (0 or 1) how it advances within the run.
    pub fn for_each_run(&self, mut f: impl FnMut(&[usize], usize, &[usize])) {
        let k = self.strides.len();
        if self.n == 0 {
            return;
        }
        if self.dims.is_empty() {
            f(&vec![0; k], 1, &vec![0; k]);
            return;
        }
        let r = self.dims.len();
        let inner = self.dims[r - 1];
        let inner_st: Vec<usize> = self.strides.iter().map(|s| s[r - 1]).collect();
        let outer = self.n / inner;
        let mut idx = vec![0usize; r - 1];
        let mut off = vec![0usize; k];
        for _ in 0..outer {
            f(&off, inner, &inner_st);
            for d in (0..r - 1).rev() {
                idx[d] += 1;
                for (o, s) in off.iter_mut().zip(&self.strides) {
                    *o += s[d];
                }
                if idx[d] < self.dims[d] {
                    break;
                }
                for (o, s) in off.iter_mut().zip(&self.strides) {
                    *o -= s[d] * idx[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// `f(a[i], b[j])` over the broadcast of two operands laid out as `p` describes.
pub fn map2<A: Copy, B: Copy, O>(p: &Plan, a: &[A], b: &[B], f: impl Fn(A, B) -> O) -> Vec<O> {
    let mut out = Vec::with_capacity(p.n);
    p.for_each_run(|off, len, st| {
        let (oa, ob) = (off[0], off[1]);
        match (st[0], st[1]) {
            (1, 1) => out.extend(
                a[oa..oa + len]
                    .iter()
                    .zip(&b[ob..ob + len])
                    .map(|(&x, &y)| f(x, y)),
            ),
            (1, 0) => {
                let y = b[ob];
                out.extend(a[oa..oa + len].iter().map(|&x| f(x, y)));
            }
            (0, 1) => {
                let x = a[oa];
                out.extend(b[ob..ob + len].iter().map(|&y| f(x, y)));
            }
            (sa, sb) => out.extend((0..len).map(|i| f(a[oa + i * sa], b[ob + i * sb]))),
        }
    });
    out
}

/// Like [`map2`] for elements that are only `Clone` (strings), passed by reference.
pub fn map2_ref<A, B, O>(p: &Plan, a: &[A], b: &[B], f: impl Fn(&A, &B) -> O) -> Vec<O> {
    let mut out = Vec::with_capacity(p.n);
    p.for_each_run(|off, len, st| {
        out.extend((0..len).map(|i| f(&a[off[0] + i * st[0]], &b[off[1] + i * st[1]])));
    });
    out
}

/// `c ? x : y` over the broadcast of three operands.
pub fn select<T: Clone>(p: &Plan, c: &[bool], x: &[T], y: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(p.n);
    p.for_each_run(|off, len, st| {
        let (oc, ox, oy) = (off[0], off[1], off[2]);
        out.extend((0..len).map(|i| {
            if c[oc + i * st[0]] {
                x[ox + i * st[1]].clone()
            } else {
                y[oy + i * st[2]].clone()
            }
        }));
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_match_index_maps() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 3], &[2, 3]),
            (&[2, 1, 3], &[4, 1]),
            (&[], &[5]),
            (&[3, 1], &[1, 4]),
            (&[2, 3, 4], &[3, 1]),
            (&[0, 3], &[3]),
        ];
        for (sa, sb) in cases {
            let p = Plan::new(&[sa, sb]).unwrap();
            let na: usize = smelt_ir::dims_product(sa);
            let nb: usize = smelt_ir::dims_product(sb);
            let a: Vec<usize> = (0..na).collect();
            let b: Vec<usize> = (0..nb).collect();
            let got = map2(&p, &a, &b, |x, y| (x, y));
            let ia = crate::broadcast::index_map(sa, &p.shape);
            let ib = crate::broadcast::index_map(sb, &p.shape);
            let want: Vec<(usize, usize)> = ia.into_iter().zip(ib).collect();
            assert_eq!(got, want, "{sa:?} {sb:?}");
        }
    }
}
