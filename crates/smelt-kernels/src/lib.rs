//! smelt's fast CPU kernels. They know nothing of graphs: strided f32 slices in, results
//! out. Each instruction set has one table of kernels ([`Kernels`]), chosen once at start
//! by feature detection ([`kernels`]); tests and benchmarks can ask for any ISA the CPU
//! supports ([`Kernels::for_isa`]). Work is split over the process's one [`pool`].

pub mod amx;
pub mod amx_conv;
pub mod attention;
pub mod blocked;
pub mod buf;
pub mod conv;
pub mod convert;
pub mod direct;
pub mod epilogue;
pub mod gemm;
pub mod half;
pub mod implicit;
pub mod isa;
pub mod jit;
pub mod pool;
pub mod pooling;
pub mod prepack;
pub mod program;
pub mod qgemm;
pub mod recurrent;
pub mod simd;
pub mod strided;
#[doc(hidden)]
pub mod testing;
pub mod vmath;
pub mod winograd;
pub mod winograd_blocked;

pub use isa::Isa;

use gemm::Micro;
use std::sync::OnceLock;

/// The kernels of one instruction set.
pub struct Kernels {
    /// The instruction set.
    pub isa: Isa,
    /// GEMM micro-kernels and their tile geometry.
    pub micro: Micro,
    /// Evaluates a fused group's scalar-op program over a chunk.
    pub eval: program::EvalFn,
    /// Combines a chunk into a reduction stage's partial.
    pub reduce: program::ReduceFn,
    /// Softmax of a row, after a scale and an additive mask.
    pub softmax: program::SoftmaxFn,
    /// Softmax rows without the final normalization (attention applies it to its output).
    pub softmax_exp: program::SoftmaxExpFn,
    /// Softmax down the columns of a strided block (softmax over a non-innermost axis).
    pub softmax_cols: program::SoftmaxColsFn,
    /// Layer normalization of a row.
    pub layer_norm: program::LayerNormFn,
    /// Finishes a GEMM tile with a fused epilogue.
    pub finish: epilogue::FinishFn,
    /// One channel of a depthwise convolution.
    pub depthwise: conv::DepthwiseFn,
    /// A strided row copy (a convolution input's column phase).
    pub strided_copy: conv::StridedCopyFn,
    /// The direct convolution micro-kernel.
    pub direct: direct::DirectFn,
    /// The direct kernel finishing a full tile with its fused epilogue, where the ISA has
    /// one.
    pub direct_fused: Option<direct::DirectFusedFn>,
    /// The direct kernel over the first half of its tile's pixels, where the ISA has one.
    pub direct_half: Option<direct::DirectFn>,
    /// Output channels of the direct kernel's tile (its pixels are `micro.nr`).
    pub direct_mr: usize,
    /// The column-stride-2 direct tile kernel reading the input in place, where the ISA has
    /// one (its tile rows are `direct_mr`).
    pub direct_s2: Option<strided::TileFn>,
    /// Winograd F(4x4, 3x3) transforms: input, output, and tiles per call.
    pub winograd: (winograd::InputFn, winograd::OutputFn, usize),
    /// The Winograd output transform of one tile over a block of `winograd.2` channels.
    pub winograd_output_channels: winograd::OutputChannelsFn,
    /// Winograd F(2x2, 3x3) transforms (`winograd.2` tiles or channels per call).
    pub winograd_f2: winograd::Transforms,
    /// Winograd transforms in the blocked layout: F(2x2, 3x3), then F(4x4, 3x3).
    pub winograd_blocked: [winograd_blocked::Transforms; 2],
    /// One channel of max or average pooling.
    pub pool: pooling::PoolFn,
    /// One recurrent step's gate math over a block of batch rows and hidden units.
    pub recurrent_cell: recurrent::cell::CellFn,
    /// A recurrent step's products for a few batch rows, several gates at once.
    pub recurrent_gates: recurrent::gates::GatesFn,
    /// Widens bf16 or f16 elements to f32 (half-precision weights).
    pub widen: half::WidenFn,
    /// The integer (8-bit) product micro-kernel.
    pub qgemm: qgemm::QMicro,
}

impl Kernels {
    /// The table of `isa`, or None when this CPU cannot run it.
    pub fn for_isa(isa: Isa) -> Option<&'static Kernels> {
        static TABLES: [OnceLock<Kernels>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        if !isa.is_supported() {
            return None;
        }
        let i = Isa::ALL.iter().position(|&x| x == isa)?;
        Some(TABLES[i].get_or_init(|| Kernels::build(isa)))
    }

