//! A hand-written SVG chart of latency CDFs (no plotting crate).

use std::fmt::Write as _;

/// An SVG chart of the empirical latency CDFs of each series, side by side on one log-scale
/// time axis (hand-written SVG).
pub fn cdf_svg(title: &str, series: &[(String, Vec<f64>)]) -> String {
    const COLORS: &[&str] = &["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"];
    let (w, h) = (720.0, 420.0);
    let (left, right, top, bottom) = (70.0, 20.0, 40.0, 90.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    if all.is_empty() {
        let _ = writeln!(s, "</svg>");
        return s;
    }
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let (mut l0, mut l1) = (lo.log10().floor(), hi.log10().ceil());
    if l1 <= l0 {
        l1 = l0 + 1.0;
    }
    if l1 - l0 > 8.0 {
        l0 = l1 - 8.0;
    }
    let x = |v: f64| left + (v.max(1e-300).log10().clamp(l0, l1) - l0) / (l1 - l0) * pw;
    let y = |p: f64| top + (1.0 - p) * ph;
    // Grid and ticks.
    for p in [0.0, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0] {
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{yy}" y2="{yy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{p}</text>"##,
            left + pw,
            left - 6.0,
            y(p) + 4.0,
            yy = y(p)
        );
    }
    let mut d = l0 as i32;
    while d as f64 <= l1 {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(d);
            if v.log10() > l1 + 1e-9 {
                break;
            }
            let xx = x(v);
            let _ = writeln!(
                s,
                r##"<line x1="{xx}" x2="{xx}" y1="{top}" y2="{}" stroke="{}"/><text x="{xx}" y="{}" text-anchor="middle">{}</text>"##,
                top + ph,
                if m == 1.0 { "#ccc" } else { "#eee" },
                top + ph + 16.0,
                fmt_tick(v)
            );
        }
        d += 1;
    }
    let _ = writeln!(
        s,
        r#"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">latency (ms, log scale)</text>"#,
        left + pw / 2.0,
        top + ph + 36.0
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">fraction of runs</text>"#,
        top + ph / 2.0,
        top + ph / 2.0
    );
    // Curves (step CDFs) and legend.
    for (i, (name, v)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mut pts = String::new();
        let mut prev = 0.0;
        for (k, val) in v.iter().enumerate() {
            let p = (k + 1) as f64 / n;
            let _ = write!(
                pts,
                "{:.1},{:.1} {:.1},{:.1} ",
                x(*val),
                y(prev),
                x(*val),
                y(p)
            );
            prev = p;
        }
        let _ = writeln!(
            s,
            r#"<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>"#
        );
        let med = if v.is_empty() {
            f64::NAN
        } else {
            crate::stats::quantile_sorted(&v, 0.5)
        };
        let ly = top + ph + 56.0 + 16.0 * (i / 2) as f64;
        let lx = left + (i % 2) as f64 * pw / 2.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{} (n={}, p50 {} ms)</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            esc(name),
            v.len(),
            fmt_tick(med)
        );
    }
    let _ = writeln!(s, "</svg>");
    s
}

fn fmt_tick(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{:.3}", v)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        format!("{v:.3e}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_curve_per_series_and_escaped_text() {
        let series = vec![
            ("a".to_string(), vec![1.0, 2.0, 3.0]),
            ("b<c>".to_string(), vec![10.0, 20.0]),
        ];
        let svg = cdf_svg("t&t", &series);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t&amp;t") && svg.contains("b&lt;c&gt;"));
        assert!(cdf_svg("empty", &[]).trim_end().ends_with("</svg>"));
    }
}
