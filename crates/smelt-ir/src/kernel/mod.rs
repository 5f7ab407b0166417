//! Kernel groups: the backend-neutral description of what a compiled plan launches.
//!
//! A [`KernelPlan`] is specialized to concrete shapes. Its storage is a list of [`Buffer`]s
//! (graph inputs, weights, graph outputs, and intermediates that live in one arena); every
//! tensor a kernel touches is a strided window ([`TensorRef`]) onto one buffer, so transposes,
//! splits, reshapes and in-place concatenation cost no kernel. A group's work is written as a
//! loop nest over an iteration space whose body is a short program of f32 scalar ops
//! ([`ScalarOp`]): the one "ops" protocol every backend renders (the CPU interpreter today,
//! fast CPU kernels and CUDA source later).

pub mod check;
pub mod work;
pub use work::Work;

use crate::{DType, Op, Tensor};
use serde::{Deserialize, Serialize};

/// Index of a buffer in [`KernelPlan::buffers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BufferId(pub u32);

/// Where a buffer's storage comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BufferKind {
    /// The caller's input number `i` (read only).
    Input(usize),
    /// Weight number `i` of [`KernelPlan::weights`] (read only).
    Weight(usize),
    /// Graph output number `i`: allocated per run and handed to the caller.
    Output(usize),
    /// An intermediate tensor at a byte offset of the run's arena.
    Arena {
        /// Byte offset in the arena (aligned to [`ARENA_ALIGN`]).
        offset: usize,
    },
}

/// Alignment, in bytes, of every arena offset.
pub const ARENA_ALIGN: usize = 64;

/// A dense, row-major block of elements of one type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    /// The name of the graph value it was made for.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// The value's shape (its element count is the buffer's length).
    pub shape: Vec<usize>,
    /// Where the storage lives.
    pub kind: BufferKind,
}

impl Buffer {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes (sub-byte types take a byte per element, as [`Tensor`] stores them).
    pub fn bytes(&self) -> usize {
        self.len() * self.dtype.storage_size()
    }
}

/// A strided window onto a buffer: element `idx` is at `offset + sum(idx[d] * strides[d])`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorRef {
    /// The buffer.
    pub buffer: BufferId,
    /// Offset of element zero, in elements.
    pub offset: usize,
    /// Extent per dimension.
    pub shape: Vec<usize>,
    /// Step per dimension, in elements (0 broadcasts).
    pub strides: Vec<isize>,
}

impl TensorRef {
    /// The whole buffer of `shape`, row-major.
    pub fn dense(buffer: BufferId, shape: &[usize]) -> TensorRef {
        TensorRef {
            buffer,
            offset: 0,
            shape: shape.to_vec(),
            strides: crate::strides(shape)
                .into_iter()
                .map(|s| s as isize)
                .collect(),
        }
    }

    /// Whether the window is a row-major block (possibly at an offset).
    pub fn is_contiguous(&self) -> bool {
        let mut expect = 1isize;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n != 1 && s != expect {
                return false;
            }
            // Saturating: an empty window's other dims may multiply past isize (a fuzz
            // finding panicked here); past it no stride matches.
            expect = expect.saturating_mul(n as isize);
        }
        true
    }

    /// The smallest and one past the largest element offset the window touches,
    /// or None when it has no element.
    pub fn span(&self) -> Option<(isize, isize)> {
        if self.shape.contains(&0) {
            return None;
        }
        let (mut lo, mut hi) = (self.offset as isize, self.offset as isize);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (n as isize - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        Some((lo, hi + 1))
    }
}

/// A scalar function of one f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unary {
    /// -x
    Neg,
    /// |x|
    Abs,
    /// e^x
    Exp,
    /// ln x
    Log,
    /// sqrt x
    Sqrt,
    /// 1 / sqrt x
    Rsqrt,
    /// 1 / x
    Recip,
    /// tanh x
    Tanh,
    /// erf x
    Erf,
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// max(x, 0)
    Relu,
    /// floor x
    Floor,
    /// ceil x
    Ceil,
    /// x rounded half to even
    Round,
    /// sign x (0 at 0)
    Sign,
    /// sin x
    Sin,
    /// cos x
    Cos,
    /// ln(1 + e^x)
    Softplus,
    /// 1 if x == 0 else 0 (logical not of a 0/1 value)
    Not,
    /// 1 if x is NaN else 0
    IsNan,
    /// x / 2 * (1 + erf(x / sqrt 2)) (GELU)
    Gelu,
    /// x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) (GELU, tanh form)
    GeluTanh,
    /// x / (1 + e^-x) (SiLU, Swish with alpha 1)
    Silu,
    /// x * clamp(x / 6 + 1/2, 0, 1)
    HardSwish,
}

