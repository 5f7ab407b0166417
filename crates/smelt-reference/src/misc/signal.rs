//! Signal ops: DFT, STFT, Hann/Hamming/Blackman windows, MelWeightMatrix.

use super::super::{one, Inputs};
use super::{from_f64_rounded, out_numel, scalar_f64, scalar_i64};
use smelt_ir::{ensure, DType, Result, Tensor, Value};
use std::f64::consts::PI;

type C = (f64, f64);

/// DFT of `input` (zero-padded or truncated to `n`); `sign` -1 forward, +1 inverse (unscaled).
/// Powers of two by radix-2 Cooley-Tukey; other lengths up to [`DIRECT_MAX`] by the direct
/// sum, longer ones by Bluestein's chirp-z (a convolution on power-of-two FFTs), so no
/// length costs more than O(n log n) (a 131,070-point line took minutes by the sum).
fn dft_1d(input: &[C], n: usize, sign: f64) -> Vec<C> {
    let mut a: Vec<C> = (0..n)
        .map(|i| input.get(i).copied().unwrap_or((0.0, 0.0)))
        .collect();
    if n <= 1 {
        return a;
    }
    if n.is_power_of_two() {
        fft_pow2(&mut a, sign);
        return a;
    }
    if n > DIRECT_MAX {
        return bluestein(&a, sign);
    }
    let tw: Vec<C> = (0..n)
        .map(|k| (sign * 2.0 * PI * k as f64 / n as f64).sin_cos())
        .map(|(s, c)| (c, s))
        .collect();
    (0..n)
        .map(|k| {
            let mut acc = (0.0, 0.0);
            for (t, &(xr, xi)) in a.iter().enumerate() {
                let (c, s) = tw[(k * t) % n];
                acc.0 += xr * c - xi * s;
                acc.1 += xr * s + xi * c;
            }
            acc
        })
        .collect()
}

/// Lengths (not powers of two) up to which [`dft_1d`] sums directly.
const DIRECT_MAX: usize = 64;

/// In-place iterative radix-2 Cooley-Tukey of a power-of-two length (unscaled).
fn fft_pow2(a: &mut [C], sign: f64) {
    let n = a.len();
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if j > i {
            a.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let ang = sign * 2.0 * PI / len as f64;
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let (s, c) = (ang * k as f64).sin_cos();
                let (ur, ui) = a[start + k];
                let (vr, vi) = a[start + k + len / 2];
                let (tr, ti) = (vr * c - vi * s, vr * s + vi * c);
                a[start + k] = (ur + tr, ui + ti);
                a[start + k + len / 2] = (ur - tr, ui - ti);
            }
        }
        len <<= 1;
    }
}

/// The DFT of `x` of any length n by Bluestein: with the chirp `c_j = e^(sign i pi j^2 / n)`,
/// `X_k = c_k sum_j (x_j c_j) conj(c_(k-j))`, a convolution done on FFTs of a power of two
/// at least 2n - 1.
fn bluestein(x: &[C], sign: f64) -> Vec<C> {
    let n = x.len();
    let mul = |(a, b): C, (c, d): C| (a * c - b * d, a * d + b * c);
    // j^2 mod 2n keeps the chirp's angle small and exact.
    let chirp: Vec<C> = (0..n)
        .map(|j| {
            let sq = (j as u128 * j as u128 % (2 * n as u128)) as f64;
            let (s, c) = (sign * PI * sq / n as f64).sin_cos();
            (c, s)
        })
        .collect();
    let m = (2 * n - 1).next_power_of_two();
    let mut a = vec![(0.0, 0.0); m];
    let mut b = vec![(0.0, 0.0); m];
    for j in 0..n {
        a[j] = mul(x[j], chirp[j]);
        let conj = (chirp[j].0, -chirp[j].1);
        b[j] = conj;
        if j > 0 {
            b[m - j] = conj;
        }
    }
    fft_pow2(&mut a, -1.0);
    fft_pow2(&mut b, -1.0);
    for (u, v) in a.iter_mut().zip(&b) {
        *u = mul(*u, *v);
    }
    fft_pow2(&mut a, 1.0);
    (0..n)
        .map(|k| {
            let (re, im) = mul(a[k], chirp[k]);
            (re / m as f64, im / m as f64)
        })
        .collect()
}

