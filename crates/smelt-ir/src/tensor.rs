//! Tensors: an element type, a concrete shape and the elements in row-major order.

use crate::Buf;
use crate::{bail, ensure, lowp, DType, Result};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Element storage, shared between clones (see [`Buf`]). Several logical types share one
/// storage: 4- and 2-bit integers are held one per byte (`I8`/`U8`), float8/float4/e8m0 as
/// their raw codes (`U8`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Data {
    /// f32 elements.
    F32(Buf<f32>),
    /// f64 elements.
    F64(Buf<f64>),
    /// f16 elements.
    F16(Buf<f16>),
    /// bf16 elements.
    BF16(Buf<bf16>),
    /// i8 elements (also i4, i2).
    I8(Buf<i8>),
    /// i16 elements.
    I16(Buf<i16>),
    /// i32 elements.
    I32(Buf<i32>),
    /// i64 elements.
    I64(Buf<i64>),
    /// u8 elements (also u4, u2, and raw float8/float4/e8m0 codes).
    U8(Buf<u8>),
    /// u16 elements.
    U16(Buf<u16>),
    /// u32 elements.
    U32(Buf<u32>),
    /// u64 elements.
    U64(Buf<u64>),
    /// Booleans.
    Bool(Buf<bool>),
    /// Strings.
    Str(Buf<String>),
    /// complex64 as [re, im].
    C64(Buf<[f32; 2]>),
    /// complex128 as [re, im].
    C128(Buf<[f64; 2]>),
}

/// Applies an expression to the vector inside any [`Data`] variant, binding it to `$v`.
#[macro_export]
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::Data::F32($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::F64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::F16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::BF16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::I8($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::I16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::I32($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::I64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::U8($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::U16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::U32($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::U64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::Bool($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::Str($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::C64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
            $crate::Data::C128($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                r
            }
        }
    };
}

/// Like [`with_data!`], but the body builds a new `Data` of the same variant from `$v`.
#[macro_export]
macro_rules! map_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::Data::F32($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::F32(r)
            }
            $crate::Data::F64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::F64(r)
            }
            $crate::Data::F16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::F16(r)
            }
            $crate::Data::BF16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::BF16(r)
            }
            $crate::Data::I8($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::I8(r)
            }
            $crate::Data::I16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::I16(r)
            }
            $crate::Data::I32($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::I32(r)
            }
            $crate::Data::I64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::I64(r)
            }
            $crate::Data::U8($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::U8(r)
            }
            $crate::Data::U16($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::U16(r)
            }
            $crate::Data::U32($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::U32(r)
            }
            $crate::Data::U64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::U64(r)
            }
            $crate::Data::Bool($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::Bool(r)
            }
            $crate::Data::Str($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::Str(r)
            }
            $crate::Data::C64($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::C64(r)
            }
            $crate::Data::C128($v) => {
                #[allow(clippy::clone_on_copy)]
                let r = $body;
                $crate::Data::C128(r)
            }
        }
    };
}

impl Data {
    /// Number of elements.
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Zero-filled storage for a logical type, allocated fallibly within the running
    /// thread's limits (see [`crate::limits::check_alloc`]).
    pub fn zeros(dtype: DType, n: usize) -> Result<Data> {
        use crate::limits::try_vec;
        use DType::*;
        let what = || format!("{n} {dtype} elements");
        Ok(match dtype {
            F32 => Data::F32(try_vec(n, 0.0, &what)?.into()),
            F64 => Data::F64(try_vec(n, 0.0, &what)?.into()),
            F16 => Data::F16(try_vec(n, f16::ZERO, &what)?.into()),
            BF16 => Data::BF16(try_vec(n, bf16::ZERO, &what)?.into()),
            I8 | I4 | I2 => Data::I8(try_vec(n, 0, &what)?.into()),
            I16 => Data::I16(try_vec(n, 0, &what)?.into()),
            I32 => Data::I32(try_vec(n, 0, &what)?.into()),
            I64 => Data::I64(try_vec(n, 0, &what)?.into()),
            U8 | U4 | U2 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 => {
                Data::U8(try_vec(n, 0, &what)?.into())
            }
            F8E8M0 => Data::U8(try_vec(n, 127, &what)?.into()),
            U16 => Data::U16(try_vec(n, 0, &what)?.into()),
            U32 => Data::U32(try_vec(n, 0, &what)?.into()),
            U64 => Data::U64(try_vec(n, 0, &what)?.into()),
            Bool => Data::Bool(try_vec(n, false, &what)?.into()),
            Str => Data::Str(try_vec(n, String::new(), &what)?.into()),
            C64 => Data::C64(try_vec(n, [0.0; 2], &what)?.into()),
            C128 => Data::C128(try_vec(n, [0.0; 2], &what)?.into()),
        })
    }

