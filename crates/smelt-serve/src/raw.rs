//! Tensors in the protocol's raw form (binary extension and gRPC raw contents):
//! little-endian, row-major, unpadded; BOOL one byte; BYTES each a 4-byte length then bytes.
//! Decoding takes untrusted bytes: sizes are checked against the shape before allocating.

use crate::datatype;
use crate::error::{Result, ServeError};
use half::{bf16, f16};
use smelt_ir::{DType, Data, Tensor};

/// The element count of a shape, or an error naming the tensor when it overflows.
pub fn count(name: &str, shape: &[usize]) -> Result<usize> {
    smelt_ir::numel(shape)
        .map_err(|_| ServeError::invalid(format!("input '{name}': shape {shape:?} is too large")))
}

/// Decodes the raw bytes of tensor `name` of a type and shape.
pub fn decode(name: &str, dtype: DType, shape: Vec<usize>, b: &[u8]) -> Result<Tensor> {
    let n = count(name, &shape)?;
    let data = match datatype::element_bytes(dtype) {
        None => Data::Str(strings(name, n, b)?.into()),
        Some(size) => {
            let need = n.checked_mul(size);
            if need != Some(b.len()) {
                return Err(ServeError::invalid(format!(
                    "input '{name}': {} bytes of data, but shape {shape:?} of {} needs {}",
                    b.len(),
                    datatype::name(dtype).unwrap_or("?"),
                    need.map_or("more than can be addressed".into(), |x| x.to_string())
                )));
            }
            fixed(dtype, b)?
        }
    };
    Tensor::new(dtype, shape, data)
        .map_err(|e| ServeError::from(e.context(format!("input '{name}'"))))
}

fn fixed(dtype: DType, b: &[u8]) -> Result<Data> {
    macro_rules! le {
        ($t:ty) => {
            b.chunks_exact(std::mem::size_of::<$t>())
                .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk width")))
                .collect()
        };
    }
    Ok(match dtype {
        DType::Bool => Data::Bool(b.iter().map(|&x| x != 0).collect()),
        DType::U8 => Data::U8(b.to_vec().into()),
        DType::I8 => Data::I8(b.iter().map(|&x| x as i8).collect()),
        DType::U16 => Data::U16(le!(u16)),
        DType::I16 => Data::I16(le!(i16)),
        DType::U32 => Data::U32(le!(u32)),
        DType::I32 => Data::I32(le!(i32)),
        DType::U64 => Data::U64(le!(u64)),
        DType::I64 => Data::I64(le!(i64)),
        DType::F32 => Data::F32(le!(f32)),
        DType::F64 => Data::F64(le!(f64)),
        DType::F16 => Data::F16(halves(b).map(f16::from_bits).collect()),
        DType::BF16 => Data::BF16(halves(b).map(bf16::from_bits).collect()),
        other => {
            return Err(ServeError::invalid(format!(
                "{other} tensors have no protocol datatype"
            )))
        }
    })
}

/// 16-bit little-endian words.
fn halves(b: &[u8]) -> impl Iterator<Item = u16> + '_ {
    b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]))
}

/// BYTES elements: exactly `n` length-prefixed strings filling `b`.
fn strings(name: &str, n: usize, b: &[u8]) -> Result<Vec<String>> {
    let bad = |what: &str| ServeError::invalid(format!("input '{name}': BYTES data {what}"));
    // Each element takes at least its 4-byte length: this bounds what is allocated.
    if n > b.len() / 4 {
        return Err(bad(&format!(
            "has {} bytes, too few for {n} elements",
            b.len()
        )));
    }
    let mut out = Vec::with_capacity(n);
    let mut rest = b;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_at_checked(4)
            .ok_or_else(|| bad("ends inside a length"))?;
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let (s, tail) = tail
            .split_at_checked(len)
            .ok_or_else(|| bad("ends inside an element"))?;
        out.push(String::from_utf8_lossy(s).into_owned());
        rest = tail;
    }
    if out.len() != n {
        return Err(bad(&format!(
            "has {} elements, the shape needs {n}",
            out.len()
        )));
    }
    Ok(out)
}

/// Encodes a tensor in the raw form.
pub fn encode(t: &Tensor) -> Result<Vec<u8>> {
    macro_rules! le {
        ($v:expr) => {
            $v.iter().flat_map(|x| x.to_le_bytes()).collect()
        };
    }
    Ok(match t.data() {
        Data::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        Data::U8(v) => v.to_vec(),
        Data::I8(v) => v.iter().map(|&x| x as u8).collect(),
        Data::U16(v) => le!(v),
        Data::I16(v) => le!(v),
        Data::U32(v) => le!(v),
        Data::I32(v) => le!(v),
        Data::U64(v) => le!(v),
        Data::I64(v) => le!(v),
        Data::F32(v) => le!(v),
        Data::F64(v) => le!(v),
        Data::F16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        Data::BF16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        Data::Str(v) => {
            let mut out = Vec::with_capacity(v.iter().map(|s| s.len() + 4).sum());
            for s in v.iter() {
                let len = u32::try_from(s.len())
                    .map_err(|_| ServeError::internal("a BYTES element over 4 GiB"))?;
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            out
        }
        Data::C64(_) | Data::C128(_) => return Err(datatype::no_datatype(t.dtype())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_checks_sizes() {
        let t = Tensor::from_f32(vec![2, 2], vec![1.0, -2.5, 3.0, f32::MIN]).unwrap();
        let b = encode(&t).unwrap();
        assert_eq!(decode("x", DType::F32, vec![2, 2], &b).unwrap(), t);
        let e = decode("x", DType::F32, vec![2, 3], &b).unwrap_err();
        assert!(
            e.message.contains("input 'x'") && e.message.contains("needs 24"),
            "{e}"
        );
        // A shape whose byte size overflows is refused before anything is allocated.
        let e = decode("x", DType::F32, vec![usize::MAX / 2, 4], &b).unwrap_err();
        assert_eq!(e.status, crate::error::Status::InvalidArgument);
        let s = Tensor::from_strings(vec![2], vec!["ab".into(), String::new()]).unwrap();
        let b = encode(&s).unwrap();
        assert_eq!(b, [2, 0, 0, 0, b'a', b'b', 0, 0, 0, 0]);
        assert_eq!(decode("s", DType::Str, vec![2], &b).unwrap(), s);
        assert!(decode("s", DType::Str, vec![3], &b).is_err());
        assert!(decode("s", DType::Str, vec![1_000_000_000], &b).is_err());
        assert!(decode("s", DType::Str, vec![2], &b[..7]).is_err());
        let h = Tensor::new(
            DType::F16,
            vec![1],
            Data::F16(vec![f16::from_f32(0.5)].into()),
        )
        .unwrap();
        assert_eq!(
            decode("h", DType::F16, vec![1], &encode(&h).unwrap()).unwrap(),
            h
        );
    }
}