/// DFT along `axis` (opset 17 attribute) or input 2 (opset 20).
pub fn dft(x: &Inputs, onesided: bool, inverse: bool, axis: Option<i64>) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let shape = t.shape().to_vec();
    let r = shape.len();
    ensure!(
        r >= 2,
        InvalidModel,
        "DFT: input must have rank >= 2, got {shape:?}"
    );
    let ch = shape[r - 1];
    ensure!(
        ch == 1 || ch == 2,
        InvalidModel,
        "DFT: the last dimension must be 1 (real) or 2 (complex), got {ch}"
    );
    let axis = match axis {
        Some(a) => a,
        None => match x.opt_tensor(2)? {
            Some(_) => scalar_i64(x, 2, "DFT axis")?,
            None => -2,
        },
    };
    let a = axis.rem_euclid(r as i64) as usize;
    ensure!(
        axis >= -(r as i64) && axis < r as i64 && a < r - 1,
        InvalidModel,
        "DFT: axis {axis} is out of range for {shape:?}"
    );
    let n_in = shape[a];
    let n = match x.opt_tensor(1)? {
        Some(t) if !t.is_empty() => {
            let v = scalar_i64(x, 1, "DFT dft_length")?;
            ensure!(
                (1..=1 << 26).contains(&v),
                InvalidModel,
                "DFT: dft_length must be in [1, 2^26], got {v}"
            );
            v as usize
        }
        _ if inverse && onesided => 2 * n_in.saturating_sub(1),
        _ => n_in,
    };
    ensure!(n >= 1, InvalidModel, "DFT: empty transform");
    let v = t.to_f64()?;
    let outer: usize = smelt_ir::dims_product(&shape[..a]);
    let inner: usize = smelt_ir::dims_product(&shape[a + 1..r - 1]);
    let (out_len, out_ch) = match (inverse, onesided) {
        (false, true) => (n / 2 + 1, 2),
        (false, false) | (true, false) => (n, 2),
        (true, true) => (n, 1),
    };
    let mut oshape = shape.clone();
    oshape[a] = out_len;
    oshape[r - 1] = out_ch;
    let mut out = vec![0f64; out_numel(&oshape)?];
    let mut line: Vec<C> = Vec::with_capacity(n_in);
    for o in 0..outer {
        for i in 0..inner {
            line.clear();
            for k in 0..n_in {
                let p = ((o * n_in + k) * inner + i) * ch;
                line.push((v[p], if ch == 2 { v[p + 1] } else { 0.0 }));
            }
            let res: Vec<C> = if !inverse {
                dft_1d(&line, n, -1.0)
            } else if !onesided {
                dft_1d(&line, n, 1.0)
                    .into_iter()
                    .map(|(re, im)| (re / n as f64, im / n as f64))
                    .collect()
            } else {
                // Inverse of a one-sided spectrum: rebuild the Hermitian full spectrum.
                let half = n / 2 + 1;
                let mut full: Vec<C> = (0..n)
                    .map(|k| {
                        if k < half {
                            line.get(k).copied().unwrap_or((0.0, 0.0))
                        } else {
                            let (re, im) = line.get(n - k).copied().unwrap_or((0.0, 0.0));
                            (re, -im)
                        }
                    })
                    .collect();
                full[0].1 = 0.0;
                if n % 2 == 0 {
                    full[n / 2].1 = 0.0;
                }
                dft_1d(&full, n, 1.0)
                    .into_iter()
                    .map(|(re, _)| (re / n as f64, 0.0))
                    .collect()
            };
            for (k, &(re, im)) in res.iter().take(out_len).enumerate() {
                let p = ((o * out_len + k) * inner + i) * out_ch;
                out[p] = re;
                if out_ch == 2 {
                    out[p + 1] = im;
                }
            }
        }
    }
    one(Tensor::from_f64(t.dtype(), oshape, &out)?)
}

/// STFT of signal [B, L, 1|2] -> [B, frames, bins, 2].
pub fn stft(x: &Inputs, onesided: bool) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    ensure!(
        t.rank() == 3,
        InvalidModel,
        "STFT: signal must be [batch, length, 1|2], got {:?}",
        t.shape()
    );
    let (b, l, ch) = (t.shape()[0], t.shape()[1], t.shape()[2]);
    ensure!(
        ch == 1 || ch == 2,
        InvalidModel,
        "STFT: the last dimension must be 1 or 2, got {ch}"
    );
    let step = scalar_i64(x, 1, "STFT frame_step")?;
    ensure!(
        step >= 1,
        InvalidModel,
        "STFT: frame_step must be positive, got {step}"
    );
    let window = match x.opt_tensor(2)? {
        Some(w) => {
            ensure!(
                w.rank() == 1,
                InvalidModel,
                "STFT: window must be 1-D, got {:?}",
                w.shape()
            );
            Some(w.to_f64()?)
        }
        None => None,
    };
    let fl = match x.opt_tensor(3)? {
        Some(_) => scalar_i64(x, 3, "STFT frame_length")?,
        None => match &window {
            Some(w) => w.len() as i64,
            None => l as i64,
        },
    };
    ensure!(
        fl >= 1 && fl as usize <= l,
        InvalidModel,
        "STFT: frame_length {fl} does not fit the signal length {l}"
    );
    let fl = fl as usize;
    let window = window.unwrap_or_else(|| vec![1.0; fl]);
    let ws = window.len();
    let frames = 1 + (l - fl) / step as usize;
    let bins = if onesided { fl / 2 + 1 } else { fl };
    let v = t.to_f64()?;
    let mut out = Vec::with_capacity(out_numel(&[b, frames, bins, 2])?);
    for bi in 0..b {
        for f in 0..frames {
            let begin = f * step as usize;
            let frame: Vec<C> = (0..ws)
                .map(|k| {
                    let i = begin + k;
                    if i < l {
                        let p = (bi * l + i) * ch;
                        let (re, im) = (v[p], if ch == 2 { v[p + 1] } else { 0.0 });
                        (re * window[k], im * window[k])
                    } else {
                        (0.0, 0.0)
                    }
                })
                .collect();
            for (re, im) in dft_1d(&frame, fl, -1.0).into_iter().take(bins) {
                out.push(re);
                out.push(im);
            }
        }
    }
    one(Tensor::from_f64(t.dtype(), vec![b, frames, bins, 2], &out)?)
}

