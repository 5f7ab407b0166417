//! Statistics: summaries, the ratio of medians with a block-bootstrap CI, Mann-Whitney U
//! and a noise verdict.

use crate::rng::Rng;

/// Percentiles and moments of one sample (same unit as the input).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of observations.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Standard deviation (n - 1 denominator).
    pub std: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
}

impl Summary {
    /// Summarizes a sample; `None` when it is empty.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        if xs.is_empty() {
            return None;
        }
        let mut s = xs.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            s.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let p50 = quantile_sorted(&s, 0.5);
        let mad = median(&s.iter().map(|x| (x - p50).abs()).collect::<Vec<_>>());
        Some(Summary {
            n,
            mad,
            p50,
            p90: quantile_sorted(&s, 0.9),
            p99: quantile_sorted(&s, 0.99),
            mean,
            min: s[0],
            max: s[n - 1],
            std: var.sqrt(),
        })
    }

    /// Coefficient of variation (std / mean); 0 for a zero mean.
    pub fn cv(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.std / self.mean
        }
    }

    /// Robust coefficient of variation: 1.4826 * MAD / median (equals the CV for a normal
    /// sample, but a few outliers do not inflate it); 0 for a zero median.
    pub fn robust_cv(&self) -> f64 {
        if self.p50 == 0.0 {
            0.0
        } else {
            1.4826 * self.mad / self.p50
        }
    }
}

/// The q-quantile (0..=1) of a sorted, non-empty sample, linearly interpolated.
pub fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// The median of a non-empty sample.
pub fn median(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, 0.5)
}

/// Ratio a/b of medians with a 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioCi {
    /// median(a) / median(b).
    pub ratio: f64,
    /// 2.5th percentile of the bootstrap distribution.
    pub low: f64,
    /// 97.5th percentile of the bootstrap distribution.
    pub high: f64,
}

/// The ratio of medians of `a` over `b` with a 95% CI from a paired block bootstrap:
/// `a[i]` and `b[i]` are the samples of block `i` (run back to back, so they share drift);
/// each resample draws block indices with replacement and takes both sides' blocks.
/// `None` when a side is empty or a median is zero.
pub fn ratio_ci(a: &[Vec<f64>], b: &[Vec<f64>], resamples: usize, seed: u64) -> Option<RatioCi> {
    let flat = |v: &[Vec<f64>]| v.iter().flatten().copied().collect::<Vec<f64>>();
    let (fa, fb) = (flat(a), flat(b));
    if fa.is_empty() || fb.is_empty() {
        return None;
    }
    let ratio = median(&fa) / median(&fb);
    if !ratio.is_finite() {
        return None;
    }
    let k = a.len().min(b.len());
    let mut rng = Rng::new(seed);
    let mut ratios = Vec::with_capacity(resamples);
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for _ in 0..resamples {
        ra.clear();
        rb.clear();
        for _ in 0..k.max(1) {
            let i = rng.below(k.max(1));
            ra.extend_from_slice(&a[i.min(a.len() - 1)]);
            rb.extend_from_slice(&b[i.min(b.len() - 1)]);
        }
        if ra.is_empty() || rb.is_empty() {
            continue;
        }
        let r = median(&ra) / median(&rb);
        if r.is_finite() {
            ratios.push(r);
        }
    }
    if ratios.is_empty() {
        return Some(RatioCi {
            ratio,
            low: ratio,
            high: ratio,
        });
    }
    ratios.sort_by(f64::total_cmp);
    Some(RatioCi {
        ratio,
        low: quantile_sorted(&ratios, 0.025),
        high: quantile_sorted(&ratios, 0.975),
    })
}

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U statistic of the first sample.
    pub u: f64,
    /// Standardized statistic (normal approximation, tie-corrected).
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Two-sided Mann-Whitney U test of `a` against `b` (normal approximation with tie correction
/// and continuity correction). `None` when a sample is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += all[i..=j].iter().filter(|e| e.1).count() as f64 * rank;
        i = j + 1;
    }
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u = rank_sum_a - n1f * (n1f + 1.0) / 2.0;
    let mu = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)).max(1.0));
    if var <= 0.0 {
        return Some(MannWhitney { u, z: 0.0, p: 1.0 });
    }
    let d = u - mu;
    let z = (d.abs() - 0.5).max(0.0) * d.signum() / var.sqrt();
    Some(MannWhitney {
        u,
        z,
        p: erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0),
    })
}

/// The complementary error function (Numerical Recipes' Chebyshev fit, |error| < 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Limits above which a measurement is called too noisy to conclude.
pub const MAX_CV: f64 = 0.10;
/// Largest relative width (high - low) / ratio of the ratio's CI before a warning.
pub const MAX_CI_REL_WIDTH: f64 = 0.10;

