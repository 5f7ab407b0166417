//! The `.smelt` file layout and the checks that read it safely; every loader goes through
//! [`Header::parse`] and [`Manifest::parse`].
//!
//! ```text
//! 0   magic "SMELTART"          8 bytes
//! 8   format version            u32 LE (FORMAT_VERSION)
//! 12  header length             u32 LE (64)
//! 16  manifest length           u64 LE   the JSON manifest starts at byte 64
//! 24  weights offset            u64 LE   a multiple of 64, right after the manifest
//! 32  weights length            u64 LE   the weights end the file
//! 40  weights CRC-32            u32 LE   checked by `smelt verify` (or at load when asked)
//! 44  reserved                  16 zero bytes
//! 60  header CRC-32             u32 LE   of bytes 0..60 then the manifest, checked at load
//! 64  manifest (JSON: target, shapes, kernel plan, kernel choices, weight and pack tables)
//!     zero padding to the weights offset
//!     weights and the kernels' packed weights, each at a 64-byte aligned offset of the
//!     weights section (the writer puts what runs read first: small weights, packs, then
//!     the large weights; a reader takes every offset from the manifest)
//! ```
//!
//! Everything in a file is untrusted: sizes are checked against the file's length and
//! [`MAX_MANIFEST_BYTES`] before anything is read or allocated, and the kernel plan is
//! validated by the executor's checks (`smelt_ir::kernel::check`) before it runs.

use serde::{Deserialize, Serialize};
use smelt_ir::kernel::KernelPlan;
use smelt_ir::{bail, ensure, DType, Result, Tensor};

/// The first eight bytes of every artifact.
pub const MAGIC: [u8; 8] = *b"SMELTART";
/// The layout and manifest version this build reads and writes; bump it whenever either
/// (the serialized kernel plan included) changes shape.
pub const FORMAT_VERSION: u32 = 2;
/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 64;
/// Alignment of the weights section and of every weight in it.
pub const WEIGHT_ALIGN: usize = 64;
/// The largest manifest a loader accepts.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;
const HEADER_CRC_AT: usize = 60;

/// The fixed header, its fields checked against each other and the file length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    /// Length of the JSON manifest at byte [`HEADER_LEN`].
    pub manifest_len: usize,
    /// Start of the weights section.
    pub weights_offset: usize,
    /// Length of the weights section (it ends the file).
    pub weights_len: usize,
    /// CRC-32 of the weights section.
    pub weights_crc: u32,
}

/// Rounds up to the weight alignment (None on overflow).
pub fn align_up(n: usize) -> Option<usize> {
    n.checked_add(WEIGHT_ALIGN - 1)
        .map(|x| x / WEIGHT_ALIGN * WEIGHT_ALIGN)
}

/// Whether `bytes` start like an artifact.
pub fn has_magic(bytes: &[u8]) -> bool {
    bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] == MAGIC
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn header_crc(header: &[u8], manifest: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[..HEADER_CRC_AT]);
    h.update(manifest);
    h.finalize()
}

impl Header {
    /// Reads and checks the header of a whole file: magic, version, section bounds and
    /// the checksum of the header and manifest. Errors are InvalidModel (Unsupported for
    /// another format version) and say what is wrong.
    pub fn parse(file: &[u8]) -> Result<Header> {
        ensure!(
            file.len() >= HEADER_LEN,
            InvalidModel,
            "the file has {} bytes, fewer than the {HEADER_LEN}-byte header (truncated?)",
            file.len()
        );
        ensure!(
            has_magic(file),
            InvalidModel,
            "not a smelt artifact (no SMELTART magic)"
        );
        let version = u32_at(file, 8);
        ensure!(
            version == FORMAT_VERSION,
            Unsupported,
            "artifact format version {version}; this build reads version {FORMAT_VERSION} \
             (compile the artifact again with this smelt)"
        );
        ensure!(
            u32_at(file, 12) as usize == HEADER_LEN,
            InvalidModel,
            "header length {} is not {HEADER_LEN}",
            u32_at(file, 12)
        );
        ensure!(
            file[44..HEADER_CRC_AT].iter().all(|&b| b == 0),
            InvalidModel,
            "reserved header bytes are not zero"
        );
        let (mlen, woff, wlen) = (u64_at(file, 16), u64_at(file, 24), u64_at(file, 32));
        ensure!(
            mlen <= MAX_MANIFEST_BYTES,
            InvalidModel,
            "manifest of {mlen} bytes, over the limit of {MAX_MANIFEST_BYTES}"
        );
        let len = file.len() as u64;
        let manifest_end = HEADER_LEN as u64 + mlen;
        ensure!(
            manifest_end <= len,
            InvalidModel,
            "the manifest ends at byte {manifest_end}, past the end of the {len}-byte file (truncated?)"
        );
        let expect_woff = align_up(manifest_end as usize).map(|x| x as u64);
        ensure!(
            Some(woff) == expect_woff,
            InvalidModel,
            "weights at byte {woff}, expected the 64-byte boundary after the manifest"
        );
        ensure!(
            woff.checked_add(wlen) == Some(len),
            InvalidModel,
            "the weights section ({wlen} bytes at {woff}) does not end at the file's end ({len} bytes; truncated?)"
        );
        let manifest = &file[HEADER_LEN..manifest_end as usize];
        let (want, got) = (u32_at(file, HEADER_CRC_AT), header_crc(file, manifest));
        ensure!(
            want == got,
            InvalidModel,
            "header and manifest checksum mismatch (stored {want:08x}, computed {got:08x}): the file is corrupt"
        );
        Ok(Header {
            manifest_len: mlen as usize,
            weights_offset: woff as usize,
            weights_len: wlen as usize,
            weights_crc: u32_at(file, 40),
        })
    }

