//! One step's gate math over a block of batch rows and hidden units: the pre-activations
//! (input projection + recurrent product + biases) through the gates' activations into the
//! new states, vectorized along the units.

use crate::simd::Vf;
use crate::vmath::{clamp, sigmoid, tanh};

/// One step's gate math over `rows` batch rows (see [`Cell`]).
pub type CellFn = unsafe fn(&Cell, usize);

/// What a [`Cell`] computes (the ONNX formulas, default activations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKind {
    /// LSTM, gates i, o, f, c: `c' = f c + i g`, `h' = o tanh(c')` (peepholes optional).
    Lstm,
    /// GRU with `linear_before_reset`, gates z, r, h: `h~ = tanh(x_h + r (hr_h + Rb_h))`,
    /// `h' = (1 - z) h~ + z h`.
    GruLinearBeforeReset,
    /// GRU's first half without `linear_before_reset`: `z` into [`Cell::z`], `r h` into
    /// [`Cell::h_next`] (the operand of the hidden gate's recurrent product).
    GruGates,
    /// GRU's second half: `h~ = tanh(x_h + (r h) R_h + Rb_h)` from the one recurrent
    /// product given (gate 0 of `hr`), `h' = (1 - z) h~ + z h`.
    GruFinish,
    /// A plain RNN: `h' = f(x + hr)`.
    Rnn(Act),
}

/// A simple RNN's activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// tanh (the default).
    Tanh,
    /// max(x, 0).
    Relu,
    /// 1 / (1 + e^-x).
    Sigmoid,
}

/// The operands of one step's gate math over a block of `units` hidden units starting at
/// some unit `u0`; every pointer below already points at `u0` of row 0. Gate `g` of a row's
/// input projection is at `xw + g * hidden`, of its recurrent product at `hr + g * hr_gs`.
pub struct Cell {
    /// What to compute.
    pub kind: CellKind,
    /// Units in the block.
    pub units: usize,
    /// Hidden size: the gate stride of `xw`, `bias` and `peep`.
    pub hidden: usize,
    /// The input projections; rows `xw_rs` apart.
    pub xw: *const f32,
    /// Row stride of `xw`.
    pub xw_rs: usize,
    /// The recurrent products; rows `hr_rs` apart, gates `hr_gs` apart.
    pub hr: *const f32,
    /// Row stride of `hr`.
    pub hr_rs: usize,
    /// Gate stride of `hr`.
    pub hr_gs: usize,
    /// Biases added to every gate's pre-activation (gates `hidden` apart).
    pub bias: *const f32,
    /// GRU: the hidden gate's recurrent bias, added to its recurrent product (null: none).
    pub rbias: *const f32,
    /// LSTM peepholes i, o, f (`hidden` apart), or null.
    pub peep: *const f32,
    /// Pre-activations are clamped to `[-clip, clip]` (infinity: no clip).
    pub clip: f32,
    /// The previous hidden states.
    pub h_prev: *const f32,
    /// Row stride of `h_prev`.
    pub h_prev_rs: usize,
    /// This step's hidden states (GRU's first half: `r h`).
    pub h_next: *mut f32,
    /// Row stride of `h_next`.
    pub h_next_rs: usize,
    /// LSTM: the cell states, read and updated in place. GRU: the update gate `z`, written
    /// by its first half and read by its second. Rows `hidden` apart.
    pub c: *mut f32,
}

#[inline(always)]
unsafe fn load<V: Vf>(p: *const f32, n: usize) -> V {
    if n == V::LANES {
        V::load(p)
    } else {
        V::load_part(p, n)
    }
}

#[inline(always)]
unsafe fn store<V: Vf>(v: V, p: *mut f32, n: usize) {
    if n == V::LANES {
        v.store(p)
    } else {
        v.store_part(p, n)
    }
}

/// `clamp(v, -clip, clip)`, or `v` for an infinite clip.
#[inline(always)]
unsafe fn clip<V: Vf>(v: V, c: f32) -> V {
    if c.is_finite() {
        clamp(v, -c, c)
    } else {
        v
    }
}

/// The loads of one vector of units `j..j + n` of one row (written as functions, not
/// closures: a closure would not inherit the caller's target features, and its intrinsics
/// would be calls).
#[derive(Clone, Copy)]
struct Row<'a> {
    k: &'a Cell,
    xw: *const f32,
    hr: *const f32,
    j: usize,
    n: usize,
}