/// Hann (0), Hamming (1) and Blackman (2) windows.
pub fn window(x: &Inputs, kind: u8, periodic: bool, dtype: DType) -> Result<Vec<Value>> {
    let size = scalar_i64(x, 0, "window size")?;
    ensure!(
        (0..=1 << 28).contains(&size),
        InvalidModel,
        "window size {size} is out of range"
    );
    let size = size as usize;
    let n1 = if periodic {
        size as f64
    } else {
        size as f64 - 1.0
    };
    let v: Vec<f64> = (0..size)
        .map(|i| {
            let i = i as f64;
            match kind {
                0 => (i * PI / n1).sin().powi(2),
                1 => {
                    let a = 25.0 / 46.0;
                    a - (i * PI * 2.0 / n1).cos() * (1.0 - a)
                }
                _ => 0.42 - 0.5 * (i * PI * 2.0 / n1).cos() + 0.08 * (i * PI * 4.0 / n1).cos(),
            }
        })
        .collect();
    one(from_f64_rounded(dtype, vec![size], v)?)
}

/// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz).
pub fn mel_weight_matrix(x: &Inputs, dtype: DType) -> Result<Vec<Value>> {
    let nmel = scalar_i64(x, 0, "num_mel_bins")?;
    let dft_len = scalar_i64(x, 1, "dft_length")?;
    let rate = scalar_i64(x, 2, "sample_rate")?;
    let lo = scalar_f64(x, 3, "lower_edge_hertz")?;
    let hi = scalar_f64(x, 4, "upper_edge_hertz")?;
    ensure!(
        nmel >= 1 && dft_len >= 1 && rate >= 1,
        InvalidModel,
        "MelWeightMatrix: sizes and rate must be positive"
    );
    ensure!(
        nmel < 1 << 20 && dft_len < 1 << 24,
        ResourceExhausted,
        "MelWeightMatrix: sizes too large"
    );
    let (nmel, nspec) = (nmel as usize, (dft_len / 2 + 1) as usize);
    let mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / 10f64.ln();
    let (lm, hm) = (mel(lo), mel(hi));
    let step = (hm - lm) / (nmel + 2) as f64;
    let bins: Vec<i64> = (0..nmel + 2)
        .map(|i| {
            let m = i as f64 * step + lm;
            let hz = 700.0 * (m / 2595.0 * 10f64.ln()).exp_m1();
            (((dft_len + 1) as f64 * hz) / rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0f64; out_numel(&[nspec, nmel])?];
    let mut set = |j: i64, i: usize, v: f64| -> Result<()> {
        ensure!(
            j >= 0 && (j as usize) < nspec,
            InvalidModel,
            "MelWeightMatrix: frequency bin {j} is outside [0, {nspec})"
        );
        out[j as usize * nmel + i] = v;
        Ok(())
    };
    for i in 0..nmel {
        let (l, c, h) = (bins[i], bins[i + 1], bins[i + 2]);
        if c == l {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        if h > c {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64)?;
            }
        }
    }
    one(from_f64_rounded(dtype, vec![nspec, nmel], out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fft_matches_naive() {
        let x: Vec<C> = (0..8).map(|i| (i as f64, (i * i) as f64 * 0.1)).collect();
        let a = dft_1d(&x, 8, -1.0);
        let b = dft_1d(&x[..7], 7, -1.0);
        assert!((a[0].0 - 28.0).abs() < 1e-9);
        assert!((b[0].0 - 21.0).abs() < 1e-9);
    }

    /// The plain sum, for checking the fast paths.
    fn direct(x: &[C], sign: f64) -> Vec<C> {
        let n = x.len();
        (0..n)
            .map(|k| {
                x.iter()
                    .enumerate()
                    .fold((0.0, 0.0), |acc, (j, &(xr, xi))| {
                        let (s, c) = (sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64).sin_cos();
                        (acc.0 + xr * c - xi * s, acc.1 + xr * s + xi * c)
                    })
            })
            .collect()
    }

    #[test]
    fn bluestein_matches_the_direct_sum() {
        for n in [65, 97, 100, 243, 1000] {
            let x: Vec<C> = (0..n)
                .map(|i| ((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
                .collect();
            for sign in [-1.0, 1.0] {
                let (got, want) = (dft_1d(&x, n, sign), direct(&x, sign));
                let scale = want
                    .iter()
                    .map(|v| v.0.abs().max(v.1.abs()))
                    .fold(1.0, f64::max);
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    let err = (g.0 - w.0).abs().max((g.1 - w.1).abs());
                    assert!(
                        err <= 1e-10 * scale,
                        "n {n} sign {sign} bin {k}: {g:?} vs {w:?}"
                    );
                }
            }
        }
    }
}