    fn build(isa: Isa) -> Kernels {
        let portable = Kernels {
            isa: Isa::Portable,
            micro: gemm::micro::portable_micro(),
            eval: program::portable::eval,
            reduce: program::portable::reduce,
            softmax: program::portable::softmax,
            softmax_exp: program::portable::softmax_exp,
            softmax_cols: program::portable::softmax_cols,
            layer_norm: program::portable::layer_norm,
            depthwise: conv::portable::depthwise,
            strided_copy: conv::portable::strided_copy,
            pool: pooling::portable::pool,
            direct: direct::portable::direct,
            direct_fused: None,
            direct_half: None,
            direct_mr: gemm::micro::PORTABLE_MR,
            direct_s2: None,
            winograd: (
                winograd::portable::f4().input,
                winograd::portable::f4().output,
                1,
            ),
            winograd_output_channels: winograd::portable::f4().output_channels,
            winograd_f2: winograd::portable::f2(),
            winograd_blocked: [
                winograd_blocked::portable::f2(),
                winograd_blocked::portable::f4(),
            ],
            finish: epilogue::portable::finish,
            recurrent_cell: recurrent::cell::cell_portable,
            recurrent_gates: recurrent::gates::gates_portable,
            widen: half::widen_portable,
            qgemm: qgemm::micro_for(Isa::Portable),
        };
        match isa {
            Isa::Portable => portable,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Kernels {
                isa,
                micro: gemm::micro::avx2_micro(),
                eval: program::x86::avx2_eval,
                reduce: program::x86::avx2_reduce,
                softmax: program::x86::avx2_softmax,
                softmax_exp: program::x86::avx2_softmax_exp,
                softmax_cols: program::x86::avx2_softmax_cols,
                layer_norm: program::x86::avx2_layer_norm,
                depthwise: conv::x86::depthwise_avx2,
                strided_copy: conv::x86::strided_copy_avx2,
                pool: pooling::x86::pool_avx2,
                direct: direct::x86::direct_avx2,
                direct_fused: Some(direct::x86::direct_avx2_fused),
                direct_half: Some(direct::x86::direct_avx2_half),
                direct_mr: 6,
                direct_s2: None,
                winograd: (winograd::x86::input_avx2, winograd::x86::output_avx2, 8),
                winograd_output_channels: winograd::x86::output_channels_avx2,
                winograd_f2: winograd::x86::f2_avx2(),
                winograd_blocked: [
                    winograd_blocked::x86::f2_avx2(),
                    winograd_blocked::x86::f4_avx2(),
                ],
                finish: epilogue::x86::finish_avx2,
                recurrent_cell: recurrent::cell::x86::cell_avx2,
                recurrent_gates: recurrent::gates::x86::gates_avx2,
                widen: half::x86::widen_avx2,
                qgemm: qgemm::micro_for(isa),
            },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Kernels {
                isa,
                micro: gemm::micro::avx512_micro(),
                eval: program::x86::avx512_eval,
                reduce: program::x86::avx512_reduce,
                softmax: program::x86::avx512_softmax,
                softmax_exp: program::x86::avx512_softmax_exp,
                softmax_cols: program::x86::avx512_softmax_cols,
                layer_norm: program::x86::avx512_layer_norm,
                depthwise: conv::x86::depthwise_avx512,
                strided_copy: conv::x86::strided_copy_avx512,
                pool: pooling::x86::pool_avx512,
                direct: direct::x86::direct_avx512,
                direct_fused: Some(direct::x86::direct_avx512_fused),
                direct_half: Some(direct::x86::direct_avx512_half),
                direct_mr: direct::x86::AVX512_DIRECT_MR,
                direct_s2: Some(strided::x86::tile_avx512),
                winograd: (
                    winograd::x86::input_avx512,
                    winograd::x86::output_avx512,
                    16,
                ),
                winograd_output_channels: winograd::x86::output_channels_avx512,
                winograd_f2: winograd::x86::f2_avx512(),
                winograd_blocked: [
                    winograd_blocked::x86::f2_avx512(),
                    winograd_blocked::x86::f4_avx512(),
                ],
                finish: epilogue::x86::finish_avx512,
                recurrent_cell: recurrent::cell::x86::cell_avx512,
                recurrent_gates: recurrent::gates::x86::gates_avx512,
                widen: half::x86::widen_avx512,
                qgemm: qgemm::micro_for(isa),
            },
            #[cfg(not(target_arch = "x86_64"))]
            _ => portable,
        }
    }

    /// A kernel's full name, `op.isa` (e.g. `gemm.avx512`).
    pub fn name(&self, op: &str) -> String {
        format!("{op}.{}", self.isa)
    }
}

/// The table of the best ISA this CPU supports (detected once). `SMELT_ISA=avx2` (or
/// `portable`) picks a lower one, for comparing paths on one machine.
pub fn kernels() -> &'static Kernels {
    static BEST: OnceLock<&'static Kernels> = OnceLock::new();
    BEST.get_or_init(|| {
        let wanted = std::env::var("SMELT_ISA")
            .ok()
            .and_then(|s| Isa::from_name(&s));
        wanted
            .and_then(Kernels::for_isa)
            .or_else(|| Kernels::for_isa(Isa::detect()))
            .expect("the portable table always exists")
    })
}