impl Row<'_> {
    /// Gate `g`'s input projection.
    #[inline(always)]
    unsafe fn x<V: Vf>(self, g: usize) -> V {
        load(self.xw.add(g * self.k.hidden + self.j), self.n)
    }

    /// Gate `g`'s recurrent product.
    #[inline(always)]
    unsafe fn r<V: Vf>(self, g: usize) -> V {
        load(self.hr.add(g * self.k.hr_gs + self.j), self.n)
    }

    /// Gate `g`'s bias.
    #[inline(always)]
    unsafe fn bias<V: Vf>(self, g: usize) -> V {
        load(self.k.bias.add(g * self.k.hidden + self.j), self.n)
    }

    /// Gate `g`'s pre-activation before peepholes and clipping.
    #[inline(always)]
    unsafe fn pre<V: Vf>(self, g: usize) -> V {
        self.x::<V>(g).add(self.r(g)).add(self.bias(g))
    }

    /// `p[j..]`, for a per-unit operand `p` (peepholes at `g * hidden`, the recurrent bias).
    #[inline(always)]
    unsafe fn at<V: Vf>(self, p: *const f32, g: usize) -> V {
        load(p.add(g * self.k.hidden + self.j), self.n)
    }
}

#[inline(always)]
unsafe fn cell_body<V: Vf>(k: &Cell, rows: usize) {
    let cl = k.clip;
    for b in 0..rows {
        let hp = k.h_prev.add(b * k.h_prev_rs);
        let hn = k.h_next.add(b * k.h_next_rs);
        let c = k.c.wrapping_add(b * k.hidden);
        let mut j = 0;
        while j < k.units {
            let n = V::LANES.min(k.units - j);
            let row = Row {
                k,
                xw: k.xw.add(b * k.xw_rs),
                hr: k.hr.add(b * k.hr_rs),
                j,
                n,
            };
            match k.kind {
                CellKind::Lstm => {
                    let cp = load::<V>(c.add(j), n);
                    let (mut gi, mut go, mut gf) =
                        (row.pre::<V>(0), row.pre::<V>(1), row.pre::<V>(2));
                    if !k.peep.is_null() {
                        gi = row.at::<V>(k.peep, 0).fma(cp, gi);
                        gf = row.at::<V>(k.peep, 2).fma(cp, gf);
                    }
                    let i = sigmoid(clip(gi, cl));
                    let f = sigmoid(clip(gf, cl));
                    let cand = tanh(clip(row.pre::<V>(3), cl));
                    let cn = f.mul(cp).add(i.mul(cand));
                    if !k.peep.is_null() {
                        go = row.at::<V>(k.peep, 1).fma(cn, go);
                    }
                    let o = sigmoid(clip(go, cl));
                    store(cn, c.add(j), n);
                    store(o.mul(tanh(cn)), hn.add(j), n);
                }
                CellKind::GruLinearBeforeReset => {
                    let z = sigmoid(clip(row.pre::<V>(0), cl));
                    let rg = sigmoid(clip(row.pre::<V>(1), cl));
                    let rh = row.r::<V>(2).add(row.at(k.rbias, 0));
                    let cand = tanh(clip(rg.fma(rh, row.x::<V>(2).add(row.bias(2))), cl));
                    store(gru_blend(z, cand, load(hp.add(j), n)), hn.add(j), n);
                }
                CellKind::GruGates => {
                    let z = sigmoid(clip(row.pre::<V>(0), cl));
                    let rg = sigmoid(clip(row.pre::<V>(1), cl));
                    store(z, c.add(j), n);
                    store(rg.mul(load(hp.add(j), n)), hn.add(j), n);
                }
                CellKind::GruFinish => {
                    // The hidden gate is gate 2 of the input projection and biases, the
                    // only product of `hr`.
                    let pre = row.x::<V>(2).add(row.r(0)).add(row.bias(2));
                    let cand = tanh(clip(pre.add(row.at(k.rbias, 0)), cl));
                    let z = load::<V>(c.add(j), n);
                    store(gru_blend(z, cand, load(hp.add(j), n)), hn.add(j), n);
                }
                CellKind::Rnn(act) => {
                    let v = clip(row.pre::<V>(0), cl);
                    let v = match act {
                        Act::Tanh => tanh(v),
                        Act::Sigmoid => sigmoid(v),
                        Act::Relu => v.max_or(V::splat(0.0)),
                    };
                    store(v, hn.add(j), n);
                }
            }
            j += n;
        }
    }
}

/// `(1 - z) cand + z h`, as `cand + z (h - cand)`.
#[inline(always)]
unsafe fn gru_blend<V: Vf>(z: V, cand: V, h: V) -> V {
    z.fma(h.sub(cand), cand)
}

/// [`CellFn`] on one lane at a time (every CPU).
///
/// # Safety
/// Every pointer of `k` that its kind reads or writes covers `rows` rows of `units` units
/// (and the gates the kind uses).
pub unsafe fn cell_portable(k: &Cell, rows: usize) {
    cell_body::<f32>(k, rows)
}

/// x86 instances of the cell.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::{cell_body, Cell};

    /// [`super::CellFn`] with AVX2+FMA.
    ///
    /// # Safety
    /// As for the portable cell, on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn cell_avx2(k: &Cell, rows: usize) {
        cell_body::<crate::simd::Y8>(k, rows)
    }

    /// [`super::CellFn`] with AVX-512.
    ///
    /// # Safety
    /// As for the portable cell, on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn cell_avx512(k: &Cell, rows: usize) {
        cell_body::<crate::simd::Z16>(k, rows)
    }
}
