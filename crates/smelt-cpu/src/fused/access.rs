//! Raw element access: strided chunks of any numeric type read as f32 and written back
//! converted, and exact copies between windows of any fixed-size type.
//!
//! Every function here is `unsafe`: callers pass base pointers and offsets that
//! `CpuPlan::new` proved in bounds for the buffer's storage.

use half::{bf16, f16};
use smelt_ir::{lowp, DType};
use smelt_kernels::convert::f32_to_bytes;

/// How a buffer's elements are stored and converted to and from f32.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Elem {
    F32,
    F64,
    F16,
    BF16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
    /// i4/i2 held one per byte: stores round and clamp to the range.
    SmallInt(i8, i8),
    /// u4/u2 held one per byte: stores round and clamp to the range.
    SmallUint(u8),
    /// float8/float4/e8m0 codes.
    LowFloat(DType),
    /// Not convertible to f32 (strings, complex): copies only.
    Opaque,
}

impl Elem {
    /// The storage of a type.
    pub(crate) fn of(d: DType) -> Elem {
        use DType::*;
        match d {
            F32 => Elem::F32,
            F64 => Elem::F64,
            F16 => Elem::F16,
            BF16 => Elem::BF16,
            I8 => Elem::I8,
            I16 => Elem::I16,
            I32 => Elem::I32,
            I64 => Elem::I64,
            U8 => Elem::U8,
            U16 => Elem::U16,
            U32 => Elem::U32,
            U64 => Elem::U64,
            Bool => Elem::Bool,
            I4 => Elem::SmallInt(-8, 7),
            I2 => Elem::SmallInt(-2, 1),
            U4 => Elem::SmallUint(15),
            U2 => Elem::SmallUint(3),
            F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 | F8E8M0 => Elem::LowFloat(d),
            Str | C64 | C128 => Elem::Opaque,
        }
    }
}

#[inline(always)]
unsafe fn read_with<T: Copy>(p: *const T, stride: isize, out: &mut [f32], f: impl Fn(T) -> f32) {
    if stride == 1 {
        for (j, o) in out.iter_mut().enumerate() {
            *o = f(*p.add(j));
        }
    } else if stride == 0 {
        out.fill(f(*p));
    } else {
        for (j, o) in out.iter_mut().enumerate() {
            *o = f(*p.offset(j as isize * stride));
        }
    }
}

#[inline(always)]
unsafe fn write_with<T: Copy>(p: *mut T, stride: isize, src: &[f32], f: impl Fn(f32) -> T) {
    if stride == 1 {
        for (j, &x) in src.iter().enumerate() {
            *p.add(j) = f(x);
        }
    } else {
        for (j, &x) in src.iter().enumerate() {
            *p.offset(j as isize * stride) = f(x);
        }
    }
}

/// Chunks ahead of a contiguous f32 load that [`load_chunk`] prefetches.
const PREFETCH_CHUNKS: usize = 4;

/// Reads `out.len()` elements starting at element `off`, `stride` apart, as f32.
///
/// # Safety
/// Every element read must lie in the storage behind `base`, which holds `e` elements.
pub(crate) unsafe fn load_chunk(
    e: Elem,
    base: *const u8,
    off: isize,
    stride: isize,
    out: &mut [f32],
) {
    match e {
        Elem::F32 => {
            let p = (base as *const f32).offset(off);
            if stride == 1 {
                // The same length a few chunks ahead, asked for meanwhile: a chunk's
                // loads, its ops and its stores come in bursts the hardware's stream
                // prefetchers do not run far enough ahead of.
                let ahead = p.wrapping_add(PREFETCH_CHUNKS * out.len());
                for j in (0..out.len()).step_by(16) {
                    smelt_kernels::simd::prefetch_read(ahead.wrapping_add(j));
                }
                std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len());
            } else {
                read_with(p, stride, out, |x| x);
            }
        }
        Elem::F64 => read_with((base as *const f64).offset(off), stride, out, |x| x as f32),
        Elem::F16 => read_with((base as *const u16).offset(off), stride, out, |x| {
            f16::from_bits(x).to_f32()
        }),
        Elem::BF16 => read_with((base as *const u16).offset(off), stride, out, |x| {
            bf16::from_bits(x).to_f32()
        }),
        Elem::I8 | Elem::SmallInt(..) => {
            read_with((base as *const i8).offset(off), stride, out, |x| x as f32)
        }
        Elem::I16 => read_with((base as *const i16).offset(off), stride, out, |x| x as f32),
        Elem::I32 => read_with((base as *const i32).offset(off), stride, out, |x| x as f32),
        Elem::I64 => read_with((base as *const i64).offset(off), stride, out, |x| x as f32),
        Elem::U8 | Elem::SmallUint(_) => read_with(base.offset(off), stride, out, |x| x as f32),
        Elem::U16 => read_with((base as *const u16).offset(off), stride, out, |x| x as f32),
        Elem::U32 => read_with((base as *const u32).offset(off), stride, out, |x| x as f32),
        Elem::U64 => read_with((base as *const u64).offset(off), stride, out, |x| x as f32),
        // Bytes, not bools: memory that was never written as bool must not be UB.
        Elem::Bool => read_with(base.offset(off), stride, out, |x| (x != 0) as u8 as f32),
        Elem::LowFloat(d) => read_with(base.offset(off), stride, out, |x| lowp::decode(d, x)),
        Elem::Opaque => out.fill(0.0),
    }
}