/// A scalar function of two f32s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Binary {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b
    Div,
    /// max(a, b), NaN if either is NaN
    Max,
    /// min(a, b), NaN if either is NaN
    Min,
    /// a^b
    Pow,
    /// 1 if a == b else 0
    Eq,
    /// 1 if a < b else 0
    Lt,
    /// 1 if a <= b else 0
    Le,
    /// 1 if a > b else 0
    Gt,
    /// 1 if a >= b else 0
    Ge,
    /// 1 if both are non-zero else 0
    And,
    /// 1 if either is non-zero else 0
    Or,
}

/// One instruction of a group body; operands are indices of earlier instructions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum ScalarOp {
    /// The element of load `i` at the current index, converted to f32.
    Load(usize),
    /// A constant.
    Const(f32),
    /// The anchor's result at the current index (anchor epilogues only).
    Acc,
    /// The result of reduction stage `k` for the current row (reduction groups only).
    Reduced(usize),
    /// A unary function.
    Unary(Unary, usize),
    /// A binary function.
    Binary(Binary, usize, usize),
    /// `a` where `cond` is non-zero, else `b`: (cond, a, b).
    Select(usize, usize, usize),
}

impl ScalarOp {
    /// The instructions this one reads, in operand order.
    pub fn operands(&self) -> impl Iterator<Item = usize> {
        let ops = match *self {
            ScalarOp::Load(_) | ScalarOp::Const(_) | ScalarOp::Acc | ScalarOp::Reduced(_) => {
                [None; 3]
            }
            ScalarOp::Unary(_, a) => [Some(a), None, None],
            ScalarOp::Binary(_, a, b) => [Some(a), Some(b), None],
            ScalarOp::Select(c, a, b) => [Some(c), Some(a), Some(b)],
        };
        ops.into_iter().flatten()
    }
}

/// Writes a body value to a tensor, converting to the buffer's element type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Store {
    /// The instruction whose value is written.
    pub value: usize,
    /// Where, indexed like the loop (reductions: like the rows when `per_row`).
    pub dst: TensorRef,
    /// Reductions only: the value is one per row and `dst` is indexed by the kept dims.
    pub per_row: bool,
}

/// An elementwise loop nest: every index of `shape` evaluates `ops` and writes `stores`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loop {
    /// The iteration space.
    pub shape: Vec<usize>,
    /// Tensors read, each indexed like the iteration space (strides 0 broadcast).
    pub loads: Vec<TensorRef>,
    /// The body.
    pub ops: Vec<ScalarOp>,
    /// The results written.
    pub stores: Vec<Store>,
}

/// How a reduction stage combines the values of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Combine {
    /// Sum, starting at 0.
    Sum,
    /// Maximum, starting at -inf.
    Max,
    /// Minimum, starting at +inf.
    Min,
    /// Product, starting at 1.
    Prod,
}

/// One pass over a row: combines the instruction `value` over the reduced dims.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// How values combine.
    pub combine: Combine,
    /// The instruction evaluated per element of the row (it may use earlier stages).
    pub value: usize,
}

/// A reduction with prologue and epilogue: rows are the dims before `reduce_from`,
/// the dims from `reduce_from` on are reduced. Stages run in order over each row;
/// stores write per element (softmax, normalization) or per row (sums, means).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reduction {
    /// The loop: shape (kept dims then reduced dims), loads, body, stores.
    pub body: Loop,
    /// First reduced dimension of `body.shape`.
    pub reduce_from: usize,
    /// The reduction stages; `ScalarOp::Reduced(k)` reads stage k's result.
    pub stages: Vec<Stage>,
}

/// An anchor op (MatMul, Gemm, Conv, attention...) whose result flows through an epilogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anchor {
    /// The anchor op with its attributes.
    pub op: Op,
    /// Its inputs (None for an omitted optional input).
    pub inputs: Vec<Option<TensorRef>>,
    /// The anchor's result shape.
    pub shape: Vec<usize>,
    /// The epilogue over the anchor's result (`ScalarOp::Acc`); its loop shape is `shape`.
    pub epilogue: Loop,
}

/// An op run whole by the backend (its own kernel, no fusion).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Single {
    /// The op with its attributes.
    pub op: Op,
    /// Its inputs (None for an omitted optional input).
    pub inputs: Vec<Option<TensorRef>>,
    /// Where each output goes (None for an omitted or unused output).
    pub outputs: Vec<Option<TensorRef>>,
}

/// What a kernel group does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum GroupBody {
    /// An elementwise chain with broadcasts.
    Elementwise(Loop),
    /// A reduction with elementwise prologue and epilogue.
    Reduction(Reduction),
    /// An anchor op with an elementwise epilogue.
    Anchor(Anchor),
    /// A copy between two windows of any element type (exact).
    Copy {
        /// The source window.
        src: TensorRef,
        /// The destination window (same shape).
        dst: TensorRef,
    },
    /// One op run whole.
    Single(Single),
}

