//! External tensor data: files beside the model, never outside its folder.

use crate::proto::TensorProto;
use smelt_ir::{bail, err, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

/// Reads the bytes of an externally stored tensor, refusing paths that leave `base_dir`.
pub fn read(t: &TensorProto, base_dir: &Path) -> Result<Vec<u8>> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        match kv.key.as_str() {
            "location" => location = Some(kv.value.clone()),
            "offset" => {
                offset = kv
                    .value
                    .parse()
                    .map_err(|_| err!(InvalidModel, "bad external data offset '{}'", kv.value))?
            }
            "length" => {
                length =
                    Some(kv.value.parse::<u64>().map_err(|_| {
                        err!(InvalidModel, "bad external data length '{}'", kv.value)
                    })?)
            }
            _ => {}
        }
    }
    let Some(loc) = location else {
        bail!(InvalidModel, "external data without a location")
    };
    let rel = Path::new(&loc);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        bail!(
            InvalidModel,
            "external data path '{loc}' leaves the model's folder"
        );
    }
    let path = base_dir.join(rel);
    // Symlinks could still point outside: compare canonical paths.
    let canon_base = base_dir
        .canonicalize()
        .map_err(|e| err!(Io, "model folder {}: {e}", base_dir.display()))?;
    let canon = path
        .canonicalize()
        .map_err(|e| err!(Io, "external data file {}: {e}", path.display()))?;
    if !canon.starts_with(&canon_base) {
        bail!(
            InvalidModel,
            "external data path '{loc}' leaves the model's folder"
        );
    }
    let mut f = std::fs::File::open(&canon)
        .map_err(|e| err!(Io, "external data file {}: {e}", path.display()))?;
    let size = f.metadata()?.len();
    let len = length.unwrap_or(size.saturating_sub(offset));
    if offset.checked_add(len).is_none_or(|end| end > size) {
        bail!(
            InvalidModel,
            "external data range {offset}+{len} is past the end of {} ({size} bytes)",
            path.display()
        );
    }
    f.seek(SeekFrom::Start(offset))?;
    let len = usize::try_from(len)
        .map_err(|_| err!(ResourceExhausted, "external data of {len} bytes"))?;
    let mut buf =
        smelt_ir::limits::try_vec(len, 0u8, &|| format!("external data {}", path.display()))?;
    f.read_exact(&mut buf)?;
    Ok(buf)
}
