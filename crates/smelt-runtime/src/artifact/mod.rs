//! Compiled artifacts (`.smelt` files): one plan (or one per batch bucket), compiled ahead
//! of time for fixed input shapes and one instruction set, with its weights aligned so a loader maps them instead
//! of reading them. [`format`] is the layout and its checks; [`write`] makes the bytes;
//! loading (through [`crate::Session::load_with`], which tells an artifact by its magic)
//! runs no pass.
//!
//! Weights are stored as the graph holds them, and again as the kernels packed them for
//! the artifact's ISA (panels, Winograd transforms), in the order a build of the plan
//! packs them: loading maps those instead of packing (`smelt_kernels::prepack`, which
//! checks each against what its packer asks for and packs afresh what does not match).

pub(crate) mod bucket;
pub mod budget;
pub mod format;
pub(crate) mod load;
mod shared;
pub mod write;

pub use load::Fixed;
pub use write::CompileInfo;

use smelt_ir::{err, AlignedBytes, Backing, Result};
use smelt_kernels::Isa;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// A read-only memory map of a whole file.
struct MappedFile(memmap2::Mmap);

// SAFETY: a private read-only mapping stays at one address until dropped. Its contents
// change only if another process writes the file while it is mapped, which smelt never
// does to an artifact it loaded; that caveat is documented on `Session::load_with`.
unsafe impl Backing for MappedFile {
    fn bytes(&self) -> &[u8] {
        &self.0
    }

    fn release(&self) {
        // SAFETY: a read-only file mapping, never written: a dropped page is read again
        // from the file when next touched, with the same contents (the file is not
        // changed while mapped, see MappedFile), so no borrowed byte changes. A failure
        // only leaves the pages in memory.
        let _ = unsafe { self.0.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    }

    fn prefetch(&self, offset: usize, len: usize) {
        // Page-aligned and inside the map; a kernel without MADV_POPULATE_READ (before
        // Linux 5.14) refuses, and the pages fault in on first touch as before.
        let start = offset / PAGE * PAGE;
        let end = offset.saturating_add(len).min(self.0.len());
        if end > start {
            let _ = self
                .0
                .advise_range(memmap2::Advice::PopulateRead, start, end - start);
        }
    }
}

/// The page size the mapping's advice is aligned to.
const PAGE: usize = 4096;

/// Whether the file at `path` starts with the artifact magic (false when unreadable).
pub fn is_artifact(path: &Path) -> bool {
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && format::has_magic(&head)
}

/// Maps a file for reading (an empty file is read, as nothing can map it).
pub fn map_file(path: &Path) -> Result<Arc<dyn Backing>> {
    let io = |e: std::io::Error| err!(Io, "cannot read {}: {e}", path.display());
    let f = std::fs::File::open(path).map_err(io)?;
    if f.metadata().map_err(io)?.len() == 0 {
        return Ok(Arc::new(AlignedBytes::copy_of(&[])?));
    }
    // SAFETY: see MappedFile: read only, and the file is not written while mapped.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(io)?;
    Ok(Arc::new(MappedFile(map)))
}

/// The instruction set a `--target-cpu` name asks for: `x86-64-v3` (AVX2+FMA),
/// `x86-64-v4` (AVX-512), `native` (the best of this CPU) or an ISA name.
pub fn target_isa(target: &str) -> Result<Isa> {
    match target {
        "x86-64-v3" => Ok(Isa::Avx2),
        "x86-64-v4" => Ok(Isa::Avx512),
        "native" => Ok(Isa::detect()),
        other => Isa::from_name(other).ok_or_else(|| {
            err!(
                InvalidInput,
                "unknown target CPU '{other}' (expected x86-64-v3, x86-64-v4 or native)"
            )
        }),
    }
}

/// What `smelt verify` reports of a sound artifact.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The manifest, as decoded.
    pub manifest: format::Manifest,
    /// Bytes of the whole file.
    pub file_bytes: usize,
    /// Bytes of the weights section.
    pub weights_bytes: usize,
}

/// Checks an artifact whole: header and manifest checksum, weights checksum, and the
/// plan's validity (as a load would, on this CPU).
pub fn verify(path: &Path, options: &crate::SessionOptions) -> Result<Summary> {
    let file = map_file(path)?;
    let ctx = |e: smelt_ir::Error| e.context(path.display().to_string());
    load::load(file.clone(), options, true).map_err(ctx)?;
    let bytes = file.bytes();
    let header = format::Header::parse(bytes).map_err(ctx)?;
    Ok(Summary {
        manifest: format::Manifest::parse(header.manifest(bytes)).map_err(ctx)?,
        file_bytes: bytes.len(),
        weights_bytes: header.weights_len,
    })
}
