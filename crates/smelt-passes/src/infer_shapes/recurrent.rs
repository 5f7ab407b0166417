//! Recurrent layers: Y is `[seq, dirs, batch, hidden]` (`[batch, seq, dirs, hidden]` in
//! the batch-major layout), Y_h and Y_c `[dirs, batch, hidden]` (`[batch, dirs, hidden]`).

use super::{typed, In, Outs};
use smelt_ir::op::recurrent::RnnDirection;
use smelt_ir::op::RecurrentOp;
use smelt_ir::{ensure, Dim, Result};

/// Output types of a recurrent layer.
pub(super) fn infer(op: &RecurrentOp, x: &In) -> Result<Option<Outs>> {
    use RecurrentOp::*;
    let (hidden, direction, batch_major) = match op {
        Rnn {
            hidden_size,
            direction,
            batch_major,
            ..
        }
        | Gru {
            hidden_size,
            direction,
            batch_major,
            ..
        }
        | Lstm {
            hidden_size,
            direction,
            batch_major,
            ..
        } => (*hidden_size, *direction, *batch_major),
    };
    let dt = x.dtype(0);
    let (Some(xs), Some(rs)) = (x.shape(0), x.shape(2)) else {
        return Ok(Some(vec![typed(dt, None); x.n_outputs()]));
    };
    ensure!(
        xs.len() == 3 && rs.len() == 3,
        InvalidModel,
        "X and R must have rank 3, got {} and {}",
        xs.len(),
        rs.len()
    );
    let h = match hidden {
        Some(h) => {
            ensure!(h > 0, InvalidModel, "hidden_size {h} must be positive");
            if let Dim::Known(r) = rs[2] {
                ensure!(
                    r == h as u64,
                    InvalidModel,
                    "hidden_size {h} does not match R's last dim {r}"
                );
            }
            Dim::Known(h as u64)
        }
        None => rs[2].clone(),
    };
    let dirs = Dim::Known(match direction {
        RnnDirection::Bidirectional => 2,
        _ => 1,
    });
    let (seq, batch) = match batch_major {
        true => (xs[1].clone(), xs[0].clone()),
        false => (xs[0].clone(), xs[1].clone()),
    };
    let (y, state) = match batch_major {
        true => (
            vec![batch.clone(), seq, dirs.clone(), h.clone()],
            vec![batch, dirs, h],
        ),
        false => (
            vec![seq, dirs.clone(), batch.clone(), h.clone()],
            vec![dirs, batch, h],
        ),
    };
    let mut outs = vec![typed(dt, Some(y))];
    outs.extend((1..x.n_outputs()).map(|_| typed(dt, Some(state.clone()))));
    Ok(Some(outs))
}
