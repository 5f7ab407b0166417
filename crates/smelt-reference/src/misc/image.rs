//! ImageDecoder for the formats that need no codec library: BMP and PNM here, PNG (with its
//! own inflate) in `png.rs`, 8-bit TIFF in `tiff.rs` and baseline JPEG in `jpeg.rs`.
//! WebP and JPEG 2000 go through codec crates in `codecs.rs`.

use super::super::{one, Inputs};
use smelt_ir::op::misc::PixelFormat;
use smelt_ir::{bail, ensure, err, DType, Data, Result, Tensor, Value};

/// Decoded pixels: `channels` is 1 (gray) or 3 (RGB).
pub(super) struct Image {
    /// Width.
    pub w: usize,
    /// Height.
    pub h: usize,
    /// 1 or 3.
    pub channels: usize,
    /// Interleaved samples, row by row.
    pub px: Vec<u8>,
}

const MAX_PIXELS: usize = 1 << 28;

/// ImageDecoder: encoded bytes [N] -> [H, W, 3] or [H, W, 1] u8.
pub fn decode(x: &Inputs, fmt: PixelFormat) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let bytes = match t.data() {
        Data::U8(v) => v.as_slice(),
        _ => bail!(
            InvalidModel,
            "ImageDecoder: input must be uint8 bytes, got {}",
            t.dtype()
        ),
    };
    let img = if bytes.starts_with(b"BM") {
        bmp(bytes)?
    } else if bytes.len() > 2 && bytes[0] == b'P' && (b'1'..=b'6').contains(&bytes[1]) {
        pnm(bytes)?
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        super::png::png(bytes)?
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        super::tiff::tiff(bytes)?
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        let d = super::jpeg::decode(bytes)?;
        Image {
            w: d.w,
            h: d.h,
            channels: d.channels,
            px: d.px,
        }
    } else if super::codecs::is_webp(bytes) {
        super::codecs::webp(bytes)?
    } else if super::codecs::is_jpeg2000(bytes) {
        super::codecs::jpeg2000(bytes)?
    } else {
        bail!(Unsupported, "ImageDecoder: unsupported image format (BMP, PNM, PNG, TIFF, baseline JPEG, WebP and JPEG 2000 are supported)")
    };
    let (w, h) = (img.w, img.h);
    let (data, c) = match (fmt, img.channels) {
        (PixelFormat::Grayscale, 1) => (img.px, 1),
        (PixelFormat::Grayscale, _) => (
            img.px
                .chunks_exact(3)
                .map(|p| {
                    ((p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000)
                        >> 16) as u8
                })
                .collect(),
            1,
        ),
        (_, 1) => (img.px.iter().flat_map(|&g| [g, g, g]).collect(), 3),
        (PixelFormat::Rgb, _) => (img.px, 3),
        (PixelFormat::Bgr, _) => (
            img.px
                .chunks_exact(3)
                .flat_map(|p| [p[2], p[1], p[0]])
                .collect(),
            3,
        ),
    };
    one(Tensor::new(
        DType::U8,
        vec![h, w, c],
        Data::U8(data.into()),
    )?)
}

