use smelt_kernels::epilogue::{Act, Fused, RowMajor, Vector};
use std::time::Instant;
fn main() {
    let kern = smelt_kernels::kernels();
    let tile = vec![0.3f32; 6 * 32];
    let bias = vec![0.1f32; 64];
    let mut out = vec![0f32; 6 * 64];
    for act in [Act::None, Act::Relu, Act::Gelu, Act::Silu] {
        let e = Fused {
            alpha: 1.0,
            row_bias: None,
            col_bias: Some(Vector {
                ptr: bias.as_ptr(),
                batch: &[0],
                step: 1,
            }),
            act1: act,
            scale: None,
            shift: None,
            residual: None,
            act2: Act::None,
            out: RowMajor {
                ptr: out.as_mut_ptr(),
                batch: &[0],
                rs: 64,
            },
        };
        let n = 1_000_000;
        let nr = kern.micro.nr;
        let t = Instant::now();
        for _ in 0..n {
            unsafe { (kern.finish)(&e, 0, 0, 0, 6, nr, &tile, nr) };
            std::hint::black_box(&mut out);
        }
        let per = t.elapsed().as_secs_f64() / n as f64;
        println!(
            "{} {act:?}: {:.1} ns per 6x{nr} tile, {:.2} cycles/elem",
            kern.isa,
            per * 1e9,
            per * 3.7e9 / (6 * nr) as f64
        );
    }
}
