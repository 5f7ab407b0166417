//! Reading and writing NumPy `.npy` files (little-endian numeric and bool arrays), for
//! the command line's inputs and outputs; the reader takes hostile bytes (it is fuzzed).

use half::f16;
use smelt_ir::{bail, ensure, err, DType, Data, Result, Tensor};
use std::path::Path;

fn descr(d: DType) -> Result<&'static str> {
    use DType::*;
    Ok(match d {
        F32 => "<f4",
        F64 => "<f8",
        F16 => "<f2",
        I8 => "|i1",
        I16 => "<i2",
        I32 => "<i4",
        I64 => "<i8",
        U8 => "|u1",
        U16 => "<u2",
        U32 => "<u4",
        U64 => "<u8",
        Bool => "|b1",
        C64 => "<c8",
        C128 => "<c16",
        other => bail!(Unsupported, "{other} tensors cannot be written as .npy"),
    })
}

fn dtype_of(descr: &str) -> Option<DType> {
    use DType::*;
    let d = descr.trim_start_matches(['<', '|', '=']);
    Some(match d {
        "f4" => F32,
        "f8" => F64,
        "f2" => F16,
        "i1" => I8,
        "i2" => I16,
        "i4" => I32,
        "i8" => I64,
        "u1" => U8,
        "u2" => U16,
        "u4" => U32,
        "u8" => U64,
        "b1" => Bool,
        "c8" => C64,
        "c16" => C128,
        _ => return None,
    })
}

/// Encodes a tensor as `.npy` bytes.
pub fn encode(t: &Tensor) -> Result<Vec<u8>> {
    let shape: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
    let shape = if shape.len() == 1 {
        format!("({},)", shape[0])
    } else {
        format!("({})", shape.join(", "))
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(t.dtype())?
    );
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    match t.data() {
        Data::F32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::F64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::F16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_bits().to_le_bytes())),
        Data::I8(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::I16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::I32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::I64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::U8(v) => out.extend_from_slice(v),
        Data::U16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::U32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::U64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::Bool(v) => v.iter().for_each(|&x| out.push(x as u8)),
        Data::C64(v) => v
            .iter()
            .flatten()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::C128(v) => v
            .iter()
            .flatten()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::BF16(_) | Data::Str(_) => bail!(
            Unsupported,
            "{} tensors cannot be written as .npy",
            t.dtype()
        ),
    }
    Ok(out)
}

/// Decodes `.npy` bytes into a tensor.
pub fn decode(b: &[u8]) -> Result<Tensor> {
    ensure!(
        b.len() >= 10 && &b[..6] == b"\x93NUMPY",
        InvalidInput,
        "not a .npy file (bad magic)"
    );
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 => {
            ensure!(b.len() >= 12, InvalidInput, "truncated .npy header");
            (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
        }
        v => bail!(Unsupported, "unsupported .npy version {v}"),
    };
    let header = b
        .get(start..start + hlen)
        .ok_or_else(|| err!(InvalidInput, "truncated .npy header"))?;
    let header = std::str::from_utf8(header)
        .map_err(|_| err!(InvalidInput, "the .npy header is not text"))?;
    let field = |key: &str| -> Result<&str> {
        let k = format!("'{key}':");
        let i = header
            .find(&k)
            .ok_or_else(|| err!(InvalidInput, ".npy header has no '{key}'"))?
            + k.len();
        Ok(header[i..].trim_start())
    };
    let d = field("descr")?;
    let d = d
        .strip_prefix('\'')
        .and_then(|s| s.split('\'').next())
        .ok_or_else(|| err!(InvalidInput, "bad .npy descr"))?;
    ensure!(
        !d.starts_with('>'),
        Unsupported,
        "big-endian .npy data ({d}) is not supported"
    );
    let dtype =
        dtype_of(d).ok_or_else(|| err!(Unsupported, "unsupported .npy element type '{d}'"))?;
    ensure!(
        field("fortran_order")?.starts_with("False"),
        Unsupported,
        "Fortran-ordered .npy arrays are not supported"
    );
    let s = field("shape")?;
    let s = s
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| err!(InvalidInput, "bad .npy shape"))?;
    let mut shape = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        shape.push(
            part.parse::<usize>()
                .map_err(|_| err!(InvalidInput, "bad .npy dimension '{part}'"))?,
        );
    }
    let body = &b[start + hlen..];
    // No data fills a shape whose element count overflows.
    let n = smelt_ir::numel(&shape)
        .map_err(|_| err!(InvalidInput, ".npy shape {shape:?} has too many elements"))?;
    let size = (dtype.bits() / 8).max(1);
    ensure!(
        n.checked_mul(size) == Some(body.len()),
        InvalidInput,
        ".npy data has {} bytes, shape {shape:?} needs {n} elements of {size}",
        body.len()
    );
    macro_rules! le {
        ($t:ty, $w:expr) => {
            body.chunks_exact($w)
                .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk width")))
                .collect()
        };
    }
    let data = match dtype {
        DType::F32 => Data::F32(le!(f32, 4)),
        DType::F64 => Data::F64(le!(f64, 8)),
        DType::F16 => Data::F16(
            body.chunks_exact(2)
                .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        ),
        DType::I8 => Data::I8(body.iter().map(|&x| x as i8).collect()),
        DType::I16 => Data::I16(le!(i16, 2)),
        DType::I32 => Data::I32(le!(i32, 4)),
        DType::I64 => Data::I64(le!(i64, 8)),
        DType::U8 => Data::U8(body.to_vec().into()),
        DType::U16 => Data::U16(le!(u16, 2)),
        DType::U32 => Data::U32(le!(u32, 4)),
        DType::U64 => Data::U64(le!(u64, 8)),
        DType::Bool => Data::Bool(body.iter().map(|&x| x != 0).collect()),
        DType::C64 => Data::C64(
            body.chunks_exact(8)
                .map(|c| {
                    [
                        f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                        f32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                    ]
                })
                .collect(),
        ),
        DType::C128 => Data::C128(
            body.chunks_exact(16)
                .map(|c| {
                    [
                        f64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
                        f64::from_le_bytes(c[8..].try_into().expect("8 bytes")),
                    ]
                })
                .collect(),
        ),
        other => bail!(Unsupported, "unsupported .npy element type {other}"),
    };
    Tensor::new(dtype, shape, data)
}

/// Reads a `.npy` file; errors name the file.
pub fn read(path: &Path) -> Result<Tensor> {
    let b = std::fs::read(path).map_err(|e| err!(Io, "cannot read {}: {e}", path.display()))?;
    decode(&b).map_err(|e| e.context(path.display().to_string()))
}

/// Writes a `.npy` file.
pub fn write(path: &Path, t: &Tensor) -> Result<()> {
    let b = encode(t)?;
    std::fs::write(path, b).map_err(|e| err!(Io, "cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = Tensor::from_f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = encode(&t).unwrap();
        assert_eq!((b.len() - 24) % 64, 0);
        assert_eq!(decode(&b).unwrap(), t);
        let s = Tensor::from_i64_vec(vec![], vec![7]).unwrap();
        assert_eq!(decode(&encode(&s).unwrap()).unwrap(), s);
        assert!(decode(b"junk").is_err());
    }
}
