//! Runs of a bucketed artifact at a batch between its buckets: the inputs are padded in
//! dim 0 to the bucket's batch (the last real row repeated, so the pad holds values the
//! model accepts), and the outputs cut back to the real rows.

use smelt_ir::{ensure, Result, Tensor, Value};

/// `t` with its dim 0 grown from n to `batch` rows, the last row repeated.
pub(crate) fn pad_batch(t: &Tensor, batch: usize) -> Result<Tensor> {
    let n = t.shape().first().copied().unwrap_or(0);
    ensure!(
        n > 0 && n <= batch,
        InvalidInput,
        "a batch of {n} cannot be padded to {batch}"
    );
    let row = t.len() / n;
    let idx: Vec<usize> = (0..batch * row)
        .map(|i| {
            if i < n * row {
                i
            } else {
                (n - 1) * row + i % row
            }
        })
        .collect();
    let mut shape = t.shape().to_vec();
    shape[0] = batch;
    t.take(shape, &idx)
}

/// The first `n` rows (dim 0) of an output.
pub(crate) fn cut_batch(v: Value, n: usize) -> Result<Value> {
    let Value::Tensor(t) = v else {
        smelt_ir::bail!(Internal, "a bucketed plan's output is not a tensor");
    };
    let batch = t.shape().first().copied().unwrap_or(0);
    ensure!(
        n <= batch,
        Internal,
        "an output of batch {batch} cut to {n} rows"
    );
    if n == batch {
        return Ok(Value::Tensor(t));
    }
    let row = t.len() / batch.max(1);
    let idx: Vec<usize> = (0..n * row).collect();
    let mut shape = t.shape().to_vec();
    shape[0] = n;
    Ok(Value::Tensor(t.take(shape, &idx)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_with_the_last_row_and_cuts_back() {
        let t = Tensor::from_f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let p = pad_batch(&t, 4).unwrap();
        assert_eq!(p.shape(), &[4, 3]);
        assert_eq!(
            p.as_f32().unwrap(),
            &[1., 2., 3., 4., 5., 6., 4., 5., 6., 4., 5., 6.]
        );
        let Value::Tensor(c) = cut_batch(Value::Tensor(p), 2).unwrap() else {
            panic!()
        };
        assert_eq!(c.shape(), t.shape());
        assert_eq!(c.as_f32(), t.as_f32());
        assert!(pad_batch(&t, 1).is_err());
        let empty = Tensor::from_f32(vec![0, 3], vec![]).unwrap();
        assert!(pad_batch(&empty, 2).is_err());
    }
}