fn u16le(b: &[u8], o: usize) -> Result<u16> {
    b.get(o..o + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated header"))
}

fn u32le(b: &[u8], o: usize) -> Result<u32> {
    b.get(o..o + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated header"))
}

pub(super) fn check_size(w: usize, h: usize) -> Result<()> {
    ensure!(
        w > 0 && h > 0 && w.saturating_mul(h) <= MAX_PIXELS,
        InvalidInput,
        "ImageDecoder: bad image size {w}x{h}"
    );
    // A few bytes can declare a huge image (and decoding takes time in proportion): its
    // pixels, up to four samples each while decoding, must fit the run's limits.
    smelt_ir::limits::check_alloc((w * h * 4) as u64, &|| {
        format!("ImageDecoder: a {w}x{h} image")
    })
}

fn bmp(b: &[u8]) -> Result<Image> {
    let off = u32le(b, 10)? as usize;
    let dib = u32le(b, 14)? as usize;
    let w = u32le(b, 18)? as i32;
    let hraw = u32le(b, 22)? as i32;
    let bpp = u16le(b, 28)? as usize;
    let comp = u32le(b, 30)?;
    ensure!(
        comp == 0 || (comp == 3 && bpp == 32),
        Unsupported,
        "ImageDecoder: compressed BMP is not supported"
    );
    ensure!(
        w > 0 && hraw != 0,
        InvalidInput,
        "ImageDecoder: bad BMP size"
    );
    let (w, h) = (w as usize, hraw.unsigned_abs() as usize);
    check_size(w, h)?;
    let palette: Vec<[u8; 3]> = if bpp <= 8 {
        let n = match u32le(b, 46)? {
            0 => 1usize << bpp,
            n => n as usize,
        };
        let base = 14 + dib;
        (0..n.min(256))
            .map(|i| {
                let p = b
                    .get(base + 4 * i..base + 4 * i + 3)
                    .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated BMP palette"))?;
                Ok([p[2], p[1], p[0]])
            })
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    ensure!(
        matches!(bpp, 1 | 4 | 8 | 24 | 32),
        Unsupported,
        "ImageDecoder: {bpp}-bit BMP is not supported"
    );
    let stride = (w * bpp).div_ceil(32) * 4;
    let mut px = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        let row = if hraw > 0 { h - 1 - y } else { y };
        let r = b
            .get(off + row * stride..off + row * stride + stride)
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated BMP"))?;
        for x in 0..w {
            match bpp {
                24 | 32 => {
                    let p = &r[x * bpp / 8..x * bpp / 8 + 3];
                    px.extend_from_slice(&[p[2], p[1], p[0]]);
                }
                _ => {
                    let bit = x * bpp;
                    let v = (r[bit / 8] >> (8 - bpp - bit % 8)) & ((1u16 << bpp) - 1) as u8;
                    let c = palette.get(v as usize).ok_or_else(|| {
                        err!(InvalidInput, "ImageDecoder: BMP palette index out of range")
                    })?;
                    px.extend_from_slice(c);
                }
            }
        }
    }
    Ok(Image {
        w,
        h,
        channels: 3,
        px,
    })
}

fn pnm(b: &[u8]) -> Result<Image> {
    let kind = b[1];
    let mut i = 2;
    let mut token = || -> Result<usize> {
        loop {
            match b.get(i) {
                Some(c) if c.is_ascii_whitespace() => i += 1,
                Some(b'#') => {
                    while b.get(i).is_some_and(|&c| c != b'\n') {
                        i += 1;
                    }
                }
                Some(_) => break,
                None => bail!(InvalidInput, "ImageDecoder: truncated PNM header"),
            }
        }
        let st = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        std::str::from_utf8(&b[st..i])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: bad PNM header"))
    };
    let (w, h) = (token()?, token()?);
    check_size(w, h)?;
    let maxval = if kind == b'1' || kind == b'4' {
        1
    } else {
        token()?
    };
    ensure!(
        (1..=255).contains(&maxval),
        Unsupported,
        "ImageDecoder: PNM maxval {maxval} is not supported"
    );
    let channels = if kind == b'3' || kind == b'6' { 3 } else { 1 };
    let n = w * h * channels;
    let scale = |v: usize| -> u8 { ((v.min(maxval) * 255 + maxval / 2) / maxval) as u8 };
    let raw: Vec<u8> = match kind {
        b'5' | b'6' => {
            let st = i + 1;
            let d = b
                .get(st..st + n)
                .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated PNM data"))?;
            d.iter().map(|&v| scale(v as usize)).collect()
        }
        b'2' | b'3' => (0..n).map(|_| token().map(scale)).collect::<Result<_>>()?,
        b'1' => (0..n)
            .map(|_| loop {
                match b.get(i) {
                    Some(b'0') => {
                        i += 1;
                        return Ok(255);
                    }
                    Some(b'1') => {
                        i += 1;
                        return Ok(0);
                    }
                    Some(_) => i += 1,
                    None => bail!(InvalidInput, "ImageDecoder: truncated PBM data"),
                }
            })
            .collect::<Result<_>>()?,
        _ => {
            let st = i + 1;
            let stride = w.div_ceil(8);
            let d = b
                .get(st..st + stride * h)
                .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated PBM data"))?;
            (0..h)
                .flat_map(|y| {
                    (0..w).map(move |x| {
                        if d[y * stride + x / 8] >> (7 - x % 8) & 1 == 1 {
                            0
                        } else {
                            255
                        }
                    })
                })
                .collect()
        }
    };
    Ok(Image {
        w,
        h,
        channels,
        px: raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_pgm_to_rgb() {
        let x = Value::Tensor(
            Tensor::new(
                DType::U8,
                vec![14],
                Data::U8(b"P2\n2 1\n255\n0 9".to_vec().into()),
            )
            .unwrap(),
        );
        let out = decode(&Inputs::new(vec![Some(&x)]), PixelFormat::Rgb).unwrap();
        let t = out[0].tensor().unwrap();
        assert_eq!(t.shape(), &[1, 2, 3]);
        assert_eq!(t.to_i64().unwrap(), vec![0, 0, 0, 9, 9, 9]);
    }
}
