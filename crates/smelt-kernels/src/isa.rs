//! Instruction sets with a kernel table of their own, and which one this CPU runs.

use std::fmt;

/// An instruction set smelt has kernels for (x86-64 levels; everything else is portable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Plain Rust, vectorized by the compiler for the build's baseline target.
    Portable,
    /// AVX2 with FMA3 and F16C (Haswell, Zen 1-3 and later).
    Avx2,
    /// AVX-512 F/VL/DQ/BW besides AVX2+FMA (Skylake-SP, Ice Lake, Zen 4 and later).
    Avx512,
}

impl Isa {
    /// Every ISA, slowest first.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The best ISA this CPU supports.
    pub fn detect() -> Isa {
        Isa::ALL
            .into_iter()
            .rev()
            .find(|i| i.is_supported())
            .unwrap_or(Isa::Portable)
    }

    /// Whether this CPU can run the ISA's kernels.
    pub fn is_supported(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.is_supported()
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512bw")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The ISAs this CPU supports, slowest first.
    pub fn supported() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.is_supported()).collect()
    }

    /// The short name used in kernel names (`gemm.avx512`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Parses a name as [`Isa::name`] prints it.
    pub fn from_name(s: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == s)
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the CPU is an Intel one (CPUID vendor "GenuineIntel"): a few prefetch choices
/// measured to help there and hurt on AMD's cores depend on it.
pub fn is_intel() -> bool {
    static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INTEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: CPUID leaf 0 exists on every x86-64 CPU.
            #[allow(unused_unsafe)]
            let r = unsafe { std::arch::x86_64::__cpuid(0) };
            // The vendor string is EBX, EDX, ECX: "Genu" "ineI" "ntel".
            r.ebx == u32::from_le_bytes(*b"Genu")
                && r.edx == u32::from_le_bytes(*b"ineI")
                && r.ecx == u32::from_le_bytes(*b"ntel")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// One of cpu0's caches as Linux describes it under `/sys/devices/system/cpu/cpu0/cache`.
struct CacheInfo {
    level: u32,
    /// The `type` field: `Data`, `Instruction` or `Unified`.
    kind: String,
    bytes: usize,
    ways: usize,
}

/// cpu0's caches, read from sysfs once (kernels ask per call: reading the files each time
/// cost 40 us a convolution). Empty where sysfs does not say.
fn caches() -> &'static [CacheInfo] {
    static CACHES: std::sync::OnceLock<Vec<CacheInfo>> = std::sync::OnceLock::new();
    CACHES.get_or_init(|| {
        let read = |i: usize| -> Option<CacheInfo> {
            let base = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let field = |f: &str| {
                std::fs::read_to_string(format!("{base}/{f}"))
                    .ok()
                    .map(|v| v.trim().to_string())
            };
            let size = field("size")?;
            let (num, mult) = match size.strip_suffix('K') {
                Some(n) => (n, 1 << 10),
                None => match size.strip_suffix('M') {
                    Some(n) => (n, 1 << 20),
                    None => (size.as_str(), 1),
                },
            };
            Some(CacheInfo {
                level: field("level")?.parse().ok()?,
                kind: field("type").unwrap_or_default(),
                bytes: num.parse::<usize>().ok()?.checked_mul(mult)?,
                ways: field("ways_of_associativity")
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(0),
            })
        };
        (0..8).filter_map(read).collect()
    })
}

/// The size of one core's L2 cache in bytes, as Linux reports it (512 KiB when unknown).
pub fn l2_bytes() -> usize {
    caches()
        .iter()
        .find(|c| c.level == 2)
        .map_or(512 << 10, |c| c.bytes)
}

/// The size of the last-level cache in bytes, as Linux reports it for the first core
/// (8 MiB when unknown).
pub fn llc_bytes() -> usize {
    caches()
        .iter()
        .filter(|c| c.kind != "Instruction")
        .max_by_key(|c| c.level)
        .map_or(8 << 20, |c| c.bytes)
}

/// One core's L1 data cache as `(bytes one way spans, ways)`, the span being the address
/// period after which lines fall on the same set (4 KiB and 8 ways when unknown).
pub fn l1d_geometry() -> (usize, usize) {
    caches()
        .iter()
        .find(|c| c.level == 1 && c.kind == "Data")
        .and_then(|c| {
            let span = c.bytes.checked_div(c.ways)?;
            span.is_power_of_two().then_some((span, c.ways))
        })
        .unwrap_or((4096, 8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_is_consistent() {
        let best = Isa::detect();
        assert!(best.is_supported());
        assert!(Isa::supported().contains(&Isa::Portable));
        assert_eq!(Isa::supported().last(), Some(&best));
        for i in Isa::ALL {
            assert_eq!(Isa::from_name(i.name()), Some(i));
        }
    }
}