    /// Empty storage of the variant that holds `dtype`.
    fn empty(dtype: DType) -> Data {
        use DType::*;
        match dtype {
            F32 => Data::F32(Buf::default()),
            F64 => Data::F64(Buf::default()),
            F16 => Data::F16(Buf::default()),
            BF16 => Data::BF16(Buf::default()),
            I8 | I4 | I2 => Data::I8(Buf::default()),
            I16 => Data::I16(Buf::default()),
            I32 => Data::I32(Buf::default()),
            I64 => Data::I64(Buf::default()),
            U8 | U4 | U2 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 | F8E8M0 => {
                Data::U8(Buf::default())
            }
            U16 => Data::U16(Buf::default()),
            U32 => Data::U32(Buf::default()),
            U64 => Data::U64(Buf::default()),
            Bool => Data::Bool(Buf::default()),
            Str => Data::Str(Buf::default()),
            C64 => Data::C64(Buf::default()),
            C128 => Data::C128(Buf::default()),
        }
    }

    /// True when this storage variant is the one used for `dtype`.
    pub fn holds(&self, dtype: DType) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(&Data::empty(dtype))
    }

    /// Elements at the given flat indices, in that order (the basis of every data-movement op).
    /// Panics if an index is out of range; callers check indices they got from users.
    pub fn take(&self, idx: &[usize]) -> Data {
        map_data!(self, v => idx.iter().map(|&i| v[i].clone()).collect())
    }

    /// Concatenation of several storages of the same variant.
    pub fn concat(parts: &[&Data]) -> Result<Data> {
        let Some(first) = parts.first() else {
            bail!(Internal, "concat of no parts")
        };
        macro_rules! cat {
            ($($var:ident),*) => {
                match first {
                    $(Data::$var(_) => {
                        let mut out = Vec::new();
                        for p in parts {
                            let Data::$var(b) = p else {
                                bail!(Internal, "concat of storages of different types")
                            };
                            out.extend_from_slice(b);
                        }
                        Data::$var(out.into())
                    })*
                }
            };
        }
        Ok(cat!(
            F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool, Str, C64, C128
        ))
    }

    /// Writes `src[k]` to flat position `idx[k]` (later writes win). Panics on out-of-range indices.
    pub fn scatter(&mut self, idx: &[usize], src: &Data) -> Result<()> {
        macro_rules! sc {
            ($($var:ident),*) => {
                match (self, src) {
                    $((Data::$var(a), Data::$var(b)) => {
                        let a = a.make_mut();
                        for (k, &i) in idx.iter().enumerate() {
                            #[allow(clippy::clone_on_copy)]
                            let v = b[k].clone();
                            a[i] = v;
                        }
                    })*
                    _ => bail!(Internal, "scatter between storages of different types"),
                }
            };
        }
        sc!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool, Str, C64, C128);
        Ok(())
    }
}

/// A dense tensor with a concrete shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Data,
}

/// Row-major strides (in elements) of a shape. They saturate: only an empty tensor's
/// strides can overflow (a 0 dim beside huge ones), and nothing is read through those.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1]);
    }
    s
}

/// Number of elements of a shape, or an error when it overflows.
pub fn numel(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| crate::err!(ResourceExhausted, "shape {shape:?} has too many elements"))
}

impl Tensor {
    /// A tensor from its parts; checks that the storage fits the type and the shape.
    pub fn new(dtype: DType, shape: Vec<usize>, data: Data) -> Result<Tensor> {
        ensure!(
            data.holds(dtype),
            Internal,
            "storage {:?} does not hold {dtype}",
            std::mem::discriminant(&data)
        );
        let n = numel(&shape)?;
        ensure!(
            data.len() == n,
            Internal,
            "shape {shape:?} needs {n} elements, got {}",
            data.len()
        );
        if let Some(bytes) = crate::limits::storage_bytes(dtype, n) {
            crate::limits::check_alloc(bytes, &|| format!("a {dtype} tensor {shape:?}"))?;
        }
        crate::limits::check_extent(dtype, &shape, &|| format!("a {dtype} tensor"))?;
        Ok(Tensor { dtype, shape, data })
    }