impl GroupBody {
    /// The kind's name: elementwise, reduction, anchor, copy or single.
    pub fn kind(&self) -> &'static str {
        match self {
            GroupBody::Elementwise(_) => "elementwise",
            GroupBody::Reduction(_) => "reduction",
            GroupBody::Anchor(_) => "anchor",
            GroupBody::Copy { .. } => "copy",
            GroupBody::Single(_) => "single",
        }
    }
}

/// One kernel launch and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelGroup {
    /// The member ops' names, in graph order (e.g. `Conv`, `Sigmoid`, `Mul`).
    pub ops: Vec<String>,
    /// The source node names of the members, in the same order.
    pub nodes: Vec<String>,
    /// The work.
    pub body: GroupBody,
    /// How to run it where timing on a machine chose (`smelt compile --autotune`); by
    /// default the backend's cost model decides.
    #[serde(default, skip_serializing_if = "KernelChoice::is_default")]
    pub choice: KernelChoice,
}

/// A kernel choice for one group that overrides the backend's cost model. A choice that
/// does not apply to the group (an algorithm its shape cannot use) is ignored: choices
/// change speed and rounding, never what is computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelChoice {
    /// The convolution algorithm (None: the cost model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conv: Option<ConvAlgorithm>,
    /// The most threads the group runs on (None: as many as the run has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads: Option<u32>,
}

impl KernelChoice {
    /// Whether nothing is chosen (the cost model decides everything).
    pub fn is_default(&self) -> bool {
        *self == KernelChoice::default()
    }

    /// A short description (`conv direct, 1 thread`), empty for the default.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(a) = self.conv {
            parts.push(format!("conv {}", a.name()));
        }
        if let Some(n) = self.max_threads {
            parts.push(format!("{n} thread{}", if n == 1 { "" } else { "s" }));
        }
        parts.join(", ")
    }
}

/// How a convolution is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConvAlgorithm {
    /// Unfolded input (im2col, or none for pointwise) times the packed weights.
    Gemm,
    /// Direct convolution over tiles of output rows.
    Direct,
    /// Winograd F(4x4, 3x3) (3x3 stride-1 convolutions only).
    Winograd,
    /// Winograd F(2x2, 3x3) (3x3 stride-1 convolutions only): more multiplies than
    /// F(4x4), 16 transformed weights per filter instead of 36.
    WinogradF2,
}

impl ConvAlgorithm {
    /// Every algorithm, in a fixed order.
    pub const ALL: [ConvAlgorithm; 4] = [
        ConvAlgorithm::Gemm,
        ConvAlgorithm::Direct,
        ConvAlgorithm::Winograd,
        ConvAlgorithm::WinogradF2,
    ];

    /// The algorithm's name: gemm, direct, winograd or winograd-f2.
    pub fn name(self) -> &'static str {
        match self {
            ConvAlgorithm::Gemm => "gemm",
            ConvAlgorithm::Direct => "direct",
            ConvAlgorithm::Winograd => "winograd",
            ConvAlgorithm::WinogradF2 => "winograd-f2",
        }
    }
}

/// A fusion that was considered and not done, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectedFusion {
    /// The node that was not merged.
    pub node: String,
    /// The group (named by its first node) it was not merged into.
    pub into: String,
    /// Why.
    pub reason: String,
}

/// Memory figures of a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryStats {
    /// Bytes of the arena every run needs.
    pub arena_bytes: usize,
    /// Bytes of every tensor the plan materializes that is not a graph input, weight or output.
    pub intermediate_bytes: usize,
    /// Intermediates that reuse a dying input's storage (in place).
    pub in_place: usize,
    /// Concat results whose producers write into them directly.
    pub concat_in_place: usize,
}

/// A compiled, shape-specialized program: buffers, weights and kernel groups in run order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelPlan {
    /// Every buffer.
    pub buffers: Vec<Buffer>,
    /// Weight contents, indexed by `BufferKind::Weight`.
    #[serde(skip)]
    pub weights: Vec<Tensor>,
    /// The input names, in the order `BufferKind::Input` counts them.
    pub inputs: Vec<String>,
    /// The output names and buffers, in graph order.
    pub outputs: Vec<(String, BufferId)>,
    /// The kernels, in run order.
    pub groups: Vec<KernelGroup>,
    /// Fusions not done, with reasons.
    pub rejected: Vec<RejectedFusion>,
    /// Arena size and intermediate bytes.
    pub memory: MemoryStats,
}

impl KernelPlan {
    /// The buffer behind an id.
    pub fn buffer(&self, id: BufferId) -> &Buffer {
        &self.buffers[id.0 as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity_of_a_window_whose_dims_multiply_past_isize() {
        let w = TensorRef {
            buffer: BufferId(0),
            offset: 0,
            shape: vec![0, 1 << 62, 1 << 62],
            strides: vec![1, 1 << 20, 1],
        };
        assert!(!w.is_contiguous());
        assert_eq!(w.span(), None);
        assert!(TensorRef::dense(BufferId(0), &[2, 3]).is_contiguous());
    }
}
