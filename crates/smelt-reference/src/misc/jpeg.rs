//! Baseline (Huffman, 8-bit) JPEG decoding that reproduces libjpeg's default path bit for bit:
//! the "islow" integer IDCT, fancy (triangle) chroma upsampling and fixed-point YCbCr->RGB.
//! Progressive and arithmetic-coded files are refused.

use smelt_ir::{bail, ensure, err, Result};

/// Decoded pixels: 1 (gray) or 3 (RGB) channels.
pub struct Decoded {
    /// Width.
    pub w: usize,
    /// Height.
    pub h: usize,
    /// Channels (1 or 3).
    pub channels: usize,
    /// Interleaved samples.
    pub px: Vec<u8>,
}

const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

#[derive(Clone, Default)]
struct Huff {
    /// (length, code) -> symbol, via per-length tables.
    maxcode: [i32; 18],
    valoff: [i32; 18],
    vals: Vec<u8>,
}

impl Huff {
    fn new(counts: &[u8; 16], vals: Vec<u8>) -> Huff {
        let mut h = Huff {
            maxcode: [-1; 18],
            valoff: [0; 18],
            vals,
        };
        let (mut code, mut k) = (0i32, 0i32);
        for l in 1..=16 {
            let n = counts[l - 1] as i32;
            h.valoff[l] = k - code;
            code += n;
            k += n;
            h.maxcode[l] = if n > 0 { code - 1 } else { -1 };
            code <<= 1;
        }
        h.maxcode[17] = i32::MAX;
        h
    }
}

struct Reader<'a> {
    d: &'a [u8],
    pos: usize,
    acc: u32,
    n: u32,
}

impl Reader<'_> {
    fn bit(&mut self) -> Result<u32> {
        if self.n == 0 {
            // 0xFF00 is a stuffed 0xFF; any other marker (or the end) feeds zeros, as libjpeg does.
            let b = match (self.d.get(self.pos), self.d.get(self.pos + 1)) {
                (Some(&0xff), Some(&0)) => {
                    self.pos += 2;
                    0xff
                }
                (Some(&0xff), _) | (None, _) => 0,
                (Some(&v), _) => {
                    self.pos += 1;
                    v
                }
            };
            self.acc = b as u32;
            self.n = 8;
        }
        self.n -= 1;
        Ok((self.acc >> self.n) & 1)
    }

    fn bits(&mut self, k: u32) -> Result<i32> {
        let mut v = 0i32;
        for _ in 0..k {
            v = (v << 1) | self.bit()? as i32;
        }
        Ok(v)
    }

    fn decode(&mut self, h: &Huff) -> Result<u8> {
        let mut code = self.bit()? as i32;
        let mut l = 1;
        while code > h.maxcode[l] {
            code = (code << 1) | self.bit()? as i32;
            l += 1;
            ensure!(l <= 16, InvalidInput, "ImageDecoder: bad JPEG Huffman code");
        }
        h.vals
            .get((code + h.valoff[l]) as usize)
            .copied()
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: bad JPEG Huffman code"))
    }

    /// Skips to just after the next RSTn marker.
    fn restart(&mut self) -> Result<()> {
        self.n = 0;
        while self.pos + 1 < self.d.len() {
            if self.d[self.pos] == 0xff && (0xd0..=0xd7).contains(&self.d[self.pos + 1]) {
                self.pos += 2;
                return Ok(());
            }
            self.pos += 1;
        }
        bail!(InvalidInput, "ImageDecoder: missing JPEG restart marker")
    }
}

fn extend(v: i32, t: u32) -> i32 {
    if t == 0 {
        0
    } else if v < (1 << (t - 1)) {
        v - (1 << t) + 1
    } else {
        v
    }
}

struct Comp {
    id: u8,
    h: usize,
    v: usize,
    tq: usize,
    td: usize,
    ta: usize,
    /// Coefficient blocks, `bw * bh` of them.
    coef: Vec<[i32; 64]>,
    bw: usize,
    bh: usize,
    pred: i32,
}

fn be16(b: &[u8], o: usize) -> Result<usize> {
    b.get(o..o + 2)
        .map(|s| ((s[0] as usize) << 8) | s[1] as usize)
        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated JPEG"))
}

