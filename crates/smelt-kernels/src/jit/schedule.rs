//! What a body's machine code does, before any instruction is chosen: the ops in emission
//! order (each load just before its first reader), the value slots each op's result
//! occupies (reused once no later op reads it), and the constants hoisted out of the loop.

use smelt_ir::kernel::{Binary, ScalarOp, Unary};

/// The constants an op's instructions need besides the body's own.
pub(super) const ONE: f32 = 1.0;
/// See [`ONE`].
pub(super) const MINUS_ONE: f32 = -1.0;
/// See [`ONE`].
pub(super) const ZERO: f32 = 0.0;

/// The mask that clears a float's sign bit.
pub(super) fn abs_mask() -> f32 {
    f32::from_bits(0x7fff_ffff)
}

/// A body scheduled for code generation.
pub(super) struct Schedule {
    /// Ops in emission order: every op the roots need but constants (hoisted), each load
    /// placed right before its first reader.
    pub steps: Vec<usize>,
    /// Each op's value slot (only meaningful for ops in `steps`).
    pub slot: Vec<usize>,
    /// Most slots live at once.
    pub slots: usize,
    /// Hoisted constants, each loaded once into a register of its own.
    pub consts: Vec<f32>,
    /// Each op's index into `consts` (`Const` ops only).
    pub const_of: Vec<usize>,
}

impl Schedule {
    /// The index of constant `c` in `consts` (by bits; it must have been asked for).
    pub(super) fn special(&self, c: f32) -> usize {
        self.consts
            .iter()
            .position(|k| k.to_bits() == c.to_bits())
            .expect("a special constant the schedule did not collect")
    }
}

/// The constants op `op`'s instructions need, or `None` if it has no generated form.
fn needs(op: &ScalarOp) -> Option<&'static [f32]> {
    Some(match op {
        ScalarOp::Load(_) | ScalarOp::Const(_) => &[],
        ScalarOp::Acc | ScalarOp::Reduced(_) => return None,
        ScalarOp::Unary(u, _) => match u {
            Unary::Neg => &[MINUS_ONE],
            Unary::Abs => &[],
            Unary::Sqrt | Unary::Floor | Unary::Ceil | Unary::Round => &[],
            Unary::Relu => &[ZERO],
            Unary::Recip | Unary::Rsqrt | Unary::IsNan => &[ONE],
            Unary::Not => &[ZERO, ONE],
            Unary::Sign => &[ZERO, ONE, MINUS_ONE],
            _ => return None,
        },
        ScalarOp::Binary(b, _, _) => match b {
            Binary::Add | Binary::Sub | Binary::Mul | Binary::Div => &[],
            Binary::Max | Binary::Min => &[],
            Binary::Eq | Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge => &[ONE],
            Binary::And | Binary::Or => &[ZERO, ONE],
            _ => return None,
        },
        ScalarOp::Select(..) => &[ZERO],
    })
}

/// Schedules the ops that `roots` need (`order`: those ops, ascending); `None` when one
/// has no generated form (the caller interprets the body).
pub(super) fn schedule(ops: &[ScalarOp], order: &[usize], roots: &[usize]) -> Option<Schedule> {
    let n = ops.len();
    let mut consts: Vec<f32> = Vec::new();
    let mut add_const = |c: f32| match consts.iter().position(|k| k.to_bits() == c.to_bits()) {
        Some(i) => i,
        None => {
            consts.push(c);
            consts.len() - 1
        }
    };
    let mut const_of = vec![usize::MAX; n];
    for &i in order {
        let op = &ops[i];
        for &c in needs(op)? {
            add_const(c);
        }
        if matches!(op, ScalarOp::Unary(Unary::Abs, _)) {
            add_const(abs_mask());
        }
        if let ScalarOp::Const(c) = op {
            const_of[i] = add_const(*c);
        }
    }
    // Emission order: loads lazily, before their first reader (or at the end for a load
    // that is itself stored).
    let is_load = |i: usize| matches!(ops[i], ScalarOp::Load(_));
    let mut placed = vec![false; n];
    let mut steps = Vec::with_capacity(order.len());
    for &i in order {
        if is_load(i) || matches!(ops[i], ScalarOp::Const(_)) {
            continue;
        }
        for a in ops[i].operands() {
            if is_load(a) && !placed[a] {
                placed[a] = true;
                steps.push(a);
            }
        }
        placed[i] = true;
        steps.push(i);
    }
    for &r in roots {
        if is_load(r) && !placed[r] {
            placed[r] = true;
            steps.push(r);
        }
    }
    // Liveness: a value is read last at its last reader's step, a root at the end.
    let end = steps.len();
    let mut last = vec![0usize; n];
    for (s, &i) in steps.iter().enumerate() {
        for a in ops[i].operands() {
            last[a] = last[a].max(s);
        }
    }
    for &r in roots {
        last[r] = end;
    }
    // Slots: the dying operands' slots are freed before the result takes one where the
    // op's instructions read every operand before writing the destination; otherwise
    // after (Max, Min and Sign read an operand once the destination is written).
    let mut slot = vec![usize::MAX; n];
    let mut free: Vec<bool> = Vec::new();
    for (s, &i) in steps.iter().enumerate() {
        let release = |free: &mut Vec<bool>, slot: &[usize]| {
            for a in ops[i].operands() {
                if const_of[a] == usize::MAX && last[a] == s {
                    free[slot[a]] = true;
                }
            }
        };
        let early = !matches!(
            ops[i],
            ScalarOp::Binary(Binary::Max | Binary::Min, ..) | ScalarOp::Unary(Unary::Sign, _)
        );
        if early {
            release(&mut free, &slot);
        }
        let k = match free.iter().position(|&f| f) {
            Some(k) => k,
            None => {
                free.push(true);
                free.len() - 1
            }
        };
        free[k] = false;
        slot[i] = k;
        if !early {
            release(&mut free, &slot);
        }
    }
    Some(Schedule {
        steps,
        slot,
        slots: free.len(),
        consts,
        const_of,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_ir::kernel::ScalarOp::{Binary as B, Const, Load};

    #[test]
    fn loads_placed_late_and_slots_reused() {
        // x, y loaded; a chain that alternates them; the last op is the root.
        let ops = vec![
            Load(0),
            Load(1),
            Const(2.0),
            B(Binary::Add, 0, 2),
            B(Binary::Mul, 3, 1),
            B(Binary::Sub, 4, 0),
        ];
        let order = smelt_ir::kernel::check::deps(&ops, &[5]);
        let s = schedule(&ops, &order, &[5]).unwrap();
        assert_eq!(s.steps, vec![0, 3, 1, 4, 5]);
        // x lives to the end, y and the chain's value beside it: three slots.
        assert_eq!(s.slots, 3);
        assert_eq!((s.slot[0], s.slot[3], s.slot[1], s.slot[4]), (0, 1, 2, 1));
        assert_eq!(s.consts, vec![2.0]);
        assert!(schedule(&[Load(0), ScalarOp::Acc], &[0, 1], &[1]).is_none());
    }
}
