//! 8-bit TIFF decoding: first image, chunky samples, no/LZW/deflate/PackBits compression.

use super::image::{check_size, Image};
use super::png::inflate;
use smelt_ir::{bail, ensure, err, Result};

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
            bail!(InvalidInput, "ImageDecoder: bad TIFF LZW code");
        };
        out.extend_from_slice(&entry);
        ensure!(
            out.len() <= limit,
            InvalidInput,
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
                    .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated PackBits data"))?,
            );
            i += k;
        } else if n != -128 {
            let v = *d
                .get(i)
                .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated PackBits data"))?;
            i += 1;
            out.extend(std::iter::repeat_n(v, (1 - n as isize) as usize));
        }
    }
    Ok(out)
}

pub(super) fn tiff(b: &[u8]) -> Result<Image> {
    let le = b.starts_with(b"II");
    let u16at = |o: usize| -> Result<u32> {
        let s = b
            .get(o..o + 2)
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated TIFF"))?;
        Ok(if le {
            u16::from_le_bytes([s[0], s[1]])
        } else {
            u16::from_be_bytes([s[0], s[1]])
        } as u32)
    };
    let u32at = |o: usize| -> Result<u32> {
        let s = b
            .get(o..o + 4)
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated TIFF"))?;
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
        ensure!(
            count <= 1 << 20,
            InvalidInput,
            "ImageDecoder: TIFF tag too long"
        );
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
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: TIFF is missing tag {t}"))
    };
    let (w, h) = (one_tag(256, None)? as usize, one_tag(257, None)? as usize);
    check_size(w, h)?;
    let spp = one_tag(277, Some(1))? as usize;
    ensure!(
        tags.get(&258).is_none_or(|v| v.iter().all(|&b| b == 8)),
        InvalidInput,
        "ImageDecoder: only 8-bit TIFF is supported"
    );
    ensure!(
        one_tag(284, Some(1))? == 1,
        Unsupported,
        "ImageDecoder: planar TIFF is not supported"
    );
    let comp = one_tag(259, Some(1))?;
    let photo = one_tag(262, Some(if spp >= 3 { 2 } else { 1 }))?;
    let pred = one_tag(317, Some(1))?;
    ensure!(
        matches!(spp, 1 | 3 | 4) && matches!(photo, 0..=2),
        Unsupported,
        "ImageDecoder: unsupported TIFF color layout"
    );
    let offs = tags
        .get(&273)
        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: TIFF has no strips"))?;
    let counts = tags
        .get(&279)
        .ok_or_else(|| err!(InvalidInput, "ImageDecoder: TIFF has no strip sizes"))?;
    let need = w * h * spp;
    let mut raw = Vec::with_capacity(need);
    for (&o, &c) in offs.iter().zip(counts) {
        let d = b
            .get(o as usize..o as usize + c as usize)
            .ok_or_else(|| err!(InvalidInput, "ImageDecoder: truncated TIFF strip"))?;
        let left = need.saturating_sub(raw.len());
        match comp {
            1 => raw.extend_from_slice(d),
            5 => raw.extend(lzw(d, left)?),
            8 | 32946 => raw.extend(inflate(d, left)?),
            32773 => raw.extend(packbits(d, left)?),
            c => bail!(
                Unsupported,
                "ImageDecoder: TIFF compression {c} is not supported"
            ),
        }
    }
    ensure!(
        raw.len() >= need,
        InvalidInput,
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
