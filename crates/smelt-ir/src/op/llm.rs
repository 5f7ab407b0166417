//! The `LlmOp` family: language-model building blocks: SwiGLU, KV-cache scatter, linear and flex attention, causal convolution with state.

use crate::{DType, Graph};
use serde::{Deserialize, Serialize};

/// Where `TensorScatter` writes when the update runs past the end of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CacheWriteMode {
    /// Writes must fit: `write_index + sequence_length <= max_sequence_length`.
    Linear,
    /// Write positions wrap around modulo `max_sequence_length`.
    Circular,
}

/// The recurrence of `LinearAttention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinearAttentionRule {
    /// `S_t = S_{t-1} + k_t ⊗ v_t`.
    Linear,
    /// `S_t = exp(g_t) S_{t-1} + k_t ⊗ v_t` (needs `decay`).
    Gated,
    /// `S_t = S_{t-1} + β_t k_t ⊗ (v_t - S_{t-1}ᵀ k_t)` (needs `beta`).
    Delta,
    /// Gated and delta together (needs `decay` and `beta`).
    GatedDelta,
}

/// The activation fused into `CausalConvWithState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConvActivation {
    /// No activation.
    None,
    /// SiLU (Swish with alpha 1): `x * sigmoid(x)`.
    Silu,
}

crate::op_family! {
    /// Language-model building blocks: SwiGLU, KV-cache scatter, linear and flex attention, causal convolution with state.
    pub enum LlmOp {
        /// `Y = A * sigmoid(alpha * A) * B` for gate `A` and value `B` of identical shapes.
        SwiGLU {
            /// Scale of the gate inside the sigmoid.
            alpha: f32,
        },
        /// KV-cache update: copies `update` into `past_cache` along `axis` starting at each
        /// batch's `write_indices` entry (input 2, zeros when absent).
        TensorScatter {
            /// Linear or wrap-around writes.
            mode: CacheWriteMode,
            /// The sequence axis (may be negative; never the batch axis 0).
            axis: i64,
        },
        /// Recurrent linear attention over packed `(B, T, H*D)` query/key/value, with optional
        /// past state, decay and beta inputs; outputs the attention and the present state.
        LinearAttention {
            /// Number of query heads.
            q_num_heads: i64,
            /// Number of key/value heads (divides `q_num_heads`).
            kv_num_heads: i64,
            /// Output scale; None means `1/sqrt(d_k)`.
            scale: Option<f32>,
            /// The state recurrence.
            update_rule: LinearAttentionRule,
            /// Chunk size hint for chunk-parallel kernels (does not change results).
            chunk_size: i64,
        },
        /// Causal depthwise 1-D convolution of `(B, C, L)` with kernel `(C, 1, k)`, optional bias
        /// and carried state `(B, C, k-1)`; outputs the result and the new state.
        CausalConvWithState {
            /// Activation applied to the convolution output.
            activation: ConvActivation,
        },
        /// Rank-4 scaled dot-product attention with optional score and probability modifier
        /// subgraphs (domain `ai.onnx.preview`).
        FlexAttention {
            /// Scale of `Q Kᵀ`; None means `1/sqrt(head_size)`.
            scale: Option<f32>,
            /// Subgraph applied to the scores before the softmax.
            score_mod: Option<Box<Graph>>,
            /// Subgraph applied to the probabilities after the softmax.
            prob_mod: Option<Box<Graph>>,
            /// Element type of the softmax; None means f32 (f64 for f64 inputs).
            softmax_precision: Option<DType>,
        },
    }
}

impl LlmOp {
    /// The subgraphs the op carries (FlexAttention's modifiers).
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            LlmOp::FlexAttention {
                score_mod,
                prob_mod,
                ..
            } => score_mod
                .iter()
                .chain(prob_mod.iter())
                .map(|g| &**g)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The subgraphs the op carries, for passes that rewrite them.
    pub fn subgraphs_mut(&mut self) -> Vec<&mut Graph> {
        match self {
            LlmOp::FlexAttention {
                score_mod,
                prob_mod,
                ..
            } => score_mod
                .iter_mut()
                .chain(prob_mod.iter_mut())
                .map(|g| &mut **g)
                .collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{ElementwiseOp, Op};
    use crate::text::{parse_graph, print_graph};
    use crate::{GraphInput, Node};

    #[test]
    fn flex_attention_with_subgraph_round_trips_through_text() {
        let mut sub = Graph {
            name: "score_mod".into(),
            ..Graph::default()
        };
        let s = sub.add_value("scores", None);
        sub.inputs.push(GraphInput {
            id: s,
            default: None,
        });
        let o = sub.add_value("out", None);
        sub.nodes.push(Node {
            name: "relu".into(),
            op: Op::Elementwise(ElementwiseOp::Relu),
            inputs: vec![Some(s)],
            outputs: vec![Some(o)],
        });
        sub.outputs.push(o);
        let mut g = Graph {
            name: "g".into(),
            ..Graph::default()
        };
        let ids: Vec<_> = ["q", "k", "v"]
            .iter()
            .map(|n| {
                let id = g.add_value(*n, None);
                g.inputs.push(GraphInput { id, default: None });
                Some(id)
            })
            .collect();
        let y = g.add_value("y", None);
        g.nodes.push(Node {
            name: "flex".into(),
            op: Op::Llm(LlmOp::FlexAttention {
                scale: Some(0.5),
                score_mod: Some(Box::new(sub)),
                prob_mod: None,
                softmax_precision: Some(DType::F32),
            }),
            inputs: ids,
            outputs: vec![Some(y)],
        });
        let z = g.add_value("z", None);
        g.nodes.push(Node {
            name: "scatter".into(),
            op: Op::Llm(LlmOp::TensorScatter {
                mode: CacheWriteMode::Circular,
                axis: -2,
            }),
            inputs: vec![Some(y), Some(y)],
            outputs: vec![Some(z)],
        });
        g.outputs.push(z);
        let text = print_graph(&g);
        let back = parse_graph(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, g, "{text}");
    }
}
