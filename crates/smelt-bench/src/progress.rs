//! A simple progress bar on stderr, redrawn in place when stderr is a terminal.

use std::io::{IsTerminal, Write};

/// A progress bar over a known amount of work.
pub struct Progress {
    label: String,
    total: f64,
    tty: bool,
    last_pct: i64,
}

impl Progress {
    /// A bar for `total` units of work.
    pub fn new(label: &str, total: f64) -> Progress {
        Progress {
            label: label.to_string(),
            total: total.max(f64::MIN_POSITIVE),
            tty: std::io::stderr().is_terminal(),
            last_pct: -1,
        }
    }

    /// Shows `done` units of `total` finished.
    pub fn update(&mut self, done: f64) {
        let frac = (done / self.total).clamp(0.0, 1.0);
        let pct = (frac * 100.0) as i64;
        // Off a terminal, print only every 25% to keep logs short.
        let step = if self.tty { 1 } else { 25 };
        if pct / step == self.last_pct / step && self.last_pct >= 0 {
            return;
        }
        self.last_pct = pct;
        let width = 30;
        let filled = (frac * width as f64) as usize;
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(width - filled));
        let mut e = std::io::stderr();
        if self.tty {
            let _ = write!(e, "\r{} [{bar}] {pct:3}%", self.label);
        } else {
            let _ = writeln!(e, "{} [{bar}] {pct:3}%", self.label);
        }
        let _ = e.flush();
    }

    /// Ends the bar (moves to a new line on a terminal).
    pub fn finish(&mut self) {
        self.update(self.total);
        if self.tty {
            // A closed stderr is no reason to stop a benchmark.
            let _ = writeln!(std::io::stderr());
        }
    }
}
