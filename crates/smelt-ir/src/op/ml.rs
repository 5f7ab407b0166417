//! Attribute types of the ai.onnx.ml ops that need more than a field or two (support
//! vector machines, CastMap); the ops themselves are variants of [`super::MiscOp`].

use serde::{Deserialize, Serialize};

/// The kernel of a support vector machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SvmKernel {
    /// `x . y`.
    Linear,
    /// `(gamma x . y + coef0) ^ degree`.
    Poly,
    /// `exp(-gamma |x - y|^2)`.
    Rbf,
    /// `tanh(gamma x . y + coef0)`.
    Sigmoid,
}

/// A support vector machine's geometry, shared by SVMClassifier and SVMRegressor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SvmSpec {
    /// The kernel (Linear when there are no support vectors: the liblinear form).
    pub kernel: SvmKernel,
    /// Kernel parameters.
    pub gamma: f32,
    /// Kernel parameters.
    pub coef0: f32,
    /// Kernel parameters.
    pub degree: f32,
    /// Support vectors, [vectors, features] row-major (empty in the liblinear form).
    pub support_vectors: Vec<f32>,
    /// Number of support vectors.
    pub vectors: usize,
    /// Features per row.
    pub features: usize,
    /// Dual coefficients (SVC: [classes - 1, vectors]; liblinear: [classes, features];
    /// regressor: [vectors], or [features] in the liblinear form).
    pub coefficients: Vec<f32>,
    /// Intercepts: one per class pair (SVC), or one.
    pub rho: Vec<f32>,
}

/// The classifier part of SVMClassifier (the geometry is in `svm`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SvmClassifierSpec {
    /// The geometry.
    pub svm: SvmSpec,
    /// Support vectors per class, in class order (empty in the liblinear form).
    pub vectors_per_class: Vec<usize>,
    /// Platt scaling per class pair (empty: scores are decision values).
    pub prob_a: Vec<f32>,
    /// Platt scaling per class pair.
    pub prob_b: Vec<f32>,
    /// 0 none, 1 softmax, 2 logistic, 3 softmax_zero, 4 probit.
    pub post_transform: i64,
    /// Class labels (i64 or strings).
    pub labels: crate::Tensor,
}

/// What CastMap turns a map's values into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CastMapTo {
    /// f32.
    Float,
    /// i64.
    Int64,
    /// Strings.
    String,
}