    /// A zero-filled tensor, allocated fallibly within the running thread's limits.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
        crate::limits::check_extent(dtype, &shape, &|| format!("a {dtype} tensor"))?;
        let n = numel(&shape)?;
        Ok(Tensor {
            dtype,
            data: Data::zeros(dtype, n).map_err(|e| e.context(format!("tensor {shape:?}")))?,
            shape,
        })
    }

    /// An f32 tensor.
    pub fn from_f32(shape: Vec<usize>, v: Vec<f32>) -> Result<Tensor> {
        Tensor::new(DType::F32, shape, Data::F32(v.into()))
    }

    /// An i64 tensor.
    pub fn from_i64_vec(shape: Vec<usize>, v: Vec<i64>) -> Result<Tensor> {
        Tensor::new(DType::I64, shape, Data::I64(v.into()))
    }

    /// A bool tensor.
    pub fn from_bools(shape: Vec<usize>, v: Vec<bool>) -> Result<Tensor> {
        Tensor::new(DType::Bool, shape, Data::Bool(v.into()))
    }

    /// A string tensor.
    pub fn from_strings(shape: Vec<usize>, v: Vec<String>) -> Result<Tensor> {
        Tensor::new(DType::Str, shape, Data::Str(v.into()))
    }

    /// A rank-0 i64 tensor.
    pub fn scalar_i64(x: i64) -> Tensor {
        Tensor {
            dtype: DType::I64,
            shape: vec![],
            data: Data::I64(vec![x].into()),
        }
    }

    /// A rank-0 f32 tensor.
    pub fn scalar_f32(x: f32) -> Tensor {
        Tensor {
            dtype: DType::F32,
            shape: vec![],
            data: Data::F32(vec![x].into()),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The rank (number of dimensions).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The storage.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// Mutable storage (the length must not change).
    pub fn data_mut(&mut self) -> &mut Data {
        &mut self.data
    }

    /// Takes the storage.
    pub fn into_data(self) -> Data {
        self.data
    }

    /// Same elements, another shape with the same element count.
    pub fn reshape(mut self, shape: Vec<usize>) -> Result<Tensor> {
        // A shape whose element count overflows matches no tensor.
        let n = numel(&shape).ok();
        ensure!(
            n == Some(self.len()),
            InvalidModel,
            "cannot reshape {:?} to {shape:?}",
            self.shape
        );
        crate::limits::check_extent(self.dtype, &shape, &|| "a reshaped tensor".into())?;
        self.shape = shape;
        Ok(self)
    }

    /// Same storage relabelled with another logical type that shares it (e.g. u8 to f8e4m3fn).
    pub fn with_dtype(mut self, dtype: DType) -> Result<Tensor> {
        ensure!(
            self.data.holds(dtype),
            Internal,
            "cannot relabel {} as {dtype}",
            self.dtype
        );
        self.dtype = dtype;
        Ok(self)
    }

    /// The f32 elements, when the type is f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Data::F32(v) => Some(v.as_slice()),
            _ => None,
        }
    }

    /// The i64 elements, when the type is i64.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            Data::I64(v) => Some(v.as_slice()),
            _ => None,
        }
    }

    /// The elements as f64, for every real numeric type and bool.
    pub fn to_f64(&self) -> Result<Vec<f64>> {
        let d = self.dtype;
        Ok(match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::F64(v) => v.to_vec(),
            Data::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            Data::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            Data::I8(v) => v.iter().map(|&x| x as f64).collect(),
            Data::I16(v) => v.iter().map(|&x| x as f64).collect(),
            Data::I32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::U8(v) if d.is_low_precision_float() => {
                v.iter().map(|&x| lowp::decode(d, x) as f64).collect()
            }
            Data::U8(v) => v.iter().map(|&x| x as f64).collect(),
            Data::U16(v) => v.iter().map(|&x| x as f64).collect(),
            Data::U32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::U64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
            Data::Str(_) | Data::C64(_) | Data::C128(_) => {
                bail!(Unsupported, "{d} elements are not real numbers")
            }
        })
    }

    /// The elements as i64, for integer types and bool (u64 above i64::MAX wraps).
    pub fn to_i64(&self) -> Result<Vec<i64>> {
        Ok(match &self.data {
            Data::I8(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I16(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.to_vec(),
            Data::U8(v) if !self.dtype.is_low_precision_float() => {
                v.iter().map(|&x| x as i64).collect()
            }
            Data::U16(v) => v.iter().map(|&x| x as i64).collect(),
            Data::U32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::U64(v) => v.iter().map(|&x| x as i64).collect(),
            Data::Bool(v) => v.iter().map(|&x| x as i64).collect(),
            _ => bail!(
                InvalidModel,
                "expected integer elements, got {}",
                self.dtype
            ),
        })
    }

    /// The elements as bool (non-zero is true) for bool and numeric types.
    pub fn to_bool(&self) -> Result<Vec<bool>> {
        match &self.data {
            Data::Bool(v) => Ok(v.to_vec()),
            _ => Ok(self.to_f64()?.into_iter().map(|x| x != 0.0).collect()),
        }
    }

    /// A tensor of `dtype` from f64 values: floats round to nearest, integers truncate toward
    /// zero and saturate, NaN becomes 0 for integers.
    pub fn from_f64(dtype: DType, shape: Vec<usize>, v: &[f64]) -> Result<Tensor> {
        use DType::*;
        let data = match dtype {
            F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
            F64 => Data::F64(v.to_vec().into()),
            F16 => Data::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
            BF16 => Data::BF16(v.iter().map(|&x| bf16::from_f64(x)).collect()),
            I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
            I16 => Data::I16(v.iter().map(|&x| x as i16).collect()),
            I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
            I64 => Data::I64(v.iter().map(|&x| x as i64).collect()),
            U8 => Data::U8(v.iter().map(|&x| x as u8).collect()),
            U16 => Data::U16(v.iter().map(|&x| x as u16).collect()),
            U32 => Data::U32(v.iter().map(|&x| x as u32).collect()),
            U64 => Data::U64(v.iter().map(|&x| x as u64).collect()),
            I4 => Data::I8(
                v.iter()
                    .map(|&x| x.round_ties_even().clamp(-8.0, 7.0) as i8)
                    .collect(),
            ),
            I2 => Data::I8(
                v.iter()
                    .map(|&x| x.round_ties_even().clamp(-2.0, 1.0) as i8)
                    .collect(),
            ),
            U4 => Data::U8(
                v.iter()
                    .map(|&x| x.round_ties_even().clamp(0.0, 15.0) as u8)
                    .collect(),
            ),
            U2 => Data::U8(
                v.iter()
                    .map(|&x| x.round_ties_even().clamp(0.0, 3.0) as u8)
                    .collect(),
            ),
            F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 | F8E8M0 => Data::U8(
                v.iter()
                    .map(|&x| lowp::encode(dtype, x as f32, true))
                    .collect(),
            ),
            Bool => Data::Bool(v.iter().map(|&x| x != 0.0).collect()),
            Str | C64 | C128 => bail!(
                Unsupported,
                "cannot build {dtype} elements from real numbers"
            ),
        };
        Tensor::new(dtype, shape, data)
    }

    /// A tensor of an integer (or bool) `dtype` from i64 values, wrapping like a C cast.
    pub fn from_i64(dtype: DType, shape: Vec<usize>, v: &[i64]) -> Result<Tensor> {
        use DType::*;
        let data = match dtype {
            I8 | I4 | I2 => Data::I8(v.iter().map(|&x| x as i8).collect()),
            I16 => Data::I16(v.iter().map(|&x| x as i16).collect()),
            I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
            I64 => Data::I64(v.to_vec().into()),
            U8 | U4 | U2 => Data::U8(v.iter().map(|&x| x as u8).collect()),
            U16 => Data::U16(v.iter().map(|&x| x as u16).collect()),
            U32 => Data::U32(v.iter().map(|&x| x as u32).collect()),
            U64 => Data::U64(v.iter().map(|&x| x as u64).collect()),
            Bool => Data::Bool(v.iter().map(|&x| x != 0).collect()),
            _ => {
                return Tensor::from_f64(
                    dtype,
                    shape,
                    &v.iter().map(|&x| x as f64).collect::<Vec<_>>(),
                )
            }
        };
        Tensor::new(dtype, shape, data)
    }

    /// Elements at the given flat indices, as a tensor of the given shape.
    pub fn take(&self, shape: Vec<usize>, idx: &[usize]) -> Result<Tensor> {
        Tensor::new(self.dtype, shape, self.data.take(idx))
    }

    /// Bytes the elements occupy when packed as ONNX packs them.
    pub fn nbytes(&self) -> usize {
        match &self.data {
            Data::Str(v) => v.iter().map(|s| s.len()).sum(),
            _ => (self.len() * self.dtype.bits()).div_ceil(8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_shape_and_storage() {
        assert!(Tensor::new(DType::F32, vec![2, 2], Data::F32(vec![0.0; 4].into())).is_ok());
        assert!(Tensor::new(DType::F32, vec![2, 3], Data::F32(vec![0.0; 4].into())).is_err());
        assert!(Tensor::new(DType::I64, vec![1], Data::F32(vec![0.0].into())).is_err());
        assert!(Tensor::new(DType::F8E4M3FN, vec![1], Data::U8(vec![0].into())).is_ok());
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(strides(&[]), Vec::<usize>::new());
    }

    #[test]
    fn numeric_round_trip() {
        let t = Tensor::from_f64(DType::I32, vec![3], &[1.9, -2.7, 3.0]).unwrap();
        assert_eq!(t.to_i64().unwrap(), vec![1, -2, 3]);
        let h = Tensor::from_f64(DType::F16, vec![1], &[0.1]).unwrap();
        assert!((h.to_f64().unwrap()[0] - 0.1).abs() < 1e-4);
    }
}