/// Reasons the machine looked too noisy, empty when the numbers look trustworthy.
pub fn noise_warnings(label: &str, s: &Summary, ci: Option<&RatioCi>) -> Vec<String> {
    let mut w = Vec::new();
    if s.n >= 3 && s.robust_cv() > MAX_CV {
        w.push(format!(
            "{label}: spread (robust CV, 1.4826 MAD/median) {:.1}% > {:.0}% (noisy machine? pin threads, close other work, run longer)",
            s.robust_cv() * 100.0,
            MAX_CV * 100.0
        ));
    }
    if let Some(ci) = ci {
        let rel = (ci.high - ci.low) / ci.ratio;
        if rel > MAX_CI_REL_WIDTH {
            w.push(format!(
                "{label}: 95% CI of the ratio is {:.1}% wide (> {:.0}%): too noisy or too few blocks to conclude a small difference",
                rel * 100.0,
                MAX_CI_REL_WIDTH * 100.0
            ));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal_blocks(
        rng: &mut Rng,
        blocks: usize,
        per: usize,
        mean: f64,
        sd: f64,
    ) -> Vec<Vec<f64>> {
        (0..blocks)
            .map(|_| (0..per).map(|_| mean + sd * rng.normal()).collect())
            .collect()
    }

    #[test]
    fn summary_of_uniform_grid() {
        let xs: Vec<f64> = (0..=100).map(f64::from).collect();
        let s = Summary::of(&xs).unwrap();
        assert_eq!((s.p50, s.p90, s.p99), (50.0, 90.0, 99.0));
        assert_eq!((s.min, s.max, s.mean, s.n), (0.0, 100.0, 50.0, 101));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn summary_of_normal_sample() {
        let mut r = Rng::new(3);
        let xs: Vec<f64> = (0..200_000).map(|_| 10.0 + 2.0 * r.normal()).collect();
        let s = Summary::of(&xs).unwrap();
        assert!((s.p50 - 10.0).abs() < 0.03, "{s:?}");
        assert!((s.p90 - (10.0 + 2.0 * 1.2816)).abs() < 0.05, "{s:?}");
        assert!((s.p99 - (10.0 + 2.0 * 2.3263)).abs() < 0.1, "{s:?}");
        assert!((s.std - 2.0).abs() < 0.03, "{s:?}");
        assert!((s.robust_cv() - 0.2).abs() < 0.005, "{s:?}");
    }

    #[test]
    fn ci_of_identical_samples_contains_one() {
        let mut r = Rng::new(11);
        let a = normal_blocks(&mut r, 20, 10, 5.0, 0.5);
        let ci = ratio_ci(&a, &a, 2000, 1).unwrap();
        assert_eq!(ci.ratio, 1.0);
        assert!(ci.low <= 1.0 && 1.0 <= ci.high, "{ci:?}");
        let mw = mann_whitney(&a.concat(), &a.concat()).unwrap();
        assert!(mw.p > 0.9, "{mw:?}");
    }

    #[test]
    fn ci_of_two_samples_from_one_distribution_contains_one() {
        let mut r = Rng::new(5);
        let a = normal_blocks(&mut r, 20, 10, 5.0, 0.5);
        let b = normal_blocks(&mut r, 20, 10, 5.0, 0.5);
        let ci = ratio_ci(&a, &b, 2000, 2).unwrap();
        assert!(ci.low <= 1.0 && 1.0 <= ci.high, "{ci:?}");
    }

    #[test]
    fn clear_2x_difference_is_significant() {
        let mut r = Rng::new(9);
        let a = normal_blocks(&mut r, 10, 5, 20.0, 1.0);
        let b = normal_blocks(&mut r, 10, 5, 10.0, 1.0);
        let ci = ratio_ci(&a, &b, 2000, 3).unwrap();
        assert!(ci.low > 1.8 && ci.high < 2.2, "{ci:?}");
        let mw = mann_whitney(&a.concat(), &b.concat()).unwrap();
        assert!(mw.p < 1e-6, "{mw:?}");
        assert!(mw.z > 0.0);
    }

    #[test]
    fn mann_whitney_matches_a_known_value() {
        // scipy.stats.mannwhitneyu([1..5], [6..10], method="asymptotic"): U=0, p=0.012186
        let mw = mann_whitney(&[1., 2., 3., 4., 5.], &[6., 7., 8., 9., 10.]).unwrap();
        assert_eq!(mw.u, 0.0);
        assert!((mw.p - 0.012186).abs() < 1e-5, "{mw:?}");
        // with ties, [1,2,2,3] vs [2,3,3,4]: U=3, tie-corrected variance 10.857, p=0.17203
        let mw = mann_whitney(&[1., 2., 2., 3.], &[2., 3., 3., 4.]).unwrap();
        assert_eq!(mw.u, 3.0);
        assert!((mw.p - 0.17203).abs() < 1e-4, "{mw:?}");
    }

    #[test]
    fn erfc_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-6);
        assert!((erfc(-1.0) - 1.842_700_793).abs() < 1e-6);
    }

    #[test]
    fn noise_is_flagged() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 10.0]).unwrap();
        assert!(!noise_warnings("x", &s, None).is_empty());
        // One outlier among steady runs is not noise.
        let s = Summary::of(&[1.0, 1.01, 0.99, 1.0, 1.0, 50.0]).unwrap();
        assert!(noise_warnings("x", &s, None).is_empty());
        let ci = RatioCi {
            ratio: 1.0,
            low: 0.8,
            high: 1.3,
        };
        assert_eq!(noise_warnings("x", &s, Some(&ci)).len(), 1);
    }
}
