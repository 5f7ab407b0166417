//! The per-kernel table `smelt run --profile` prints: each kernel's mean time, share,
//! achieved GFLOP/s and GB/s, and (with `--roofline`) its fraction of the machine's
//! roofline ceiling at the run's thread count.

use smelt_runtime::profile::{summarize, KernelEvent};

/// The roofline ceilings a table compares against.
pub struct Ceilings {
    /// Peak fp32 GFLOP/s at the run's thread count.
    pub gflops: f64,
    /// Triad GB/s at the run's thread count.
    pub gbps: f64,
}

impl Ceilings {
    /// Measures the machine's ceilings (a few seconds) for `threads` threads.
    pub fn measure(threads: usize) -> Ceilings {
        let r = smelt_bench::roofline::Roofline::measure(threads.max(1));
        if threads > 1 {
            Ceilings {
                gflops: r.gflops_all,
                gbps: r.triad_gbps_all,
            }
        } else {
            Ceilings {
                gflops: r.gflops_1,
                gbps: r.triad_gbps_1,
            }
        }
    }
}

/// Renders the `top` slowest kernels of the runs, then the rest and the total.
pub fn render(runs: &[(f64, Vec<KernelEvent>)], top: usize, ceilings: Option<&Ceilings>) -> String {
    let kernels = summarize(runs);
    let total: f64 = kernels.iter().map(|k| k.ms).sum();
    let mut out = format!(
        "{:>8} {:>6} {:>9} {:>8}{}  kernel\n",
        "ms/run",
        "share",
        "GFLOP/s",
        "GB/s",
        if ceilings.is_some() { "  roofline" } else { "" }
    );
    for k in kernels.iter().take(top) {
        let rate = |v: f64, counted: bool| {
            if counted {
                format!("{v:.1}")
            } else {
                "-".into()
            }
        };
        let roof = ceilings
            .map(|c| format!("  {:>7.0}%", 100.0 * k.roofline_fraction(c.gflops, c.gbps)))
            .unwrap_or_default();
        out += &format!(
            "{:>8.3} {:>5.1}% {:>9} {:>8}{roof}  {} {} [{}]\n",
            k.ms,
            100.0 * k.ms / total.max(1e-12),
            rate(k.gflops(), k.flops > 0),
            rate(k.gbps(), k.bytes > 0),
            k.kind,
            k.ops,
            k.name
        );
    }
    let rest: f64 = kernels.iter().skip(top).map(|k| k.ms).sum();
    if kernels.len() > top {
        out += &format!(
            "{rest:>8.3} {:>5.1}%  ({} more kernels)\n",
            100.0 * rest / total.max(1e-12),
            kernels.len() - top
        );
    }
    if let Some(c) = ceilings {
        out += &format!(
            "ceilings: {:.1} GFLOP/s, {:.1} GB/s (triad); roofline = achieved / min(peak, flops per byte x bandwidth)\n",
            c.gflops, c.gbps
        );
    }
    out + &format!("{total:>8.3} ms per run in kernels\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_the_slowest_first_with_rates() {
        let ev = |name: &str, dur_ns, flops| KernelEvent {
            name: name.into(),
            kind: "anchor".into(),
            nodes: vec![],
            ops: vec!["MatMul".into()],
            start_ns: 0,
            dur_ns,
            flops,
            bytes: 1_000_000,
        };
        let runs = vec![(
            0.0,
            vec![
                ev("small", 1_000_000, 0),
                ev("big", 4_000_000, 8_000_000_000),
            ],
        )];
        let c = Ceilings {
            gflops: 4000.0,
            gbps: 10.0,
        };
        let t = render(&runs, 1, Some(&c));
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[1].contains("[big]") && lines[1].contains("2000.0"),
            "{t}"
        );
        assert!(lines[1].contains("50%"), "{t}");
        assert!(lines[2].contains("(1 more kernels)"), "{t}");
        assert!(t.contains("5.000 ms per run"), "{t}");
    }
}
