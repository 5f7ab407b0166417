//! The environment record: CPU, SIMD features, cores, OS, smelt build, peak memory.

use serde_json::{json, Value};

/// What a benchmark ran on.
#[derive(Debug, Clone)]
pub struct Environment {
    /// CPU model name from /proc/cpuinfo.
    pub cpu: String,
    /// CPU family and model numbers from /proc/cpuinfo (e.g. "family 25 model 17").
    pub cpu_id: String,
    /// SIMD features detected at run time.
    pub simd: Vec<&'static str>,
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// OS name and kernel release.
    pub os: String,
    /// smelt's version.
    pub smelt_version: String,
    /// "release" or "debug".
    pub profile: &'static str,
}

impl Environment {
    /// Detects the environment of this process; `smelt_version` is the caller's version.
    pub fn detect(smelt_version: &str) -> Environment {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .find(|l| l.split(':').next().map(str::trim) == Some(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let cpu = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let cpu_id = match (field("cpu family"), field("model")) {
            (Some(f), Some(m)) => format!("family {f} model {m}"),
            _ => String::new(),
        };
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let distro = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        Environment {
            cpu,
            cpu_id,
            simd: simd_features(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: format!("{distro}, kernel {kernel}"),
            smelt_version: smelt_version.to_string(),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
        }
    }

    /// The record as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "cpu": self.cpu,
            "cpu_id": self.cpu_id,
            "simd": self.simd,
            "cores": self.cores,
            "os": self.os,
            "smelt_version": self.smelt_version,
            "build_profile": self.profile,
        })
    }
}

/// SIMD features this CPU offers, detected at run time.
pub fn simd_features() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut f = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! check {
            ($($name:tt),*) => { $( if std::is_x86_feature_detected!($name) { f.push($name); } )* };
        }
        check!(
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512vnni",
            "avx512bf16",
            "avx512fp16"
        );
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            f.push("neon");
        }
        if std::arch::is_aarch64_feature_detected!("sve") {
            f.push("sve");
        }
    }
    f
}

/// A field of /proc/self/status in bytes (e.g. "VmHWM", the peak resident set), if known.
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    let kb: u64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The process's peak resident set size (VmHWM) in bytes, if known.
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_bytes("VmHWM")
}

#[cfg(test)]
mod tests {
    #[test]
    fn detects_something() {
        let e = super::Environment::detect("0.0.0");
        assert!(e.cores >= 1);
        assert!(!e.cpu.is_empty());
        #[cfg(target_os = "linux")]
        assert!(super::peak_rss_bytes().unwrap() > 0);
    }
}
