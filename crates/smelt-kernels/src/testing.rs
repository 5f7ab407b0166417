//! Test helpers: one test per ISA for every kernel test, and reproducible random data.

use crate::{Isa, Kernels};

/// Defines a module `$name` with one test per ISA (`portable`, `avx2`, `avx512`), each
/// running `$body` (a `fn(&Kernels)`) on that ISA's table. On a CPU without the ISA the
/// test passes after printing that it could not run.
#[macro_export]
#[doc(hidden)]
macro_rules! isa_tests {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn portable() {
                $crate::testing::run_on($crate::Isa::Portable, $body);
            }
            #[test]
            fn avx2() {
                $crate::testing::run_on($crate::Isa::Avx2, $body);
            }
            #[test]
            fn avx512() {
                $crate::testing::run_on($crate::Isa::Avx512, $body);
            }
        }
    };
}

/// Runs `f` on `isa`'s table, or notes that this CPU cannot.
pub fn run_on(isa: Isa, f: impl Fn(&Kernels)) {
    match Kernels::for_isa(isa) {
        Some(k) => f(k),
        None => eprintln!("note: this CPU has no {isa}; its kernels were not run"),
    }
}

/// `n` floats in [-1, 1) from a splitmix64 stream.
pub fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x1234_5678;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}
