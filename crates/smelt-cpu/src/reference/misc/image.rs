//! ImageDecoder for the formats that need no codec library: BMP, PNM, PNG (with its own
//! inflate), 8-bit TIFF (none/LZW/deflate/PackBits) and baseline JPEG (see `jpeg.rs`).
//! JPEG 2000 and WebP are refused.

use super::super::{one, Inputs};
use smelt_ir::op::misc::PixelFormat;
use smelt_ir::{bail, ensure, err, DType, Data, Result, Tensor, Value};

/// Decoded pixels: `channels` is 1 (gray) or 3 (RGB).
struct Image {
    w: usize,
    h: usize,
    channels: usize,
    px: Vec<u8>,
}

const MAX_PIXELS: usize = 1 << 28;

/// ImageDecoder: encoded bytes [N] -> [H, W, 3] or [H, W, 1] u8.
pub fn decode(x: &Inputs, fmt: PixelFormat) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let bytes = match t.data() {
        Data::U8(v) => v.as_slice(),
        _ => bail!("ImageDecoder: input must be uint8 bytes, got {}", t.dtype()),
    };
    let img = if bytes.starts_with(b"BM") {
        bmp(bytes)?
    } else if bytes.len() > 2 && bytes[0] == b'P' && (b'1'..=b'6').contains(&bytes[1]) {
        pnm(bytes)?
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(bytes)?
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        tiff(bytes)?
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        let d = super::jpeg::decode(bytes)?;
        Image {
            w: d.w,
            h: d.h,
            channels: d.channels,
            px: d.px,
        }
    } else {
        bail!("ImageDecoder: unsupported image format (BMP, PNM, PNG, TIFF and baseline JPEG are supported)")
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
    one(Tensor::new(DType::U8, vec![h, w, c], Data::U8(data))?)
}

fn u16le(b: &[u8], o: usize) -> Result<u16> {
    b.get(o..o + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| err!("ImageDecoder: truncated header"))
}

fn u32le(b: &[u8], o: usize) -> Result<u32> {
    b.get(o..o + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| err!("ImageDecoder: truncated header"))
}

fn check_size(w: usize, h: usize) -> Result<()> {
    ensure!(
        w > 0 && h > 0 && w.saturating_mul(h) <= MAX_PIXELS,
        "ImageDecoder: bad image size {w}x{h}"
    );
    Ok(())
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
        "ImageDecoder: compressed BMP is not supported"
    );
    ensure!(w > 0 && hraw != 0, "ImageDecoder: bad BMP size");
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
                    .ok_or_else(|| err!("ImageDecoder: truncated BMP palette"))?;
                Ok([p[2], p[1], p[0]])
            })
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    ensure!(
        matches!(bpp, 1 | 4 | 8 | 24 | 32),
        "ImageDecoder: {bpp}-bit BMP is not supported"
    );
    let stride = (w * bpp).div_ceil(32) * 4;
    let mut px = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        let row = if hraw > 0 { h - 1 - y } else { y };
        let r = b
            .get(off + row * stride..off + row * stride + stride)
            .ok_or_else(|| err!("ImageDecoder: truncated BMP"))?;
        for x in 0..w {
            match bpp {
                24 | 32 => {
                    let p = &r[x * bpp / 8..x * bpp / 8 + 3];
                    px.extend_from_slice(&[p[2], p[1], p[0]]);
                }
                _ => {
                    let bit = x * bpp;
                    let v = (r[bit / 8] >> (8 - bpp - bit % 8)) & ((1u16 << bpp) - 1) as u8;
                    let c = palette
                        .get(v as usize)
                        .ok_or_else(|| err!("ImageDecoder: BMP palette index out of range"))?;
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
                None => bail!("ImageDecoder: truncated PNM header"),
            }
        }
        let st = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        std::str::from_utf8(&b[st..i])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| err!("ImageDecoder: bad PNM header"))
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
                .ok_or_else(|| err!("ImageDecoder: truncated PNM data"))?;
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
                    None => bail!("ImageDecoder: truncated PBM data"),
                }
            })
            .collect::<Result<_>>()?,
        _ => {
            let st = i + 1;
            let stride = w.div_ceil(8);
            let d = b
                .get(st..st + stride * h)
                .ok_or_else(|| err!("ImageDecoder: truncated PBM data"))?;
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

// ---------------------------------------------------------------- PNG

struct Bits<'a> {
    b: &'a [u8],
    pos: usize,
    bit: u32,
    nbits: u32,
}