/// Writes `src` converted to `e` at element `off`, `stride` apart (floats round to nearest,
/// integers truncate toward zero and saturate, NaN becomes 0, bool is `x != 0`).
///
/// # Safety
/// Every element written must lie in the storage behind `base`, which holds `e` elements.
pub(crate) unsafe fn store_chunk(e: Elem, base: *mut u8, off: isize, stride: isize, src: &[f32]) {
    match e {
        Elem::F32 => {
            let p = (base as *mut f32).offset(off);
            if stride == 1 {
                std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len());
            } else {
                write_with(p, stride, src, |x| x);
            }
        }
        Elem::F64 => write_with((base as *mut f64).offset(off), stride, src, |x| x as f64),
        Elem::F16 => write_with((base as *mut u16).offset(off), stride, src, |x| {
            f16::from_f32(x).to_bits()
        }),
        Elem::BF16 => write_with((base as *mut u16).offset(off), stride, src, |x| {
            bf16::from_f32(x).to_bits()
        }),
        Elem::I8 if stride == 1 => f32_to_bytes(src, base.offset(off), true, false),
        Elem::I8 => write_with((base as *mut i8).offset(off), stride, src, |x| x as i8),
        Elem::I16 => write_with((base as *mut i16).offset(off), stride, src, |x| x as i16),
        Elem::I32 => write_with((base as *mut i32).offset(off), stride, src, |x| x as i32),
        Elem::I64 => write_with((base as *mut i64).offset(off), stride, src, |x| x as i64),
        Elem::U8 if stride == 1 => f32_to_bytes(src, base.offset(off), false, false),
        Elem::U8 => write_with(base.offset(off), stride, src, |x| x as u8),
        Elem::U16 => write_with((base as *mut u16).offset(off), stride, src, |x| x as u16),
        Elem::U32 => write_with((base as *mut u32).offset(off), stride, src, |x| x as u32),
        Elem::U64 => write_with((base as *mut u64).offset(off), stride, src, |x| x as u64),
        Elem::Bool => write_with(base.offset(off), stride, src, |x| (x != 0.0) as u8),
        Elem::SmallInt(lo, hi) => write_with((base as *mut i8).offset(off), stride, src, |x| {
            x.round_ties_even().clamp(lo as f32, hi as f32) as i8
        }),
        Elem::SmallUint(hi) => write_with(base.offset(off), stride, src, |x| {
            x.round_ties_even().clamp(0.0, hi as f32) as u8
        }),
        Elem::LowFloat(d) => {
            write_with(base.offset(off), stride, src, |x| lowp::encode(d, x, true))
        }
        Elem::Opaque => {}
    }
}

#[inline(always)]
unsafe fn copy_typed<T: Copy>(src: *const T, ss: isize, dst: *mut T, ds: isize, n: usize) {
    if ss == 1 && ds == 1 {
        std::ptr::copy(src, dst, n);
    } else {
        for j in 0..n as isize {
            *dst.offset(j * ds) = *src.offset(j * ss);
        }
    }
}

/// Copies `n` elements of `size` bytes exactly from `src[so + j*ss]` to `dst[do + j*ds]`;
/// with `as_bool`, bytes are normalized to 0/1 (a bool destination must never hold others).
///
/// # Safety
/// Both windows must lie in their storages, which hold elements of `size` bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn copy_chunk(
    size: usize,
    as_bool: bool,
    src: *const u8,
    so: isize,
    ss: isize,
    dst: *mut u8,
    dof: isize,
    ds: isize,
    n: usize,
) {
    match size {
        1 if as_bool => {
            for j in 0..n as isize {
                *dst.offset(dof + j * ds) = (*src.offset(so + j * ss) != 0) as u8;
            }
        }
        1 => copy_typed(src.offset(so), ss, dst.offset(dof), ds, n),
        2 => copy_typed(
            (src as *const u16).offset(so),
            ss,
            (dst as *mut u16).offset(dof),
            ds,
            n,
        ),
        4 => copy_typed(
            (src as *const u32).offset(so),
            ss,
            (dst as *mut u32).offset(dof),
            ds,
            n,
        ),
        8 => copy_typed(
            (src as *const u64).offset(so),
            ss,
            (dst as *mut u64).offset(dof),
            ds,
            n,
        ),
        16 => copy_typed(
            (src as *const [u64; 2]).offset(so),
            ss,
            (dst as *mut [u64; 2]).offset(dof),
            ds,
            n,
        ),
        _ => {}
    }
}
