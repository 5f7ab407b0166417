//! Weights packed ahead of time. Building a plan packs its weights in a fixed order;
//! [`record`] keeps what one build packed (an artifact stores it), and [`replay`] hands a
//! later build those panels instead of packing again (an artifact maps them). Each stored
//! panel is checked against what the packer asks for, its key (kind and sizes) and its
//! length; on any mismatch the packer packs afresh, so a replay is never wrong, at worst
//! slower, and [`ReplayStats`] says how many panels it took.

use crate::buf::AlignedBuf;
use smelt_ir::Buf;
use std::cell::RefCell;
use std::sync::Arc;

/// Packed floats: packed here, or stored ahead of time (a window onto a mapped file).
#[derive(Clone, Debug)]
pub enum Floats {
    /// Packed by this process.
    Owned(Arc<AlignedBuf>),
    /// Read from a stored pack (64-byte aligned by the format that holds it).
    Stored(Buf<f32>),
}

impl Floats {
    /// The floats.
    pub fn as_slice(&self) -> &[f32] {
        match self {
            Floats::Owned(b) => b.as_slice(),
            Floats::Stored(b) => b.as_slice(),
        }
    }

    /// Heap bytes this process allocated for them (a stored pack's pages belong to its
    /// file).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Floats::Owned(b) => b.bytes(),
            Floats::Stored(_) => 0,
        }
    }
}

/// One packed weight as a build recorded it: its key and floats.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// What was packed, e.g. `gemm.a mr12 64x147`.
    pub key: String,
    /// The packed floats.
    pub floats: Arc<AlignedBuf>,
}

/// How a replayed build used the stored packs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Packs the build took from the store.
    pub used: usize,
    /// Packs the build asked for that the store did not match (packed afresh).
    pub missed: usize,
    /// Stored packs the build never asked for.
    pub left: usize,
}

enum Mode {
    Record(Vec<Recorded>),
    Replay {
        stored: Vec<(String, Buf<f32>)>,
        next: usize,
        stats: ReplayStats,
    },
}

thread_local! {
    static MODE: RefCell<Option<Mode>> = const { RefCell::new(None) };
}

/// Clears this thread's mode when dropped, so a panicking build leaves none behind.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        MODE.with(|m| m.borrow_mut().take());
    }
}

fn run_in<R>(mode: Mode, f: impl FnOnce() -> R) -> (R, Option<Mode>) {
    let outer = MODE.with(|m| m.borrow_mut().replace(mode));
    assert!(outer.is_none(), "prepack modes do not nest");
    let reset = Reset;
    let r = f();
    let mode = MODE.with(|m| m.borrow_mut().take());
    drop(reset);
    (r, mode)
}

/// Runs `f` (a plan build, on this thread), returning what it packed, in order.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, Vec<Recorded>) {
    match run_in(Mode::Record(Vec::new()), f) {
        (r, Some(Mode::Record(v))) => (r, v),
        (r, _) => (r, Vec::new()),
    }
}

/// Runs `f` (a plan build, on this thread) with `stored` packs, as [`record`] listed them,
/// offered in order to its packers.
pub fn replay<R>(stored: Vec<(String, Buf<f32>)>, f: impl FnOnce() -> R) -> (R, ReplayStats) {
    let mode = Mode::Replay {
        stored,
        next: 0,
        stats: ReplayStats::default(),
    };
    match run_in(mode, f) {
        (
            r,
            Some(Mode::Replay {
                stored,
                next,
                mut stats,
            }),
        ) => {
            stats.left = stored.len().saturating_sub(next);
            (r, stats)
        }
        (r, _) => (r, ReplayStats::default()),
    }
}

/// `len` packed floats named `key`: the next stored pack when a replay offers a matching
/// one, else zeros filled by `fill` (and recorded, when recording). `key` is only built
/// when a mode is on.
pub(crate) fn packed(
    key: impl FnOnce() -> String,
    len: usize,
    fill: impl FnOnce(&mut [f32]),
) -> Floats {
    let stored = MODE.with(|m| match m.borrow_mut().as_mut() {
        Some(Mode::Replay {
            stored,
            next,
            stats,
        }) => {
            let hit = stored
                .get(*next)
                .filter(|(k, b)| b.len() == len && *k == key())
                .map(|(_, b)| b.clone());
            *next += 1;
            match hit {
                Some(b) => {
                    stats.used += 1;
                    Some(Ok(b))
                }
                None => {
                    stats.missed += 1;
                    None
                }
            }
        }
        Some(Mode::Record(_)) => Some(Err(key())),
        None => None,
    });
    let key = match stored {
        Some(Ok(b)) => return Floats::Stored(b),
        Some(Err(k)) => Some(k),
        None => None,
    };
    let mut buf = AlignedBuf::zeros(len);
    fill(buf.as_mut_slice());
    let buf = Arc::new(buf);
    if let Some(key) = key {
        MODE.with(|m| {
            if let Some(Mode::Record(v)) = m.borrow_mut().as_mut() {
                v.push(Recorded {
                    key,
                    floats: buf.clone(),
                });
            }
        });
    }
    Floats::Owned(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build() -> Vec<Floats> {
        vec![
            packed(|| "a 2".into(), 2, |o| o.copy_from_slice(&[1.0, 2.0])),
            packed(|| "b 3".into(), 3, |o| o.fill(7.0)),
        ]
    }

    #[test]
    fn replays_what_was_recorded_and_packs_what_does_not_match() {
        let (made, rec) = record(build);
        assert_eq!(rec.len(), 2);
        assert_eq!(made[1].as_slice(), &[7.0; 3]);
        let stored: Vec<_> = rec
            .iter()
            .map(|r| (r.key.clone(), Buf::from_vec(r.floats.as_slice().to_vec())))
            .collect();
        let (again, stats) = replay(stored.clone(), build);
        assert!(again.iter().all(|f| matches!(f, Floats::Stored(_))));
        assert_eq!(again[0].as_slice(), &[1.0, 2.0]);
        assert_eq!(
            stats,
            ReplayStats {
                used: 2,
                missed: 0,
                left: 0
            }
        );
        // A wrong key or length is packed afresh; an unasked pack is left over.
        let mut bad = stored;
        bad[0].0 = "a 9".into();
        bad.push(("c".into(), Buf::from_vec(vec![0.0])));
        let (got, stats) = replay(bad, build);
        assert!(matches!(got[0], Floats::Owned(_)));
        assert_eq!(got[0].as_slice(), &[1.0, 2.0]);
        assert_eq!((stats.used, stats.missed, stats.left), (1, 1, 1));
        // No mode: plain packing.
        assert!(build().iter().all(|f| matches!(f, Floats::Owned(_))));
    }
}
