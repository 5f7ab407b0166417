//! `smelt verify`: checks an artifact whole (header, plan and weights checksums, and the
//! plan's validity on this CPU) and says what it was compiled for.

use smelt_ir::Result;
use smelt_runtime::artifact;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `smelt verify`.
#[derive(clap::Args)]
pub struct Args {
    /// The artifact (.smelt).
    artifact: PathBuf,
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    let s = artifact::verify(&a.artifact, &smelt_runtime::SessionOptions::default())?;
    let m = &s.manifest;
    outln!("{}: ok", a.artifact.display());
    outln!("  written by   {}", m.producer);
    outln!("  target       {} ({} kernels)", m.target, m.isa);
    outln!("  deterministic {}", m.deterministic);
    if let Some(p) = &m.preset {
        outln!("  preset       {p}");
    }
    for d in &m.decisions {
        outln!("    {d}");
    }
    for b in &m.buckets {
        outln!(
            "  batch bucket {} ({} groups)",
            b.batch,
            b.plan.groups.len()
        );
    }
    for i in &m.inputs {
        outln!("  input        {} {} {:?}", i.name, i.dtype, i.shape);
    }
    for o in &m.outputs {
        outln!("  output       {} {} {:?}", o.name, o.dtype, o.shape);
    }
    outln!(
        "  {} groups, {} weights ({} bytes), arena {} bytes, file {} bytes",
        m.plan.groups.len(),
        m.weights.len(),
        s.weights_bytes,
        m.plan.memory.arena_bytes,
        s.file_bytes
    );
    outln!(
        "  {} packed weights ({} bytes, mapped at load instead of packed)",
        m.packed.len(),
        m.packed.iter().map(|p| p.floats * 4).sum::<usize>()
    );
    Ok(ExitCode::SUCCESS)
}
