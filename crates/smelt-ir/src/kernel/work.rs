//! What a kernel group costs: arithmetic (flops) and memory traffic (bytes read plus
//! written, each distinct element once), so a profile can give each kernel's achieved
//! rate beside the machine's ceilings.

use super::{GroupBody, KernelGroup, KernelPlan, Loop, ScalarOp, TensorRef};
use crate::op::{LayoutOp, NnOp, Op};

/// A kernel group's work: flops (a multiply-add counts two) and bytes moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Floating-point operations.
    pub flops: u64,
    /// Bytes read plus bytes written.
    pub bytes: u64,
}

impl KernelPlan {
    /// The work of `group`, estimated from its shapes (loop bodies count one flop per
    /// arithmetic instruction and element; anchors count their multiply-adds).
    pub fn work(&self, group: &KernelGroup) -> Work {
        match &group.body {
            GroupBody::Elementwise(l) => self.loop_work(l),
            GroupBody::Reduction(r) => self.loop_work(&r.body),
            GroupBody::Anchor(a) => {
                let ins: u64 = a.inputs.iter().flatten().map(|t| self.ref_bytes(t)).sum();
                let epi = self.loop_work(&a.epilogue);
                let inputs: Vec<&[usize]> = a
                    .inputs
                    .iter()
                    .map(|t| t.as_ref().map_or(&[][..], |t| &t.shape[..]))
                    .collect();
                Work {
                    flops: anchor_flops(&a.op, &inputs, &a.shape).saturating_add(epi.flops),
                    bytes: ins.saturating_add(epi.bytes),
                }
            }
            GroupBody::Copy { src, dst } => Work {
                flops: 0,
                bytes: self.ref_bytes(src).saturating_add(self.ref_bytes(dst)),
            },
            // A gather reads as many data bytes as it writes (not its whole table).
            GroupBody::Single(s) if matches!(s.op, Op::Layout(LayoutOp::Gather { .. })) => {
                let out: u64 = s.outputs.iter().flatten().map(|t| self.ref_bytes(t)).sum();
                let idx = s
                    .inputs
                    .get(1)
                    .and_then(Option::as_ref)
                    .map_or(0, |t| self.ref_bytes(t));
                Work {
                    flops: 0,
                    bytes: 2 * out + idx,
                }
            }
            GroupBody::Single(s) => Work {
                flops: 0,
                bytes: s
                    .inputs
                    .iter()
                    .chain(&s.outputs)
                    .flatten()
                    .map(|t| self.ref_bytes(t))
                    .sum(),
            },
        }
    }

    fn loop_work(&self, l: &Loop) -> Work {
        let n: u64 = l.shape.iter().map(|&d| d as u64).product();
        let arith = l
            .ops
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    ScalarOp::Unary(..) | ScalarOp::Binary(..) | ScalarOp::Select(..)
                )
            })
            .count() as u64;
        let bytes = l
            .loads
            .iter()
            .chain(l.stores.iter().map(|s| &s.dst))
            .map(|t| self.ref_bytes(t))
            .fold(0u64, u64::saturating_add);
        Work {
            flops: n.saturating_mul(arith),
            bytes,
        }
    }

    /// Bytes of the distinct elements a window touches (broadcast dims count once).
    fn ref_bytes(&self, t: &TensorRef) -> u64 {
        let elems: u64 = t
            .shape
            .iter()
            .zip(&t.strides)
            .filter(|(_, &s)| s != 0)
            .map(|(&d, _)| d as u64)
            .product();
        let size = self
            .buffers
            .get(t.buffer.0 as usize)
            .map_or(4, |b| b.dtype.storage_size() as u64);
        elems.saturating_mul(size)
    }
}

/// Multiply-add flops of an anchor op from its input shapes and result shape.
fn anchor_flops(op: &Op, inputs: &[&[usize]], out: &[usize]) -> u64 {
    let numel = |s: &[usize]| s.iter().map(|&d| d as u64).product::<u64>();
    let shape = |i: usize| inputs.get(i).copied().unwrap_or(&[]);
    let out_n = numel(out);
    match op {
        Op::Nn(NnOp::MatMul) => {
            let a = shape(0);
            2 * out_n * a.last().copied().unwrap_or(1) as u64
        }
        Op::Nn(NnOp::Gemm { .. }) => {
            let m = out.first().copied().unwrap_or(1).max(1) as u64;
            2 * out_n * (numel(shape(0)) / m)
        }
        Op::Nn(NnOp::Conv { .. } | NnOp::ConvBlocked { .. }) => {
            // Each output element takes (C_in / group) * kernel products.
            let w = shape(1);
            let cout = w.first().copied().unwrap_or(1).max(1) as u64;
            2 * out_n * (numel(w) / cout)
        }
        Op::Nn(NnOp::ConvTranspose { .. }) => {
            // Each input element feeds (C_out / group) * kernel outputs.
            let w = shape(1);
            let cin = w.first().copied().unwrap_or(1).max(1) as u64;
            2 * numel(shape(0)) * (numel(w) / cin)
        }
        Op::Nn(NnOp::Attention { .. }) => {
            // Q K^T and P V: the key sequence length is K's second-to-last dim.
            let k = shape(1);
            let t = k.get(k.len().wrapping_sub(2)).copied().unwrap_or(1) as u64;
            2 * t * (numel(shape(0)) + out_n)
        }
        Op::Nn(NnOp::MaxPool { .. } | NnOp::AveragePool { .. }) => numel(shape(0)).max(out_n),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_flops_count_multiply_adds() {
        let mm = Op::Nn(NnOp::MatMul);
        assert_eq!(
            anchor_flops(&mm, &[&[2, 3, 4], &[4, 5]], &[2, 3, 5]),
            2 * 30 * 4
        );
        let conv_w: &[usize] = &[8, 4, 3, 3];
        let conv = Op::Nn(NnOp::Conv {
            auto_pad: crate::op::AutoPad::NotSet,
            dilations: vec![],
            group: 1,
            kernel_shape: vec![],
            pads: vec![],
            strides: vec![],
        });
        assert_eq!(
            anchor_flops(&conv, &[&[1, 4, 5, 5], conv_w], &[1, 8, 5, 5]),
            2 * 200 * 36
        );
    }
}