impl Bits<'_> {
    fn need(&mut self, n: u32) -> Result<u32> {
        while self.nbits < n {
            let byte = *self
                .b
                .get(self.pos)
                .ok_or_else(|| err!("ImageDecoder: truncated deflate stream"))?;
            self.pos += 1;
            self.bit |= (byte as u32) << self.nbits;
            self.nbits += 8;
        }
        let v = self.bit & ((1u64 << n) - 1) as u32;
        self.bit >>= n;
        self.nbits -= n;
        Ok(v)
    }
}

/// A canonical Huffman code: counts per length and symbols in code order.
struct Huff {
    count: [u16; 16],
    sym: Vec<u16>,
}

impl Huff {
    fn new(lengths: &[u8]) -> Result<Huff> {
        let mut count = [0u16; 16];
        for &l in lengths {
            count[l as usize] += 1;
        }
        count[0] = 0;
        let mut offs = [0u16; 16];
        for i in 1..15 {
            offs[i + 1] = offs[i] + count[i];
        }
        let mut sym = vec![0u16; lengths.len()];
        for (s, &l) in lengths.iter().enumerate() {
            if l != 0 {
                sym[offs[l as usize] as usize] = s as u16;
                offs[l as usize] += 1;
            }
        }
        Ok(Huff { count, sym })
    }

    fn decode(&self, bits: &mut Bits) -> Result<u16> {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= bits.need(1)? as i32;
            let count = self.count[len] as i32;
            if code - count < first {
                return self
                    .sym
                    .get((index + (code - first)) as usize)
                    .copied()
                    .ok_or_else(|| err!("ImageDecoder: bad Huffman code"));
            }
            index += count;
            first += count;
            first <<= 1;
            code <<= 1;
        }
        bail!("ImageDecoder: bad Huffman code")
    }
}

const LBASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEXT: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DBASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DEXT: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Inflates a zlib stream, producing at most `limit` bytes.
fn inflate(z: &[u8], limit: usize) -> Result<Vec<u8>> {
    ensure!(
        z.len() >= 2 && z[0] & 0x0f == 8,
        "ImageDecoder: not a zlib stream"
    );
    let mut bits = Bits {
        b: &z[2..],
        pos: 0,
        bit: 0,
        nbits: 0,
    };
    let mut out: Vec<u8> = Vec::new();
    loop {
        let last = bits.need(1)?;
        match bits.need(2)? {
            0 => {
                bits.bit = 0;
                bits.nbits = 0;
                let p = bits.pos;
                let hdr = bits
                    .b
                    .get(p..p + 4)
                    .ok_or_else(|| err!("ImageDecoder: truncated stored block"))?;
                let len = u16::from_le_bytes([hdr[0], hdr[1]]) as usize;
                let d = bits
                    .b
                    .get(p + 4..p + 4 + len)
                    .ok_or_else(|| err!("ImageDecoder: truncated stored block"))?;
                out.extend_from_slice(d);
                bits.pos = p + 4 + len;
            }
            t @ (1 | 2) => {
                let (lit, dist) = if t == 1 {
                    let mut l = [8u8; 288];
                    l[144..256].fill(9);
                    l[256..280].fill(7);
                    (Huff::new(&l)?, Huff::new(&[5u8; 30])?)
                } else {
                    let nlen = bits.need(5)? as usize + 257;
                    let ndist = bits.need(5)? as usize + 1;
                    let ncode = bits.need(4)? as usize + 4;
                    const ORDER: [usize; 19] = [
                        16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
                    ];
                    let mut cl = [0u8; 19];
                    for &o in &ORDER[..ncode] {
                        cl[o] = bits.need(3)? as u8;
                    }
                    let ch = Huff::new(&cl)?;
                    let mut lens = vec![0u8; nlen + ndist];
                    let mut i = 0;
                    while i < nlen + ndist {
                        let s = ch.decode(&mut bits)?;
                        let (val, rep) = match s {
                            0..=15 => (s as u8, 1),
                            16 => {
                                ensure!(i > 0, "ImageDecoder: bad code lengths");
                                (lens[i - 1], 3 + bits.need(2)? as usize)
                            }
                            17 => (0, 3 + bits.need(3)? as usize),
                            _ => (0, 11 + bits.need(7)? as usize),
                        };
                        ensure!(i + rep <= lens.len(), "ImageDecoder: bad code lengths");
                        lens[i..i + rep].fill(val);
                        i += rep;
                    }
                    (Huff::new(&lens[..nlen])?, Huff::new(&lens[nlen..])?)
                };
                loop {
                    let s = lit.decode(&mut bits)? as usize;
                    if s < 256 {
                        out.push(s as u8);
                    } else if s == 256 {
                        break;
                    } else {
                        let k = s - 257;
                        ensure!(k < 29, "ImageDecoder: bad length code");
                        let len = LBASE[k] as usize + bits.need(LEXT[k] as u32)? as usize;
                        let d = dist.decode(&mut bits)? as usize;
                        ensure!(d < 30, "ImageDecoder: bad distance code");
                        let dd = DBASE[d] as usize + bits.need(DEXT[d] as u32)? as usize;
                        ensure!(dd <= out.len(), "ImageDecoder: distance too far back");
                        let st = out.len() - dd;
                        for j in 0..len {
                            out.push(out[st + j]);
                        }
                    }
                    ensure!(
                        out.len() <= limit,
                        "ImageDecoder: image data larger than declared"
                    );
                }
            }
            _ => bail!("ImageDecoder: bad deflate block type"),
        }
        ensure!(
            out.len() <= limit,
            "ImageDecoder: image data larger than declared"
        );
        if last == 1 {
            return Ok(out);
        }
    }
}

