//! Per-group timings of a run.

/// When one kernel group ran, relative to the start of its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelTiming {
    /// Index of the group in the plan.
    pub group: usize,
    /// Start, in nanoseconds since the run began.
    pub start_ns: u64,
    /// Duration in nanoseconds.
    pub dur_ns: u64,
}

/// Total nanoseconds per group index over any number of runs' timings.
pub fn total_by_group(timings: &[KernelTiming], n_groups: usize) -> Vec<u64> {
    let mut total = vec![0u64; n_groups];
    for t in timings {
        if let Some(x) = total.get_mut(t.group) {
            *x += t.dur_ns;
        }
    }
    total
}
