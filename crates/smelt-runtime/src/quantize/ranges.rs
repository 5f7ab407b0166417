//! Clipped ranges from a histogram of calibration values (bins of equal width over the
//! values' min-max range): by percentile, or by entropy (the clipping whose 256-level
//! quantization loses the least information, as Kullback-Leibler divergence).

use smelt_onnx::qdq::Range;

/// Levels of a u8 activation.
const LEVELS: usize = 256;

/// Bins between two entropy candidates.
const CANDIDATE_STEP: usize = 16;

/// The range past which `100 - p` percent of the values lie at each end (in whole bins).
pub(super) fn percentile(h: &[u64], r: Range, p: f64) -> Range {
    let bins = h.len();
    let total: u64 = h.iter().sum();
    let clip = ((1.0 - p / 100.0) * total as f64) as u64;
    let (mut acc, mut lo) = (0u64, 0usize);
    while lo < bins - 1 && acc + h[lo] <= clip {
        acc += h[lo];
        lo += 1;
    }
    let (mut acc, mut hi) = (0u64, bins - 1);
    while hi > lo && acc + h[hi] <= clip {
        acc += h[hi];
        hi -= 1;
    }
    bin_range(r, bins, lo, hi + 1)
}

/// The entropy-calibrated range: candidates shrink the min-max range towards zero by a
/// common factor (so an all-positive range stays anchored at 0), each at least 256 bins
/// wide; for each, the clipped distribution `p` (the values past it counted in its edge
/// bins) is compared with `q`, the same bins quantized to 256 levels (each level's count
/// spread evenly over its non-empty bins), and the candidate of least KL(p || q) wins, the
/// widest among equals.
pub(super) fn entropy(h: &[u64], r: Range) -> Range {
    let bins = h.len();
    if bins < LEVELS || h.iter().all(|&c| c == 0) {
        return r;
    }
    let width = (r.max - r.min) as f64 / bins as f64;
    let zero = if width > 0.0 {
        (-(r.min as f64) / width).clamp(0.0, bins as f64)
    } else {
        0.0
    };
    let mut best = (f64::INFINITY, 0, bins);
    let mut len = bins;
    loop {
        let s = len as f64 / bins as f64;
        let lo = ((zero * (1.0 - s)).floor() as usize).min(bins - LEVELS);
        let hi = (lo + len).min(bins);
        let kl = divergence(h, lo, hi);
        if kl < best.0 {
            best = (kl, lo, hi);
        }
        if len < LEVELS + CANDIDATE_STEP {
            break;
        }
        len -= CANDIDATE_STEP;
    }
    bin_range(r, bins, best.1, best.2)
}

/// KL(p || q) of the window `lo..hi` of `h` (see [`entropy`]).
fn divergence(h: &[u64], lo: usize, hi: usize) -> f64 {
    let len = hi - lo;
    let mut p: Vec<f64> = h[lo..hi].iter().map(|&c| c as f64).collect();
    p[0] += h[..lo].iter().sum::<u64>() as f64;
    p[len - 1] += h[hi..].iter().sum::<u64>() as f64;
    let mut q = vec![0f64; len];
    for level in 0..LEVELS {
        let (a, b) = (level * len / LEVELS, (level + 1) * len / LEVELS);
        let window = &h[lo + a..lo + b];
        let total: u64 = window.iter().sum();
        let filled = window.iter().filter(|&&c| c > 0).count();
        if filled > 0 {
            for (j, &c) in window.iter().enumerate() {
                if c > 0 {
                    q[a + j] = total as f64 / filled as f64;
                }
            }
        }
    }
    let (ps, qs): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if ps == 0.0 || qs == 0.0 {
        return f64::INFINITY;
    }
    // A bin p holds and q does not (an edge bin holding only clipped values) gets a tenth
    // of one value, so the divergence stays finite and still charges the clipping.
    let floor = 0.1 / qs;
    p.iter()
        .zip(&q)
        .filter(|(&pv, _)| pv > 0.0)
        .map(|(&pv, &qv)| {
            let (pn, qn) = (pv / ps, (qv / qs).max(floor));
            pn * (pn / qn).ln()
        })
        .sum()
}

/// The values of bins `lo..hi` of a histogram of `bins` bins over `r`.
fn bin_range(r: Range, bins: usize, lo: usize, hi: usize) -> Range {
    let width = (r.max - r.min) / bins as f32;
    Range {
        min: r.min + lo as f32 * width,
        max: if hi == bins {
            r.max
        } else {
            r.min + hi as f32 * width
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A histogram of `values` over their min-max range.
    fn histogram(values: &[f32], bins: usize) -> (Vec<u64>, Range) {
        let r = Range {
            min: values.iter().copied().fold(f32::INFINITY, f32::min),
            max: values.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        };
        let mut h = vec![0u64; bins];
        for &x in values {
            let b = ((x - r.min) / (r.max - r.min) * bins as f32) as usize;
            h[b.min(bins - 1)] += 1;
        }
        (h, r)
    }

    /// Seeded standard normal values (Box-Muller over a xorshift generator).
    fn normal(n: usize) -> Vec<f32> {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut uniform = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| {
                let (u, v) = (uniform(), uniform());
                ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
            })
            .collect()
    }

    #[test]
    fn entropy_clips_rare_outliers() {
        let mut v = normal(200_000);
        v.extend([60.0, -55.0]);
        let (h, r) = histogram(&v, 4096);
        let e = entropy(&h, r);
        assert!(e.max < 15.0 && e.min > -15.0, "{e:?} of {r:?}");
        assert!(e.max > 3.0 && e.min < -3.0, "{e:?} clips the body");
    }

    #[test]
    fn entropy_keeps_a_uniform_range() {
        let v: Vec<f32> = (0..100_000).map(|i| i as f32 / 100_000.0).collect();
        let (h, r) = histogram(&v, 4096);
        let e = entropy(&h, r);
        assert!(e.min == 0.0 && e.max > 0.97, "{e:?}");
    }

    #[test]
    fn entropy_anchors_a_one_sided_range_at_zero() {
        let mut v: Vec<f32> = normal(100_000).iter().map(|x| x.max(0.0)).collect();
        v.push(40.0);
        let (h, r) = histogram(&v, 4096);
        let e = entropy(&h, r);
        assert_eq!(e.min, 0.0);
        assert!(e.max > 2.5 && e.max < 12.0, "{e:?}");
    }

    #[test]
    fn percentile_clips_each_tail() {
        let v: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
        let (h, r) = histogram(&v, 1000);
        let p = percentile(&h, r, 99.0);
        assert!(
            (p.min - 100.0).abs() <= 10.0 && (p.max - 9900.0).abs() <= 10.0,
            "{p:?}"
        );
    }
}