/// Decodes a baseline JPEG.
pub fn decode(b: &[u8]) -> Result<Decoded> {
    let mut qt = [[0i32; 64]; 4];
    let mut dc: Vec<Huff> = vec![Huff::default(); 4];
    let mut ac: Vec<Huff> = vec![Huff::default(); 4];
    let mut comps: Vec<Comp> = Vec::new();
    let (mut w, mut h) = (0usize, 0usize);
    let mut restart_interval = 0usize;
    let mut p = 2;
    let mut adobe_transform: Option<u8> = None;
    loop {
        ensure!(
            p + 4 <= b.len(),
            InvalidInput,
            "ImageDecoder: truncated JPEG"
        );
        if b[p] != 0xff {
            p += 1;
            continue;
        }
        let m = b[p + 1];
        if m == 0xff {
            p += 1;
            continue;
        }
        if m == 0xd9 {
            bail!(InvalidInput, "ImageDecoder: JPEG has no scan");
        }
        let len = be16(b, p + 2)?;
        ensure!(len >= 2, InvalidInput, "ImageDecoder: bad JPEG segment");
        let seg = b
            .get(p + 4..p + 2 + len)
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated JPEG segment"))?;
        match m {
            0xdb => {
                let mut i = 0;
                while i < seg.len() {
                    let (pq, tq) = (seg[i] >> 4, (seg[i] & 15) as usize);
                    ensure!(
                        tq < 4,
                        InvalidInput,
                        "ImageDecoder: bad JPEG quantization table"
                    );
                    i += 1;
                    for k in 0..64 {
                        let v = if pq == 0 {
                            *seg.get(i + k)
                                .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated DQT"))?
                                as i32
                        } else {
                            be16(seg, i + 2 * k)? as i32
                        };
                        qt[tq][ZIGZAG[k]] = v;
                    }
                    i += if pq == 0 { 64 } else { 128 };
                }
            }
            0xc4 => {
                let mut i = 0;
                while i < seg.len() {
                    let (tc, th) = (seg[i] >> 4, (seg[i] & 15) as usize);
                    ensure!(
                        th < 4 && tc < 2,
                        InvalidInput,
                        "ImageDecoder: bad JPEG Huffman table"
                    );
                    let counts: [u8; 16] =
                        seg.get(i + 1..i + 17)
                            .and_then(|s| s.try_into().ok())
                            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated DHT"))?;
                    let n: usize = counts.iter().map(|&c| c as usize).sum();
                    let vals = seg
                        .get(i + 17..i + 17 + n)
                        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated DHT"))?
                        .to_vec();
                    let t = Huff::new(&counts, vals);
                    if tc == 0 {
                        dc[th] = t;
                    } else {
                        ac[th] = t;
                    }
                    i += 17 + n;
                }
            }
            0xc0 | 0xc1 => {
                ensure!(
                    seg.len() >= 6 && seg[0] == 8,
                    InvalidInput,
                    "ImageDecoder: only 8-bit JPEG is supported"
                );
                h = be16(seg, 1)?;
                w = be16(seg, 3)?;
                let n = seg[5] as usize;
                ensure!(
                    n == 1 || n == 3,
                    Unsupported,
                    "ImageDecoder: JPEG with {n} components is not supported"
                );
                for c in 0..n {
                    let s = seg
                        .get(6 + 3 * c..9 + 3 * c)
                        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated SOF"))?;
                    let (hs, vs) = ((s[1] >> 4) as usize, (s[1] & 15) as usize);
                    ensure!(
                        (1..=2).contains(&hs) && (1..=2).contains(&vs),
                        Unsupported,
                        "ImageDecoder: unsupported JPEG sampling"
                    );
                    ensure!(
                        s[2] < 4,
                        InvalidInput,
                        "ImageDecoder: bad JPEG quantization table index"
                    );
                    comps.push(Comp {
                        id: s[0],
                        h: hs,
                        v: vs,
                        tq: s[2] as usize,
                        td: 0,
                        ta: 0,
                        coef: vec![],
                        bw: 0,
                        bh: 0,
                        pred: 0,
                    });
                }
            }
            0xc2 | 0xc3 | 0xc5..=0xc7 | 0xc9..=0xcb | 0xcd..=0xcf => {
                bail!(
                    Unsupported,
                    "ImageDecoder: progressive, lossless or arithmetic-coded JPEG is not supported"
                )
            }
            0xdd => restart_interval = be16(seg, 0)?,
            0xee if seg.len() >= 12 && seg.starts_with(b"Adobe") => adobe_transform = Some(seg[11]),
            0xda => {
                ensure!(
                    !comps.is_empty() && w > 0 && h > 0,
                    InvalidInput,
                    "ImageDecoder: JPEG scan before frame header"
                );
                ensure!(
                    w * h <= 1 << 26,
                    ResourceExhausted,
                    "ImageDecoder: JPEG too large"
                );
                let ns = *seg
                    .first()
                    .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated JPEG"))?
                    as usize;
                ensure!(
                    ns == comps.len(),
                    Unsupported,
                    "ImageDecoder: multi-scan JPEG is not supported"
                );
                for k in 0..ns {
                    let s = seg
                        .get(1 + 2 * k..3 + 2 * k)
                        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated SOS"))?;
                    let c = comps
                        .iter_mut()
                        .find(|c| c.id == s[0])
                        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: bad SOS component"))?;
                    c.td = (s[1] >> 4) as usize & 3;
                    c.ta = (s[1] & 15) as usize & 3;
                }
                let data = &b[p + 2 + len..];
                return finish(
                    w,
                    h,
                    comps,
                    &qt,
                    &dc,
                    &ac,
                    restart_interval,
                    data,
                    adobe_transform,
                );
            }
            _ => {}
        }
        p += 2 + len;
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    w: usize,
    h: usize,
    mut comps: Vec<Comp>,
    qt: &[[i32; 64]; 4],
    dc: &[Huff],
    ac: &[Huff],
    ri: usize,
    data: &[u8],
    adobe: Option<u8>,
) -> Result<Decoded> {
    let hmax = comps.iter().map(|c| c.h).max().unwrap_or(1);
    let vmax = comps.iter().map(|c| c.v).max().unwrap_or(1);
    let mcux = w.div_ceil(8 * hmax);
    let mcuy = h.div_ceil(8 * vmax);
    let single = comps.len() == 1;
    for c in comps.iter_mut() {
        if single {
            c.bw = w.div_ceil(8);
            c.bh = h.div_ceil(8);
        } else {
            c.bw = mcux * c.h;
            c.bh = mcuy * c.v;
        }
        c.coef = vec![[0; 64]; c.bw * c.bh];
    }
    let mut r = Reader {
        d: data,
        pos: 0,
        acc: 0,
        n: 0,
    };
    let total = if single {
        comps[0].bw * comps[0].bh
    } else {
        mcux * mcuy
    };
    for m in 0..total {
        if ri > 0 && m > 0 && m % ri == 0 {
            r.restart()?;
            comps.iter_mut().for_each(|c| c.pred = 0);
        }
        for c in comps.iter_mut() {
            let (hs, vs) = if single { (1, 1) } else { (c.h, c.v) };
            for by in 0..vs {
                for bx in 0..hs {
                    let (row, col) = if single {
                        (m / c.bw, m % c.bw)
                    } else {
                        ((m / mcux) * vs + by, (m % mcux) * hs + bx)
                    };
                    let mut blk = [0i32; 64];
                    let t = r.decode(&dc[c.td])? as u32;
                    ensure!(t <= 16, InvalidInput, "ImageDecoder: bad JPEG DC code");
                    let diff = extend(r.bits(t)?, t);
                    c.pred += diff;
                    blk[0] = c.pred;
                    let mut k = 1;
                    while k < 64 {
                        let rs = r.decode(&ac[c.ta])?;
                        let (run, size) = ((rs >> 4) as usize, (rs & 15) as u32);
                        if size == 0 {
                            if run == 15 {
                                k += 16;
                                continue;
                            }
                            break;
                        }
                        k += run;
                        ensure!(k < 64, InvalidInput, "ImageDecoder: bad JPEG AC run");
                        blk[ZIGZAG[k]] = extend(r.bits(size)?, size);
                        k += 1;
                    }
                    c.coef[row * c.bw + col] = blk;
                }
            }
        }
    }
    // IDCT each component into its sample plane.
    let planes: Vec<(Vec<u8>, usize, usize)> = comps
        .iter()
        .map(|c| {
            let (pw, ph) = (c.bw * 8, c.bh * 8);
            let mut plane = vec![0u8; pw * ph];
            let q = &qt[c.tq];
            for by in 0..c.bh {
                for bx in 0..c.bw {
                    let out = idct_islow(&c.coef[by * c.bw + bx], q);
                    for y in 0..8 {
                        let o = (by * 8 + y) * pw + bx * 8;
                        plane[o..o + 8].copy_from_slice(&out[y * 8..y * 8 + 8]);
                    }
                }
            }
            (plane, pw, ph)
        })
        .collect();
    if single {
        let (plane, pw, _) = &planes[0];
        let px = (0..h)
            .flat_map(|y| plane[y * pw..y * pw + w].iter().copied())
            .collect();
        return Ok(Decoded {
            w,
            h,
            channels: 1,
            px,
        });
    }
    // Upsample each component to full size (fancy upsampling over the real downsampled size).
    let full: Vec<Vec<u8>> = comps
        .iter()
        .zip(&planes)
        .map(|(c, (plane, pw, _))| {
            let dw = (w * c.h).div_ceil(hmax);
            let dh = (h * c.v).div_ceil(vmax);
            upsample(plane, *pw, dw, dh, hmax / c.h, vmax / c.v, w, h)
        })
        .collect::<Result<_>>()?;
    let transform = adobe.map(|t| t != 0).unwrap_or(true);
    let mut px = Vec::with_capacity(w * h * 3);
    for ((&y, &cb), &cr) in full[0].iter().zip(&full[1]).zip(&full[2]) {
        let (y, cb, cr) = (y as i32, cb as i32, cr as i32);
        if transform {
            px.extend_from_slice(&ycc_to_rgb(y, cb, cr));
        } else {
            px.extend_from_slice(&[y as u8, cb as u8, cr as u8]);
        }
    }
    Ok(Decoded {
        w,
        h,
        channels: 3,
        px,
    })
}

fn ycc_to_rgb(y: i32, cb: i32, cr: i32) -> [u8; 3] {
    const SB: i32 = 16;
    const HALF: i64 = 1 << (SB - 1);
    let fix = |x: f64| (x * (1i64 << SB) as f64 + 0.5) as i64;
    let (cbx, crx) = ((cb - 128) as i64, (cr - 128) as i64);
    let r_add = ((fix(1.40200) * crx + HALF) >> SB) as i32;
    let b_add = ((fix(1.77200) * cbx + HALF) >> SB) as i32;
    let g_add = ((-fix(0.34414) * cbx + HALF + -fix(0.71414) * crx) >> SB) as i32;
    let lim = |v: i32| v.clamp(0, 255) as u8;
    [lim(y + r_add), lim(y + g_add), lim(y + b_add)]
}

/// libjpeg's h2v1 / h1v2 / h2v2 fancy upsampling (replication for narrow components).
#[allow(clippy::too_many_arguments)]
fn upsample(
    plane: &[u8],
    pw: usize,
    dw: usize,
    dh: usize,
    fx: usize,
    fy: usize,
    w: usize,
    h: usize,
) -> Result<Vec<u8>> {
    let at = |x: isize, y: isize| -> i32 {
        let x = x.clamp(0, dw as isize - 1) as usize;
        let y = y.clamp(0, dh as isize - 1) as usize;
        plane[y * pw + x] as i32
    };
    let mut out = vec![0u8; w * h];
    // libjpeg upsamples narrow components (2 samples or fewer) by plain replication.
    let mode = if fx == 2 && dw <= 2 { (0, 0) } else { (fx, fy) };
    match mode {
        (0, 0) => {
            for y in 0..h {
                for x in 0..w {
                    out[y * w + x] = at((x / fx) as isize, (y / fy) as isize) as u8;
                }
            }
        }
        (1, 2) => {
            for y in 0..h {
                let sy = (y / 2) as isize;
                let (ny, bias) = if y % 2 == 0 { (sy - 1, 1) } else { (sy + 1, 2) };
                for x in 0..w {
                    out[y * w + x] =
                        ((at(x as isize, sy) * 3 + at(x as isize, ny) + bias) >> 2) as u8;
                }
            }
        }
        (1, 1) => {
            for y in 0..h {
                for x in 0..w {
                    out[y * w + x] = at(x as isize, y as isize) as u8;
                }
            }
        }
        (2, 1) => {
            for y in 0..h {
                for x in 0..w {
                    let (sx, yi) = ((x / 2) as isize, y as isize);
                    let v = if dw == 1 {
                        at(0, yi)
                    } else if x % 2 == 0 {
                        if sx == 0 {
                            at(0, yi)
                        } else {
                            (at(sx, yi) * 3 + at(sx - 1, yi) + 1) >> 2
                        }
                    } else if sx as usize == dw - 1 {
                        at(sx, yi)
                    } else {
                        (at(sx, yi) * 3 + at(sx + 1, yi) + 2) >> 2
                    };
                    out[y * w + x] = v as u8;
                }
            }
        }
        (2, 2) => {
            for y in 0..h {
                let sy = (y / 2) as isize;
                let ny = if y % 2 == 0 { sy - 1 } else { sy + 1 };
                let col = |sx: isize| at(sx, sy) * 3 + at(sx, ny);
                for x in 0..w {
                    let sx = (x / 2) as isize;
                    let this = col(sx);
                    let v = if x % 2 == 0 {
                        if sx == 0 {
                            (this * 4 + 8) >> 4
                        } else {
                            (this * 3 + col(sx - 1) + 8) >> 4
                        }
                    } else if sx as usize == dw - 1 {
                        (this * 4 + 7) >> 4
                    } else {
                        (this * 3 + col(sx + 1) + 7) >> 4
                    };
                    out[y * w + x] = v as u8;
                }
            }
        }
        _ => bail!(
            Unsupported,
            "ImageDecoder: JPEG chroma sampling {fx}x{fy} is not supported"
        ),
    }
    Ok(out)
}

/// libjpeg's `jpeg_idct_islow`: dequantize and inverse-DCT one block to 8-bit samples.
fn idct_islow(coef: &[i32; 64], q: &[i32; 64]) -> [u8; 64] {
    const CB: i64 = 13;
    const P1: i64 = 2;
    const F0298: i64 = 2446;
    const F0390: i64 = 3196;
    const F0541: i64 = 4433;
    const F0765: i64 = 6270;
    const F0899: i64 = 7373;
    const F1175: i64 = 9633;
    const F1501: i64 = 12299;
    const F1847: i64 = 15137;
    const F1961: i64 = 16069;
    const F2053: i64 = 16819;
    const F2562: i64 = 20995;
    const F3072: i64 = 25172;
    let descale = |x: i64, n: i64| (x + (1 << (n - 1))) >> n;
    // Shared even/odd butterfly: returns the 8 outputs before descaling.
    let butterfly = |d: [i64; 8]| -> [i64; 8] {
        let (z2, z3) = (d[2], d[6]);
        let z1 = (z2 + z3) * F0541;
        let tmp2 = z1 + z3 * -F1847;
        let tmp3 = z1 + z2 * F0765;
        let tmp0 = (d[0] + d[4]) << CB;
        let tmp1 = (d[0] - d[4]) << CB;
        let (t10, t13, t11, t12) = (tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2);
        let (mut o0, mut o1, mut o2, mut o3) = (d[7], d[5], d[3], d[1]);
        let z1 = o0 + o3;
        let z2 = o1 + o2;
        let z3 = o0 + o2;
        let z4 = o1 + o3;
        let z5 = (z3 + z4) * F1175;
        o0 *= F0298;
        o1 *= F2053;
        o2 *= F3072;
        o3 *= F1501;
        let z1 = z1 * -F0899;
        let z2 = z2 * -F2562;
        let z3 = z3 * -F1961 + z5;
        let z4 = z4 * -F0390 + z5;
        o0 += z1 + z3;
        o1 += z2 + z4;
        o2 += z2 + z3;
        o3 += z1 + z4;
        [
            t10 + o3,
            t11 + o2,
            t12 + o1,
            t13 + o0,
            t13 - o0,
            t12 - o1,
            t11 - o2,
            t10 - o3,
        ]
    };
    let mut ws = [0i64; 64];
    for c in 0..8 {
        let d: [i64; 8] = std::array::from_fn(|r| (coef[r * 8 + c] * q[r * 8 + c]) as i64);
        if d[1..].iter().all(|&v| v == 0) {
            for r in 0..8 {
                ws[r * 8 + c] = d[0] << P1;
            }
            continue;
        }
        let o = butterfly(d);
        for r in 0..8 {
            ws[r * 8 + c] = descale(o[r], CB - P1);
        }
    }
    let mut out = [0u8; 64];
    let lim = |v: i64| (v + 128).clamp(0, 255) as u8;
    for r in 0..8 {
        let d: [i64; 8] = std::array::from_fn(|c| ws[r * 8 + c]);
        if d[1..].iter().all(|&v| v == 0) {
            let v = lim(descale(d[0], P1 + 3));
            out[r * 8..r * 8 + 8].fill(v);
            continue;
        }
        let o = butterfly(d);
        for c in 0..8 {
            out[r * 8 + c] = lim(descale(o[c], CB + P1 + 3));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dc_only_block_is_flat() {
        let mut coef = [0i32; 64];
        coef[0] = 8;
        let out = idct_islow(&coef, &[1; 64]);
        assert!(out.iter().all(|&v| v == 129));
        assert_eq!(ycc_to_rgb(128, 128, 128), [128, 128, 128]);
    }
}
