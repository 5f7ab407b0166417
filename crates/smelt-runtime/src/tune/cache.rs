//! The persistent tuning cache: what tuning decided for a plan, by a key of the CPU model,
//! the instruction set, the thread count, the tuning level, this build's version and the
//! whole kernel plan (its shapes and kernels), in one JSON file. A file that cannot be
//! read as one is set aside with a warning: the cache only ever saves time.

use super::TuneRecord;
use serde::{Deserialize, Serialize};
use smelt_ir::kernel::KernelPlan;
use smelt_ir::{err, Result};
use smelt_kernels::Isa;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The cache file's layout version.
const VERSION: u32 = 1;

/// A cache file larger than this is not read (it is not one smelt wrote).
const MAX_FILE_BYTES: u64 = 64 << 20;

/// The tuning cache file and what it holds.
pub struct TuningCache {
    path: PathBuf,
    entries: Mutex<HashMap<String, TuneRecord>>,
    warning: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    entries: HashMap<String, TuneRecord>,
}

impl TuningCache {
    /// The cache at `path` (empty when the file does not exist yet).
    pub fn open(path: &Path) -> TuningCache {
        let (entries, warning) = match read(path) {
            Ok(e) => (e, None),
            Err(why) => (
                HashMap::new(),
                Some(format!(
                    "tuning cache {} ignored ({why}); it will be rewritten",
                    path.display()
                )),
            ),
        };
        TuningCache {
            path: path.to_path_buf(),
            entries: Mutex::new(entries),
            warning,
        }
    }

    /// Why the file on disk was ignored, if it was.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What tuning decided for a key.
    pub fn get(&self, key: &str) -> Option<TuneRecord> {
        self.lock().get(key).cloned()
    }

    /// Records a decision and writes the file (merged with what another process may have
    /// written since it was read; written aside and renamed, so no reader sees half).
    pub fn put(&self, key: &str, record: &TuneRecord) -> Result<()> {
        let mut entries = self.lock();
        entries.insert(key.to_string(), record.clone());
        if let Ok(on_disk) = read(&self.path) {
            for (k, v) in on_disk {
                entries.entry(k).or_insert(v);
            }
        }
        let file = CacheFile {
            version: VERSION,
            entries: entries.clone(),
        };
        let io = |e: std::io::Error| err!(Io, "cannot write {}: {e}", self.path.display());
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let json = serde_json::to_vec(&file)
            .map_err(|e| err!(Internal, "cannot encode the tuning cache: {e}"))?;
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(format!(".tmp{}", std::process::id()));
        std::fs::write(&tmp, json).map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TuneRecord>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The entries of a cache file (none when it does not exist), or why it is not one.
fn read(path: &Path) -> std::result::Result<HashMap<String, TuneRecord>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e.to_string()),
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{} bytes, more than a cache holds", meta.len()));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let file: CacheFile = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    if file.version != VERSION {
        return Err(format!("layout version {}, not {VERSION}", file.version));
    }
    Ok(file.entries)
}

/// Where the cache lives unless told: `$SMELT_TUNING_CACHE`, else
/// `$XDG_CACHE_HOME/smelt/tuning.json`, else `~/.cache/smelt/tuning.json`.
pub fn default_path() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = env("SMELT_TUNING_CACHE") {
        return Some(PathBuf::from(p));
    }
    let base = env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("smelt").join("tuning.json"))
}

/// The key of a plan's tuning on this machine.
pub fn plan_key(plan: &KernelPlan, isa: Isa, threads: usize, level: super::Level) -> String {
    let mut h = Fnv128::default();
    h.write(format!("smelt-tune {VERSION} {}\n", env!("CARGO_PKG_VERSION")).as_bytes());
    h.write(cpu_model().as_bytes());
    h.write(format!("\n{} {threads} {}\n", isa.name(), level.name()).as_bytes());
    // The plan's description (its weights' contents are not in it: speed does not
    // depend on them).
    h.write(&serde_json::to_vec(plan).unwrap_or_default());
    h.hex()
}

/// The CPU's vendor, family, model and name (as /proc/cpuinfo gives them), else the
/// architecture.
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(k))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let parts: Vec<String> = ["vendor_id", "cpu family", "model", "model name"]
        .iter()
        .filter_map(|k| field(k))
        .collect();
    match parts.is_empty() {
        true => std::env::consts::ARCH.to_string(),
        false => parts.join(" / "),
    }
}

/// Two 64-bit FNV-1a hashes with different offsets: a stable 128-bit digest (the
/// standard library's hasher may change between Rust releases, and the file outlives
/// them).
struct Fnv128([u64; 2]);

impl Default for Fnv128 {
    fn default() -> Self {
        Fnv128([0xcbf2_9ce4_8422_2325, 0x6c62_272e_07bb_0142])
    }
}

impl Fnv128 {
    fn write(&mut self, bytes: &[u8]) {
        for h in &mut self.0 {
            for &b in bytes {
                *h ^= u64::from(b);
                *h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }

    fn hex(&self) -> String {
        format!("{:016x}{:016x}", self.0[0], self.0[1])
    }
}
