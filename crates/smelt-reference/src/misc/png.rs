//! PNG decoding (non-interlaced, all color types and bit depths) with a small inflate.

use super::image::{check_size, Image};
use smelt_ir::{bail, ensure, err, Result};

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
                .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated deflate stream"))?;
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
                    .ok_or_else(|| err!(InvalidInput, "ImageDecoder: bad Huffman code"));
            }
            index += count;
            first += count;
            first <<= 1;
            code <<= 1;
        }
        bail!(InvalidInput, "ImageDecoder: bad Huffman code")
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
pub(super) fn inflate(z: &[u8], limit: usize) -> Result<Vec<u8>> {
    ensure!(
        z.len() >= 2 && z[0] & 0x0f == 8,
        InvalidInput,
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
                    .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated stored block"))?;
                let len = u16::from_le_bytes([hdr[0], hdr[1]]) as usize;
                let d = bits
                    .b
                    .get(p + 4..p + 4 + len)
                    .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated stored block"))?;
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
                                ensure!(i > 0, InvalidInput, "ImageDecoder: bad code lengths");
                                (lens[i - 1], 3 + bits.need(2)? as usize)
                            }
                            17 => (0, 3 + bits.need(3)? as usize),
                            _ => (0, 11 + bits.need(7)? as usize),
                        };
                        ensure!(
                            i + rep <= lens.len(),
                            InvalidInput,
                            "ImageDecoder: bad code lengths"
                        );
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
                        ensure!(k < 29, InvalidInput, "ImageDecoder: bad length code");
                        let len = LBASE[k] as usize + bits.need(LEXT[k] as u32)? as usize;
                        let d = dist.decode(&mut bits)? as usize;
                        ensure!(d < 30, InvalidInput, "ImageDecoder: bad distance code");
                        let dd = DBASE[d] as usize + bits.need(DEXT[d] as u32)? as usize;
                        ensure!(
                            dd <= out.len(),
                            InvalidInput,
                            "ImageDecoder: distance too far back"
                        );
                        let st = out.len() - dd;
                        for j in 0..len {
                            out.push(out[st + j]);
                        }
                    }
                    ensure!(
                        out.len() <= limit,
                        InvalidInput,
                        "ImageDecoder: image data larger than declared"
                    );
                }
            }
            _ => bail!(InvalidInput, "ImageDecoder: bad deflate block type"),
        }
        ensure!(
            out.len() <= limit,
            InvalidInput,
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
        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated PNG"))
}

pub(super) fn png(b: &[u8]) -> Result<Image> {
    let mut p = 8;
    let (mut w, mut h, mut depth, mut ctype, mut interlace) = (0usize, 0usize, 0u8, 0u8, 0u8);
    let mut palette: Vec<[u8; 3]> = Vec::new();
    let mut idat = Vec::new();
    while p + 8 <= b.len() {
        let len = be32(b, p)? as usize;
        let kind = &b[p + 4..p + 8];
        let d = b
            .get(p + 8..p + 8 + len)
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated PNG chunk"))?;
        match kind {
            b"IHDR" => {
                ensure!(len >= 13, InvalidInput, "ImageDecoder: bad IHDR");
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
        Unsupported,
        "ImageDecoder: interlaced PNG is not supported"
    );
    let spp = match ctype {
        0 | 3 => 1,
        2 => 3,
        4 => 2,
        6 => 4,
        _ => bail!(InvalidInput, "ImageDecoder: bad PNG color type {ctype}"),
    };
    ensure!(
        matches!(depth, 1 | 2 | 4 | 8 | 16),
        InvalidInput,
        "ImageDecoder: bad PNG bit depth {depth}"
    );
    let bits_pp = spp * depth as usize;
    let stride = (w * bits_pp).div_ceil(8);
    let bpp = bits_pp.div_ceil(8);
    let raw = inflate(&idat, (stride + 1) * h)?;
    ensure!(
        raw.len() == (stride + 1) * h,
        InvalidInput,
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
                _ => bail!(InvalidInput, "ImageDecoder: bad PNG filter {ft}"),
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
                    let c = palette.get(sample(0) as usize).ok_or_else(|| {
                        err!(InvalidInput, "ImageDecoder: PNG palette index out of range")
                    })?;
                    px.extend_from_slice(c);
                }
                _ => px.extend_from_slice(&[sample(0), sample(1), sample(2)]),
            }
        }
        std::mem::swap(&mut cur, &mut prev);
    }
    Ok(Image { w, h, channels, px })
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
}
