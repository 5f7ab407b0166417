#!/usr/bin/env python3
"""Fits the polynomial and rational approximations behind smelt-kernels' vector math
(crates/smelt-kernels/src/vmath.rs), so the coefficients there can be reproduced.

    python3 scripts/fit_vmath.py        (needs numpy)

Each fit is a weighted least-squares solve on Chebyshev nodes, reweighted a few times
toward equal-ripple (an approximation of minimax); the printed max error is measured in
f64 on a dense grid. The f32 implementations are tested against f64 in the crate's tests.
"""
import math
import numpy as np


def cheb_nodes(a, b, n):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def fit_poly(f, a, b, deg, rel=True, basis=lambda x: x, fixed=None, iters=30):
    """Polynomial p in basis(x): f(x) ~ sum c_i basis(x)^i, minimizing relative error."""
    x = cheb_nodes(a, b, 4000)
    y = f(x)
    t = basis(x)
    w = np.ones_like(x)
    cols = [t**i for i in range(deg + 1)]
    A = np.stack(cols, axis=1)
    scale = np.abs(y) if rel else np.ones_like(y)
    scale[scale == 0] = 1
    for _ in range(iters):
        W = w / scale
        c, *_ = np.linalg.lstsq(A * W[:, None], y * W, rcond=None)
        e = np.abs(A @ c - y) / scale
        w = w * (e / e.max()) ** 0.5 + 1e-12
        w /= w.max()
    xs = np.linspace(a, b, 200001)
    ys = f(xs)
    ts = basis(xs)
    p = sum(ci * ts**i for i, ci in enumerate(c))
    sc = np.abs(ys) if rel else np.ones_like(ys)
    sc[sc == 0] = 1
    return c, float(np.max(np.abs(p - ys) / sc))


def fit_rational(f, a, b, pdeg, qdeg, basis, iters=300):
    """f(x) ~ P(t)/Q(t), t = basis(x), Q(0) = 1, minimizing relative error: linearized,
    reweighted least squares (keeps the best of all iterations)."""
    n = 8000
    x = cheb_nodes(a, b, n)
    y = f(x)
    t = basis(x)
    q = np.ones_like(x)
    w = np.ones_like(x)
    best = None
    for _ in range(iters):
        cols = [t**i for i in range(pdeg + 1)] + [-y * t**i for i in range(1, qdeg + 1)]
        A = np.stack(cols, axis=1)
        W = w / (q * np.abs(y))
        c, *_ = np.linalg.lstsq(A * W[:, None], y * W, rcond=None)
        pc, qc = c[: pdeg + 1], np.concatenate([[1.0], c[pdeg + 1 :]])
        q = np.polyval(qc[::-1], t)
        e = np.abs(np.polyval(pc[::-1], t) / q - y) / np.abs(y)
        if best is None or e.max() < best[0]:
            best = (e.max(), pc, qc)
        w = w * (e / e.max()) ** 0.1
        w /= w.sum()
    _, pc, qc = best
    xs = np.linspace(a, b, 200001)
    ys = f(xs)
    ts = basis(xs)
    r = np.polyval(pc[::-1], ts) / np.polyval(qc[::-1], ts)
    roots = np.roots(qc[::-1])
    lo, hi = basis(np.array([a, b]))
    poles = [r.real for r in roots if abs(r.imag) < 1e-9 and lo <= r.real <= hi]
    assert not poles, f"Q has poles in the range: {poles}"
    return pc, qc, float(np.max(np.abs(r - ys) / np.abs(ys)))


def show(name, coeffs):
    print(f"{name}: [" + ", ".join(f"{c:.10e}" for c in coeffs) + "]")


erf = np.vectorize(math.erf)
ln2 = math.log(2)

# exp(r) on [-ln2/2, ln2/2]: degree 6 in r, relative error.
c, e = fit_poly(np.exp, -ln2 / 2, ln2 / 2, 6)
show("exp", c)
print("  max rel err", e)

# erf(x) = x * P(x^2) / Q(x^2) on (0, 4] (erf(4) rounds to 1 in f32).
pc, qc, e = fit_rational(lambda x: erf(x) / x, 1e-4, 4.0, 6, 5, basis=lambda x: x * x)
show("erf P", pc)
show("erf Q", qc)
print("  max rel err of erf(x)/x", e)

# tanh(x) = x * P(x^2) / Q(x^2) on (0, 9] (tanh(9) rounds to 1 in f32).
pc, qc, e = fit_rational(lambda x: np.tanh(x) / x, 1e-4, 9.0, 4, 4, basis=lambda x: x * x)
show("tanh P", pc)
show("tanh Q", qc)
print("  max rel err of tanh(x)/x", e)

# log(1 + f) = f * P(f) on [sqrt(1/2) - 1, sqrt(2) - 1].
lo, hi = math.sqrt(0.5) - 1, math.sqrt(2) - 1
c, e = fit_poly(lambda f: np.log1p(f) / np.where(f == 0, 1, f) + (f == 0), lo, hi, 9)
show("log", c)
print("  max rel err of log1p(f)/f", e)
