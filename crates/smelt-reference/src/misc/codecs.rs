//! ImageDecoder's WebP and JPEG 2000 formats, through pure-Rust codec crates
//! (`image-webp`, `hayro-jpeg2000`). Alpha is dropped, as the decoder's output is gray or RGB.

use super::image::{check_size, Image};
use smelt_ir::{bail, err, Result};

/// Is this a WebP file (RIFF container with the WEBP form type)?
pub(super) fn is_webp(b: &[u8]) -> bool {
    b.len() >= 12 && &b[0..4] == b"RIFF" && &b[8..12] == b"WEBP"
}

/// Is this a JPEG 2000 file (JP2 container or raw codestream)?
pub(super) fn is_jpeg2000(b: &[u8]) -> bool {
    b.starts_with(b"\x00\x00\x00\x0cjP  ") || b.starts_with(&[0xff, 0x4f, 0xff, 0x51])
}

/// Drop an alpha channel: `src` has `from` samples a pixel, keep the first `keep`.
fn keep_channels(src: &[u8], from: usize, keep: usize) -> Vec<u8> {
    if from == keep {
        return src.to_vec();
    }
    src.chunks_exact(from)
        .flat_map(|p| p[..keep].iter().copied())
        .collect()
}

/// Decode a WebP (lossy or lossless; the first frame of an animation) to RGB.
pub(super) fn webp(b: &[u8]) -> Result<Image> {
    let mut d = image_webp::WebPDecoder::new(std::io::Cursor::new(b))
        .map_err(|e| err!(InvalidInput, "ImageDecoder: WebP: {e}"))?;
    let (w, h) = d.dimensions();
    let (w, h) = (w as usize, h as usize);
    check_size(w, h)?;
    let from = if d.has_alpha() { 4 } else { 3 };
    let mut buf = vec![0u8; w * h * from];
    d.read_image(&mut buf)
        .map_err(|e| err!(InvalidInput, "ImageDecoder: WebP: {e}"))?;
    Ok(Image {
        w,
        h,
        channels: 3,
        px: keep_channels(&buf, from, 3),
    })
}

/// Decode a JPEG 2000 image (JP2 or codestream), scaled to 8 bits, to gray or RGB.
pub(super) fn jpeg2000(b: &[u8]) -> Result<Image> {
    use hayro_jpeg2000::{ColorSpace, DecodeSettings, DecoderContext, Image as J2k};
    let img = J2k::new(b, &DecodeSettings::default())
        .map_err(|e| err!(InvalidInput, "ImageDecoder: JPEG 2000: {e:?}"))?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    check_size(w, h)?;
    let color = match img.color_space() {
        ColorSpace::Gray => 1,
        ColorSpace::RGB => 3,
        ColorSpace::Icc { num_channels, .. } if matches!(num_channels, 1 | 3) => {
            *num_channels as usize
        }
        c => bail!(
            Unsupported,
            "ImageDecoder: JPEG 2000: unsupported color space {c:?}"
        ),
    };
    let from = color + usize::from(img.has_alpha());
    let mut ctx = DecoderContext::default();
    let decoded = img
        .decode(&mut ctx)
        .map_err(|e| err!(InvalidInput, "ImageDecoder: JPEG 2000: {e:?}"))?;
    let data = decoded.data_u8();
    if data.len() != w * h * from {
        bail!(
            InvalidInput,
            "ImageDecoder: JPEG 2000: decoded {} samples for a {w}x{h} image with {from} channels",
            data.len()
        );
    }
    Ok(Image {
        w,
        h,
        channels: color,
        px: keep_channels(&data, from, color),
    })
}