fn be32(b: &[u8], o: usize) -> Result<u32> {
    b.get(o..o + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| err!("ImageDecoder: truncated PNG"))
}

fn png(b: &[u8]) -> Result<Image> {
    let mut p = 8;
    let (mut w, mut h, mut depth, mut ctype, mut interlace) = (0usize, 0usize, 0u8, 0u8, 0u8);
    let mut palette: Vec<[u8; 3]> = Vec::new();
    let mut idat = Vec::new();
    while p + 8 <= b.len() {
        let len = be32(b, p)? as usize;
        let kind = &b[p + 4..p + 8];
        let d = b
            .get(p + 8..p + 8 + len)
            .ok_or_else(|| err!("ImageDecoder: truncated PNG chunk"))?;
        match kind {
            b"IHDR" => {
                ensure!(len >= 13, "ImageDecoder: bad IHDR");
                w = be32(d, 0)? as usize;
                h = be32(d, 4)? as usize;
                depth = d[8];
                ctype = d[9];
                interlace = d[12];
            }
            b"PLTE" => palette = d.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect(),
            b"IDAT" => idat.extend_from_slice(d),
            b"IEND" => break,
            _ => {}
        }
        p += 12 + len;
    }
    check_size(w, h)?;
    ensure!(
        interlace == 0,
        "ImageDecoder: interlaced PNG is not supported"
    );
    let spp = match ctype {
        0 | 3 => 1,
        2 => 3,
        4 => 2,
        6 => 4,
        _ => bail!("ImageDecoder: bad PNG color type {ctype}"),
    };
    ensure!(
        matches!(depth, 1 | 2 | 4 | 8 | 16),
        "ImageDecoder: bad PNG bit depth {depth}"
    );
    let bits_pp = spp * depth as usize;
    let stride = (w * bits_pp).div_ceil(8);
    let bpp = bits_pp.div_ceil(8);
    let raw = inflate(&idat, (stride + 1) * h)?;
    ensure!(
        raw.len() == (stride + 1) * h,
        "ImageDecoder: PNG data has the wrong size"
    );
    let mut cur = vec![0u8; stride];
    let mut prev = vec![0u8; stride];
    let mut px = Vec::with_capacity(w * h * 3);
    let channels = if ctype == 0 || ctype == 4 { 1 } else { 3 };
    for y in 0..h {
        let line = &raw[y * (stride + 1)..(y + 1) * (stride + 1)];
        let ft = line[0];
        for i in 0..stride {
            let a = if i >= bpp { cur[i - bpp] as i16 } else { 0 };
            let up = prev[i] as i16;
            let c = if i >= bpp { prev[i - bpp] as i16 } else { 0 };
            let pred = match ft {
                0 => 0,
                1 => a,
                2 => up,
                3 => (a + up) / 2,
                4 => {
                    let pp = a + up - c;
                    let (pa, pb, pc) = ((pp - a).abs(), (pp - up).abs(), (pp - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        up
                    } else {
                        c
                    }
                }
                _ => bail!("ImageDecoder: bad PNG filter {ft}"),
            };
            cur[i] = line[1 + i].wrapping_add(pred as u8);
        }
        for x in 0..w {
            // Sample s of pixel x, scaled to 8 bits.
            let sample = |s: usize| -> u8 {
                let bit = (x * spp + s) * depth as usize;
                match depth {
                    16 | 8 => cur[bit / 8],
                    d => {
                        let v =
                            (cur[bit / 8] >> (8 - d as usize - bit % 8)) & ((1u16 << d) - 1) as u8;
                        if ctype == 3 {
                            v
                        } else {
                            (v as u32 * 255 / ((1u32 << d) - 1)) as u8
                        }
                    }
                }
            };
            match ctype {
                0 | 4 => px.push(sample(0)),
                3 => {
                    let c = palette
                        .get(sample(0) as usize)
                        .ok_or_else(|| err!("ImageDecoder: PNG palette index out of range"))?;
                    px.extend_from_slice(c);
                }
                _ => px.extend_from_slice(&[sample(0), sample(1), sample(2)]),
            }
        }
        std::mem::swap(&mut cur, &mut prev);
    }
    Ok(Image { w, h, channels, px })
}

// ---------------------------------------------------------------- TIFF

/// TIFF LZW (MSB-first codes, early change).
fn lzw(d: &[u8], limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut table: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8]).collect();
    table.push(vec![]);
    table.push(vec![]);
    let (mut acc, mut nacc, mut pos) = (0u32, 0u32, 0usize);
    let mut width = 9u32;
    let mut prev: Option<usize> = None;
    loop {
        while nacc < width {
            let b = match d.get(pos) {
                Some(&b) => b,
                None => return Ok(out),
            };
            pos += 1;
            acc = (acc << 8) | b as u32;
            nacc += 8;
        }
        let code = ((acc >> (nacc - width)) & ((1 << width) - 1)) as usize;
        nacc -= width;
        match code {
            256 => {
                table.truncate(258);
                width = 9;
                prev = None;
                continue;
            }
            257 => return Ok(out),
            _ => {}
        }
        let entry = if code < table.len() {
            table[code].clone()
        } else if let (Some(p), true) = (prev, code == table.len()) {
            let mut e = table[p].clone();
            e.push(table[p][0]);
            e
        } else {
            bail!("ImageDecoder: bad TIFF LZW code");
        };
        out.extend_from_slice(&entry);
        ensure!(
            out.len() <= limit,
            "ImageDecoder: TIFF strip larger than declared"
        );
        if let Some(p) = prev {
            let mut e = table[p].clone();
            e.push(entry[0]);
            table.push(e);
        }
        prev = Some(code);
        if table.len() + 1 >= (1 << width) && width < 12 {
            width += 1;
        }
    }
}

