//! Sessions of one artifact file share one plan (its packed weights included): a
//! process-wide table of loaded plans, held weakly, keyed by the file's identity and the
//! options that shape a plan.

use super::load::Loaded;
use crate::plan::Plan;
use crate::SessionOptions;
use smelt_kernels::Isa;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A file (by path, device, inode, length and modification time) and a plan's options.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    path: PathBuf,
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    threads: usize,
    isa: Option<Isa>,
}

struct Entry {
    plans: Vec<(crate::InputShapes, Weak<Plan>)>,
    graph: smelt_ir::Graph,
    fixed: super::Fixed,
}

fn table() -> &'static Mutex<HashMap<Key, Entry>> {
    static T: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The key of a file for these options (None when its metadata cannot be read).
pub(crate) fn key(path: &Path, options: &SessionOptions) -> Option<Key> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Key {
        path: std::fs::canonicalize(path).ok()?,
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        threads: options.threads.max(1),
        isa: options.isa,
    })
}

/// The plan another session loaded from the same file, while one still holds it.
pub(crate) fn get(key: &Key) -> Option<Loaded> {
    let t = table().lock().ok()?;
    let e = t.get(key)?;
    let plans = e
        .plans
        .iter()
        .map(|(s, p)| Some((s.clone(), p.upgrade()?)))
        .collect::<Option<Vec<_>>>()?;
    Some(Loaded {
        plans,
        graph: e.graph.clone(),
        fixed: e.fixed.clone(),
    })
}

/// Records a loaded plan for later sessions of the same file (and forgets dead ones).
pub(crate) fn put(key: Key, l: &Loaded) {
    if let Ok(mut t) = table().lock() {
        t.retain(|_, e| e.plans.iter().all(|(_, p)| p.strong_count() > 0));
        t.insert(
            key,
            Entry {
                plans: l
                    .plans
                    .iter()
                    .map(|(s, p)| (s.clone(), Arc::downgrade(p)))
                    .collect(),
                graph: l.graph.clone(),
                fixed: l.fixed.clone(),
            },
        );
    }
}