    /// The manifest bytes of a file this header was parsed from.
    pub fn manifest<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        &file[HEADER_LEN..HEADER_LEN + self.manifest_len]
    }

    /// Checks the weights section against its checksum (reads every weight byte).
    pub fn verify_weights(&self, file: &[u8]) -> Result<()> {
        let w = &file[self.weights_offset..self.weights_offset + self.weights_len];
        let got = crc32fast::hash(w);
        ensure!(
            got == self.weights_crc,
            InvalidModel,
            "weights checksum mismatch (stored {:08x}, computed {got:08x}): the weights are corrupt",
            self.weights_crc
        );
        Ok(())
    }
}

/// The whole file for a manifest and a weights section (already laid out with
/// [`WEIGHT_ALIGN`]-aligned entries).
pub fn encode(manifest: &[u8], weights: &[u8]) -> Result<Vec<u8>> {
    ensure!(
        manifest.len() as u64 <= MAX_MANIFEST_BYTES,
        ResourceExhausted,
        "the manifest needs {} bytes, over the format's limit of {MAX_MANIFEST_BYTES}",
        manifest.len()
    );
    let woff = align_up(HEADER_LEN + manifest.len())
        .ok_or_else(|| smelt_ir::err!(ResourceExhausted, "artifact too large"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(woff + weights.len())
        .map_err(|_| smelt_ir::err!(ResourceExhausted, "cannot allocate the artifact"))?;
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    out.extend_from_slice(&(manifest.len() as u64).to_le_bytes());
    out.extend_from_slice(&(woff as u64).to_le_bytes());
    out.extend_from_slice(&(weights.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(weights).to_le_bytes());
    out.resize(HEADER_CRC_AT, 0);
    let crc = header_crc(&out, manifest);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(manifest);
    out.resize(woff, 0);
    out.extend_from_slice(weights);
    Ok(out)
}

/// One graph input or output of the compiled plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoSpec {
    /// Its name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// The concrete shape the plan was compiled for.
    pub shape: Vec<usize>,
    /// The value used when a caller leaves the input out (inputs only).
    pub default: Option<Tensor>,
    /// The smallest table this input indexes (token ids into an embedding), for tools
    /// that make plausible inputs; None when it indexes none.
    #[serde(default)]
    pub index_limit: Option<i64>,
}

/// Where one weight's elements lie in the weights section.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WeightEntry {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// Byte offset in the weights section (a multiple of [`WEIGHT_ALIGN`]).
    pub offset: usize,
}

/// Where one of the kernels' packed weights lies in the weights section: f32 panels in the
/// layout of the artifact's ISA, offered to the plan's packers in order at load (see
/// `smelt_kernels::prepack`, which checks each against what its packer asks for).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackEntry {
    /// What was packed (kind and sizes), as the packer names it.
    pub key: String,
    /// Byte offset in the weights section (a multiple of [`WEIGHT_ALIGN`]).
    pub offset: usize,
    /// Number of f32 values.
    pub floats: usize,
}