fn packbits(d: &[u8], limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < d.len() && out.len() < limit {
        let n = d[i] as i8;
        i += 1;
        if n >= 0 {
            let k = n as usize + 1;
            out.extend_from_slice(
                d.get(i..i + k)
                    .ok_or_else(|| err!("ImageDecoder: truncated PackBits data"))?,
            );
            i += k;
        } else if n != -128 {
            let v = *d
                .get(i)
                .ok_or_else(|| err!("ImageDecoder: truncated PackBits data"))?;
            i += 1;
            out.extend(std::iter::repeat_n(v, (1 - n as isize) as usize));
        }
    }
    Ok(out)
}

fn tiff(b: &[u8]) -> Result<Image> {
    let le = b.starts_with(b"II");
    let u16at = |o: usize| -> Result<u32> {
        let s = b
            .get(o..o + 2)
            .ok_or_else(|| err!("ImageDecoder: truncated TIFF"))?;
        Ok(if le {
            u16::from_le_bytes([s[0], s[1]])
        } else {
            u16::from_be_bytes([s[0], s[1]])
        } as u32)
    };
    let u32at = |o: usize| -> Result<u32> {
        let s = b
            .get(o..o + 4)
            .ok_or_else(|| err!("ImageDecoder: truncated TIFF"))?;
        Ok(if le {
            u32::from_le_bytes([s[0], s[1], s[2], s[3]])
        } else {
            u32::from_be_bytes([s[0], s[1], s[2], s[3]])
        })
    };
    let ifd = u32at(4)? as usize;
    let n = u16at(ifd)? as usize;
    let mut tags: std::collections::HashMap<u32, Vec<u32>> = std::collections::HashMap::new();
    for e in 0..n {
        let o = ifd + 2 + 12 * e;
        let (tag, ty, count) = (u16at(o)?, u16at(o + 2)?, u32at(o + 4)? as usize);
        let size = match ty {
            3 => 2,
            4 => 4,
            _ => continue,
        };
        ensure!(count <= 1 << 20, "ImageDecoder: TIFF tag too long");
        let base = if size * count <= 4 {
            o + 8
        } else {
            u32at(o + 8)? as usize
        };
        let vals = (0..count)
            .map(|i| {
                if size == 2 {
                    u16at(base + 2 * i)
                } else {
                    u32at(base + 4 * i)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        tags.insert(tag, vals);
    }
    let one_tag = |t: u32, default: Option<u32>| -> Result<u32> {
        tags.get(&t)
            .and_then(|v| v.first().copied())
            .or(default)
            .ok_or_else(|| err!("ImageDecoder: TIFF is missing tag {t}"))
    };
    let (w, h) = (one_tag(256, None)? as usize, one_tag(257, None)? as usize);
    check_size(w, h)?;
    let spp = one_tag(277, Some(1))? as usize;
    ensure!(
        tags.get(&258).is_none_or(|v| v.iter().all(|&b| b == 8)),
        "ImageDecoder: only 8-bit TIFF is supported"
    );
    ensure!(
        one_tag(284, Some(1))? == 1,
        "ImageDecoder: planar TIFF is not supported"
    );
    let comp = one_tag(259, Some(1))?;
    let photo = one_tag(262, Some(if spp >= 3 { 2 } else { 1 }))?;
    let pred = one_tag(317, Some(1))?;
    ensure!(
        matches!(spp, 1 | 3 | 4) && matches!(photo, 0..=2),
        "ImageDecoder: unsupported TIFF color layout"
    );
    let offs = tags
        .get(&273)
        .ok_or_else(|| err!("ImageDecoder: TIFF has no strips"))?;
    let counts = tags
        .get(&279)
        .ok_or_else(|| err!("ImageDecoder: TIFF has no strip sizes"))?;
    let need = w * h * spp;
    let mut raw = Vec::with_capacity(need);
    for (&o, &c) in offs.iter().zip(counts) {
        let d = b
            .get(o as usize..o as usize + c as usize)
            .ok_or_else(|| err!("ImageDecoder: truncated TIFF strip"))?;
        let left = need.saturating_sub(raw.len());
        match comp {
            1 => raw.extend_from_slice(d),
            5 => raw.extend(lzw(d, left)?),
            8 | 32946 => raw.extend(inflate(d, left)?),
            32773 => raw.extend(packbits(d, left)?),
            c => bail!("ImageDecoder: TIFF compression {c} is not supported"),
        }
    }
    ensure!(
        raw.len() >= need,
        "ImageDecoder: TIFF has too little pixel data"
    );
    raw.truncate(need);
    if pred == 2 {
        for row in raw.chunks_mut(w * spp) {
            for i in spp..row.len() {
                row[i] = row[i].wrapping_add(row[i - spp]);
            }
        }
    }
    let px: Vec<u8> = match (spp, photo) {
        (1, 0) => raw.iter().map(|&v| 255 - v).collect(),
        (1, _) => raw,
        (_, _) => raw
            .chunks_exact(spp)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
    };
    Ok(Image {
        w,
        h,
        channels: if spp == 1 { 1 } else { 3 },
        px,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflate_stored_block() {
        // zlib header, one final stored block holding "abc".
        let z = [0x78, 0x01, 0x01, 0x03, 0x00, 0xfc, 0xff, b'a', b'b', b'c'];
        assert_eq!(inflate(&z, 16).unwrap(), b"abc");
    }

    #[test]
    fn ascii_pgm_to_rgb() {
        let x = Value::Tensor(
            Tensor::new(DType::U8, vec![14], Data::U8(b"P2\n2 1\n255\n0 9".to_vec())).unwrap(),
        );
        let out = decode(&Inputs::new(vec![Some(&x)]), PixelFormat::Rgb).unwrap();
        let t = out[0].tensor().unwrap();
        assert_eq!(t.shape(), &[1, 2, 3]);
        assert_eq!(t.to_i64().unwrap(), vec![0, 0, 0, 9, 9, 9]);
    }
}
