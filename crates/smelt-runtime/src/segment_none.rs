//! Plans in segments need the compiler (a tail is compiled when the head has run); a
//! runtime built without it (the `compiler` feature off) runs whole kernel plans only, so
//! its `Segments` has no values.

use crate::plan::Plan;
use crate::profile::KernelEvent;
use smelt_ir::{Result, RunControl, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A plan in segments: none exists in a build without the compiler.
pub enum Segments {}

impl Segments {
    /// The head's plan.
    pub fn head(&self) -> Option<&Plan> {
        match *self {}
    }

    /// One line on how the graph runs.
    pub fn summary(&self) -> String {
        match *self {}
    }

    /// The summary, then the head's parts and every tail compiled so far.
    pub fn describe(&self) -> Vec<String> {
        match *self {}
    }

    /// Runs the segments.
    pub(crate) fn run(
        &self,
        _inputs: HashMap<String, Value>,
        _control: &Arc<RunControl>,
        _profile: Option<&mut Vec<KernelEvent>>,
    ) -> Result<Vec<Value>> {
        match *self {}
    }
}