/// Everything an artifact says besides the weights' bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// The program and version that wrote it (informational).
    pub producer: String,
    /// The target CPU level it was compiled for (`x86-64-v3`, `x86-64-v4`, `native`).
    pub target: String,
    /// The kernels' instruction set (`avx2`, `avx512`, `portable`).
    pub isa: String,
    /// Whether it was compiled with `--deterministic`.
    pub deterministic: bool,
    /// The inputs, in graph order, with the shapes compiled for.
    pub inputs: Vec<IoSpec>,
    /// The outputs, in graph order.
    pub outputs: Vec<IoSpec>,
    /// The kernel plan and memory plan (weights listed in `weights`).
    pub plan: KernelPlan,
    /// Each weight of the plan, indexed like `BufferKind::Weight`.
    pub weights: Vec<WeightEntry>,
    /// The kernel the compiler chose for each group; a loader must choose the same.
    pub kernels: Vec<String>,
    /// The kernels' packed weights, in the order the plan packs them.
    pub packed: Vec<PackEntry>,
    /// The preset it was compiled with (`edge`, `datacenter`), if any.
    #[serde(default)]
    pub preset: Option<String>,
    /// What the preset (and `--max-memory`) decided, a line each, for `explain`.
    #[serde(default)]
    pub decisions: Vec<String>,
    /// The most threads a run uses (edge: the fewest that held latency at compile time);
    /// a session asking for more gets this many.
    #[serde(default)]
    pub max_threads: Option<usize>,
    /// The memory budget the compiler checked the plan against (`--max-memory`), bytes.
    #[serde(default)]
    pub max_memory: Option<u64>,
    /// Plans of the same model for smaller batches (the batch is dim 0 of every input and
    /// output): a run of batch n takes the smallest plan of batch >= n, its inputs padded.
    /// The top-level plan is the largest batch. They share the weights section.
    #[serde(default)]
    pub buckets: Vec<BucketPlan>,
    /// What autotuning decided, per plan (the top-level one first, then the buckets').
    #[serde(default)]
    pub tuning: Vec<crate::tune::TuneRecord>,
}

/// Weights under this many bytes (biases, scales, shapes: what kernels read as they
/// are) are laid out first, together, and mapped at load; larger ones are read mostly
/// through their packs.
pub const SMALL_WEIGHT_BYTES: usize = 64 << 10;

/// Dim 0 of the first input: a plan's batch (0 when it has no input or that is a scalar).
pub fn leading_dim(inputs: &[IoSpec]) -> usize {
    inputs
        .first()
        .and_then(|s| s.shape.first().copied())
        .unwrap_or(0)
}

/// One more plan of a bucketed artifact: the model compiled for another batch size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BucketPlan {
    /// The batch it runs at (dim 0 of every input and output).
    pub batch: usize,
    /// The inputs, in graph order, with the shapes compiled for.
    pub inputs: Vec<IoSpec>,
    /// The outputs, in graph order.
    pub outputs: Vec<IoSpec>,
    /// The kernel plan and memory plan.
    pub plan: KernelPlan,
    /// Each weight of the plan (offsets into the shared weights section).
    pub weights: Vec<WeightEntry>,
    /// The kernel chosen for each group.
    pub kernels: Vec<String>,
    /// The kernels' packed weights, in the order the plan packs them.
    pub packed: Vec<PackEntry>,
}

impl Manifest {
    /// Decodes a manifest (the JSON reader bounds nesting, so hostile input cannot
    /// exhaust the stack).
    pub fn parse(bytes: &[u8]) -> Result<Manifest> {
        match serde_json::from_slice(bytes) {
            Ok(m) => Ok(m),
            Err(e) => bail!(InvalidModel, "malformed artifact manifest: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let manifest = br#"{"a":1}"#;
        let weights = vec![7u8; 130];
        let f = encode(manifest, &weights).unwrap();
        let h = Header::parse(&f).unwrap();
        assert_eq!(h.manifest(&f), manifest);
        assert!(h.weights_offset.is_multiple_of(WEIGHT_ALIGN));
        assert_eq!(h.weights_len, 130);
        h.verify_weights(&f).unwrap();
        for at in 0..HEADER_LEN + manifest.len() {
            let mut g = f.clone();
            g[at] ^= 0x10;
            assert!(Header::parse(&g).is_err(), "flip at {at} passed");
        }
        for cut in 0..f.len() {
            assert!(Header::parse(&f[..cut]).is_err(), "cut at {cut} passed");
        }
        let mut g = f.clone();
        let last = g.len() - 1;
        g[last] ^= 1;
        assert!(
            Header::parse(&g).is_ok(),
            "weights are not checked at parse"
        );
        assert!(h.verify_weights(&g).is_err());
        let mut v2 = f.clone();
        v2[8] = 9;
        let e = Header::parse(&v2).unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::Unsupported);
        assert!(e.to_string().contains("version 9"), "{e}");
    }
}
