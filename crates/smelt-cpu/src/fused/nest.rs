//! Loop nests over strided windows: dimension coalescing and walkers that visit every
//! point, or every chunk of the innermost dimension, keeping each window's offset.

/// Most elements one body evaluation handles (the chunk along the innermost dimension).
pub(crate) use smelt_kernels::program::CHUNK;

/// An iteration space and, per window, its step per dimension (in elements).
#[derive(Debug, Clone)]
pub(crate) struct Nest {
    /// Extents (at least one dimension).
    pub shape: Vec<usize>,
    /// `strides[w][d]`: window `w`'s step along dimension `d`.
    pub strides: Vec<Vec<isize>>,
}

impl Nest {
    /// The nest with unit dimensions dropped and neighbours merged wherever every window
    /// steps through them as one dimension; never below rank 1.
    pub(crate) fn coalesced(shape: &[usize], strides: Vec<Vec<isize>>) -> Nest {
        // Nothing to walk; the other dims of an empty window may be huge (no products).
        if shape.contains(&0) {
            return Nest {
                shape: vec![0],
                strides: vec![vec![0]; strides.len()],
            };
        }
        let keep: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
        let mut out_shape: Vec<usize> = Vec::new();
        let mut out: Vec<Vec<isize>> = vec![Vec::new(); strides.len()];
        for &d in keep.iter().rev() {
            let merge = !out_shape.is_empty()
                && strides.iter().zip(&out).all(|(s, o)| {
                    let inner = *o.last().unwrap_or(&0);
                    let n = *out_shape.last().unwrap_or(&1) as isize;
                    inner.checked_mul(n) == Some(s[d])
                });
            if merge {
                if let Some(n) = out_shape.last_mut() {
                    *n *= shape[d];
                }
            } else {
                out_shape.push(shape[d]);
                for (o, s) in out.iter_mut().zip(&strides) {
                    o.push(s[d]);
                }
            }
        }
        if out_shape.is_empty() {
            out_shape.push(if shape.contains(&0) { 0 } else { 1 });
            for o in out.iter_mut() {
                o.push(0);
            }
        }
        // Merging kept the innermost stride of each run: innermost-first order, reverse it.
        out_shape.reverse();
        for o in out.iter_mut() {
            o.reverse();
        }
        Nest {
            shape: out_shape,
            strides: out,
        }
    }

    /// Number of points.
    pub(crate) fn len(&self) -> usize {
        smelt_ir::dims_product(&self.shape)
    }

    /// The innermost step of every window.
    pub(crate) fn inner(&self) -> Vec<isize> {
        self.strides
            .iter()
            .map(|s| *s.last().unwrap_or(&0))
            .collect()
    }
}

/// Calls `f` with every window's offset at each point of `shape` (row-major order);
/// `base` holds the offsets at the origin. Only the first `shape.len()` strides are used.
pub(crate) fn walk_points(
    shape: &[usize],
    strides: &[Vec<isize>],
    base: &[isize],
    mut f: impl FnMut(&[isize]),
) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = Small::<usize>::zeros(shape.len());
    let mut offs = Small::<isize>::copy(base);
    let (idx, offs) = (idx.as_mut(), offs.as_mut());
    loop {
        f(offs);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                for (o, s) in offs.iter_mut().zip(strides) {
                    *o += s[d];
                }
                break;
            }
            let back = (shape[d] - 1) as isize;
            for (o, s) in offs.iter_mut().zip(strides) {
                *o -= s[d] * back;
            }
            idx[d] = 0;
        }
    }
}

/// Calls `f(offsets, len)` for each row along the innermost dimension of `shape` (rank
/// >= 1): the windows' offsets at the row's start, and its length.
pub(crate) fn walk_rows(
    shape: &[usize],
    strides: &[Vec<isize>],
    base: &[isize],
    mut f: impl FnMut(&[isize], usize),
) {
    let Some((&n, outer)) = shape.split_last() else {
        return;
    };
    if n > 0 {
        walk_points(outer, strides, base, |offs| f(offs, n));
    }
}

/// Calls `f(offsets, len)` for each chunk of at most [`CHUNK`] elements along the innermost
/// dimension of `shape` (rank >= 1); `inner` holds every window's innermost step.
pub(crate) fn walk_chunks(
    shape: &[usize],
    strides: &[Vec<isize>],
    inner: &[isize],
    base: &[isize],
    mut f: impl FnMut(&[isize], usize),
) {
    let Some((&n, outer)) = shape.split_last() else {
        return;
    };
    if n == 0 {
        return;
    }
    let mut chunk = Small::<isize>::copy(base);
    let chunk = chunk.as_mut();
    walk_points(outer, strides, base, |offs| {
        let mut start = 0;
        while start < n {
            let len = CHUNK.min(n - start);
            for ((c, &o), &s) in chunk.iter_mut().zip(offs).zip(inner) {
                *c = o + start as isize * s;
            }
            f(chunk, len);
            start += len;
        }
    });
}

/// Fewest points worth splitting between threads.
pub(crate) const PARALLEL_MIN: usize = 1 << 15;

/// Runs `f(shape, base)` on slices of the outermost dimension, spread over the pool's
/// threads (in place when one thread would do); each slice's shape and window offsets are
/// passed. Slices are a few per thread, so uneven ones balance out.
pub(crate) fn for_parts(
    ex: &super::Exec,
    shape: &[usize],
    strides: &[Vec<isize>],
    base: &[isize],
    f: impl Fn(&[usize], &[isize]) + Sync,
) {
    let n = shape.first().copied().unwrap_or(1);
    let parts = (4 * ex.threads).min(n).max(1);
    if parts == 1 || ex.threads <= 1 {
        return f(shape, base);
    }
    ex.pool.run(ex.threads, parts, &|p| {
        let (lo, hi) = (n * p / parts, n * (p + 1) / parts);
        let mut sub = shape.to_vec();
        sub[0] = hi - lo;
        let start: Vec<isize> = base
            .iter()
            .zip(strides)
            .map(|(&b, s)| b + lo as isize * s[0])
            .collect();
        f(&sub, &start);
    });
}

/// A short array kept inline (no allocation on the hot path), on the heap past 16 items.
pub(crate) struct Small<T: Copy + Default> {
    inline: [T; 16],
    heap: Vec<T>,
    len: usize,
}

impl<T: Copy + Default> Small<T> {
    /// `n` default values.
    pub(crate) fn zeros(n: usize) -> Small<T> {
        let heap = if n > 16 {
            vec![T::default(); n]
        } else {
            Vec::new()
        };
        Small {
            inline: [T::default(); 16],
            heap,
            len: n,
        }
    }

    /// A copy of `v`.
    pub(crate) fn copy(v: &[T]) -> Small<T> {
        let mut s = Small::zeros(v.len());
        s.as_mut().copy_from_slice(v);
        s
    }

    /// The items.
    pub(crate) fn as_mut(&mut self) -> &mut [T] {
        if self.len > 16 {
            &mut self.heap
        } else {
            &mut self.inline[..self.len]
        }
    }
}
