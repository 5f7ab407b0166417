//! Machine code for a scheduled body, with AVX-512 or AVX2 instructions: each op's
//! instructions compute what the interpreter's vector code for that op does
//! ([`crate::program`]), to the bit but for which NaN a Max or Min of two NaNs gives.
//!
//! The code takes `(ptrs, groups, singles, tail_mask)` (System V): the windows' row
//! pointers, then runs `groups` groups of `U` vectors, `singles` single vectors, and one
//! partial vector under `tail_mask` when it is not null. A group's loads all come before
//! its stores, so a window stored in place of one it reads is read first.

use super::schedule::{abs_mask, Schedule, MINUS_ONE, ONE, ZERO};
use super::Access;
use iced_x86::code_asm::*;
use iced_x86::{IcedError, Register};
use smelt_ir::kernel::{Binary, ScalarOp, Unary};

/// The registers that hold the first windows' row pointers; later windows' pointers are
/// read from the pointer array at each use.
const WINDOW_GPRS: [AsmRegister64; 8] = [r9, r10, r11, rbx, r12, r13, r14, r15];

/// The callee-saved registers among [`WINDOW_GPRS`] (pushed when used).
const SAVED_FROM: usize = 3;

/// Comparison predicates (`vcmpps` immediates).
const EQ_OQ: i32 = 0x00;
const UNORD_Q: i32 = 0x03;
const NEQ_UQ: i32 = 0x04;
const LT_OQ: i32 = 0x11;
const LE_OQ: i32 = 0x12;
const GE_OQ: i32 = 0x1d;
const GT_OQ: i32 = 0x1e;

/// Rounding immediates (direction, exceptions suppressed), as the interpreter's.
const ROUND_EVEN: i32 = 0x08;
const ROUND_DOWN: i32 = 0x09;
const ROUND_UP: i32 = 0x0a;

type R = Result<(), IcedError>;

/// Where an op's instructions find the hoisted constants they need.
pub(super) struct Consts<'a> {
    sched: &'a Schedule,
    base: usize,
}

impl Consts<'_> {
    fn reg(&self, c: f32) -> usize {
        self.base + self.sched.special(c)
    }
}

/// One instruction set's vector instructions.
pub(super) trait VecIsa {
    /// Vector registers.
    const NREGS: usize;
    /// Registers kept for the instructions' own use, at the top.
    const TEMPS: usize;
    /// Bytes in a vector.
    const BYTES: i32;
    /// `d = [m]`, under the tail mask when `tail`.
    fn load(a: &mut CodeAssembler, d: usize, m: AsmMemoryOperand, tail: bool) -> R;
    /// `d = [m]` in every lane.
    fn bcast(a: &mut CodeAssembler, d: usize, m: AsmMemoryOperand) -> R;
    /// `[m] = s`, under the tail mask when `tail`.
    fn store(a: &mut CodeAssembler, m: AsmMemoryOperand, s: usize, tail: bool) -> R;
    /// `[m] = s` past the caches (`m` aligned to the vector).
    fn stream(a: &mut CodeAssembler, m: AsmMemoryOperand, s: usize) -> R;
    /// Sets the tail mask from the one `p` points to.
    fn set_tail(a: &mut CodeAssembler, p: AsmRegister64) -> R;
    /// `d = op(x, y, z)` (operands in the op's order; unused ones are 0).
    fn op(a: &mut CodeAssembler, op: &ScalarOp, d: usize, o: [usize; 3], k: &Consts) -> R;
}

fn zr(i: usize) -> AsmRegisterZmm {
    get_zmm(Register::ZMM0 + i as u32).expect("a zmm register")
}

fn yr(i: usize) -> AsmRegisterYmm {
    get_ymm(Register::YMM0 + i as u32).expect("a ymm register")
}

/// AVX-512F (with DQ for nothing: every instruction here is F or VL).
pub(super) struct Avx512;

impl VecIsa for Avx512 {
    const NREGS: usize = 32;
    const TEMPS: usize = 0;
    const BYTES: i32 = 64;

    fn load(a: &mut CodeAssembler, d: usize, m: AsmMemoryOperand, tail: bool) -> R {
        if tail {
            a.vmovups(zr(d).k7().z(), zmmword_ptr(m))
        } else {
            a.vmovups(zr(d), zmmword_ptr(m))
        }
    }

    fn bcast(a: &mut CodeAssembler, d: usize, m: AsmMemoryOperand) -> R {
        a.vbroadcastss(zr(d), dword_ptr(m))
    }

    fn store(a: &mut CodeAssembler, m: AsmMemoryOperand, s: usize, tail: bool) -> R {
        if tail {
            a.vmovups(zmmword_ptr(m).k7(), zr(s))
        } else {
            a.vmovups(zmmword_ptr(m), zr(s))
        }
    }

    fn stream(a: &mut CodeAssembler, m: AsmMemoryOperand, s: usize) -> R {
        a.vmovntps(zmmword_ptr(m), zr(s))
    }

    fn set_tail(a: &mut CodeAssembler, p: AsmRegister64) -> R {
        a.kmovw(k7, word_ptr(p))
    }

    fn op(a: &mut CodeAssembler, op: &ScalarOp, d: usize, o: [usize; 3], k: &Consts) -> R {
        let (dz, x, y, c) = (zr(d), zr(o[0]), zr(o[1]), zr(o[2]));
        let flag = |a: &mut CodeAssembler| a.vmovaps(dz.k1().z(), zr(k.reg(ONE)));
        let zero = || zr(k.reg(ZERO));
        match *op {
            ScalarOp::Unary(u, _) => match u {
                Unary::Neg => a.vmulps(dz, x, zr(k.reg(MINUS_ONE))),
                Unary::Abs => a.vpandd(dz, x, zr(k.reg(abs_mask()))),
                Unary::Sqrt => a.vsqrtps(dz, x),
                Unary::Relu => a.vmaxps(dz, zr(k.reg(ZERO)), x),
                Unary::Floor => a.vrndscaleps(dz, x, ROUND_DOWN),
                Unary::Ceil => a.vrndscaleps(dz, x, ROUND_UP),
                Unary::Round => a.vrndscaleps(dz, x, ROUND_EVEN),
                Unary::Recip => a.vdivps(dz, zr(k.reg(ONE)), x),
                Unary::Rsqrt => {
                    a.vsqrtps(dz, x)?;
                    a.vdivps(dz, zr(k.reg(ONE)), dz)
                }
                Unary::Not => {
                    a.vcmpps(k1, x, zero(), EQ_OQ)?;
                    flag(a)
                }
                Unary::IsNan => {
                    a.vcmpps(k1, x, x, UNORD_Q)?;
                    flag(a)
                }
                Unary::Sign => {
                    a.vmovaps(dz, x)?;
                    a.vcmpps(k1, x, zero(), GT_OQ)?;
                    a.vmovaps(dz.k1(), zr(k.reg(ONE)))?;
                    a.vcmpps(k1, x, zero(), LT_OQ)?;
                    a.vmovaps(dz.k1(), zr(k.reg(MINUS_ONE)))
                }
                _ => unreachable!("scheduled only with a generated form"),
            },
            ScalarOp::Binary(b, _, _) => match b {
                Binary::Add => a.vaddps(dz, x, y),
                Binary::Sub => a.vsubps(dz, x, y),
                Binary::Mul => a.vmulps(dz, x, y),
                Binary::Div => a.vdivps(dz, x, y),
                Binary::Max | Binary::Min => {
                    // vmaxps gives y where either is NaN; NaN propagates from x too (where
                    // both are, the interpreter's NaN is y's: a payload apart).
                    a.vcmpps(k1, x, x, UNORD_Q)?;
                    if b == Binary::Max {
                        a.vmaxps(dz, x, y)?;
                    } else {
                        a.vminps(dz, x, y)?;
                    }
                    a.vmovaps(dz.k1(), x)
                }
                Binary::Eq | Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge => {
                    a.vcmpps(k1, x, y, predicate(b))?;
                    flag(a)
                }
                Binary::And => {
                    a.vcmpps(k1, x, zero(), NEQ_UQ)?;
                    a.vcmpps(k1.k1(), y, zero(), NEQ_UQ)?;
                    flag(a)
                }
                Binary::Or => {
                    a.vcmpps(k1, x, zero(), NEQ_UQ)?;
                    a.vcmpps(k2, y, zero(), NEQ_UQ)?;
                    a.korw(k1, k1, k2)?;
                    flag(a)
                }
                _ => unreachable!("scheduled only with a generated form"),
            },
            ScalarOp::Select(..) => {
                // Lanes where the condition is zero take the third operand.
                a.vcmpps(k1, x, zero(), EQ_OQ)?;
                a.vblendmps(dz.k1(), y, c)
            }
            _ => unreachable!("loads and constants are not ops here"),
        }
    }
}

/// AVX2 (`ymm15` a scratch mask, `ymm14` the tail mask).
pub(super) struct Avx2;

const Y_TMP: usize = 15;
const Y_TAIL: usize = 14;

impl VecIsa for Avx2 {
    const NREGS: usize = 16;
    const TEMPS: usize = 2;
    const BYTES: i32 = 32;

    fn load(a: &mut CodeAssembler, d: usize, m: AsmMemoryOperand, tail: bool) -> R {
        if tail {
            a.vmaskmovps(yr(d), yr(Y_TAIL), ymmword_ptr(m))
        } else {
            a.vmovups(yr(d), ymmword_ptr(m))
        }
    }

    fn bcast(a: &mut CodeAssembler, d: usize, m: AsmMemoryOperand) -> R {
        a.vbroadcastss(yr(d), dword_ptr(m))
    }

    fn store(a: &mut CodeAssembler, m: AsmMemoryOperand, s: usize, tail: bool) -> R {
        if tail {
            a.vmaskmovps(ymmword_ptr(m), yr(Y_TAIL), yr(s))
        } else {
            a.vmovups(ymmword_ptr(m), yr(s))
        }
    }

    fn stream(a: &mut CodeAssembler, m: AsmMemoryOperand, s: usize) -> R {
        a.vmovntps(ymmword_ptr(m), yr(s))
    }

    fn set_tail(a: &mut CodeAssembler, p: AsmRegister64) -> R {
        a.vmovups(yr(Y_TAIL), ymmword_ptr(p))
    }

    fn op(a: &mut CodeAssembler, op: &ScalarOp, d: usize, o: [usize; 3], k: &Consts) -> R {
        let (dy, x, y, c, t) = (yr(d), yr(o[0]), yr(o[1]), yr(o[2]), yr(Y_TMP));
        let one = || yr(k.reg(ONE));
        let zero = || yr(k.reg(ZERO));
        match *op {
            ScalarOp::Unary(u, _) => match u {
                Unary::Neg => a.vmulps(dy, x, yr(k.reg(MINUS_ONE))),
                Unary::Abs => a.vandps(dy, x, yr(k.reg(abs_mask()))),
                Unary::Sqrt => a.vsqrtps(dy, x),
                Unary::Relu => a.vmaxps(dy, zero(), x),
                Unary::Floor => a.vroundps(dy, x, ROUND_DOWN),
                Unary::Ceil => a.vroundps(dy, x, ROUND_UP),
                Unary::Round => a.vroundps(dy, x, ROUND_EVEN),
                Unary::Recip => a.vdivps(dy, one(), x),
                Unary::Rsqrt => {
                    a.vsqrtps(dy, x)?;
                    a.vdivps(dy, one(), dy)
                }
                Unary::Not => {
                    a.vcmpps(dy, x, zero(), EQ_OQ)?;
                    a.vandps(dy, dy, one())
                }
                Unary::IsNan => {
                    a.vcmpps(dy, x, x, UNORD_Q)?;
                    a.vandps(dy, dy, one())
                }
                Unary::Sign => {
                    a.vcmpps(t, x, zero(), LT_OQ)?;
                    a.vblendvps(dy, x, yr(k.reg(MINUS_ONE)), t)?;
                    a.vcmpps(t, x, zero(), GT_OQ)?;
                    a.vblendvps(dy, dy, one(), t)
                }
                _ => unreachable!("scheduled only with a generated form"),
            },
            ScalarOp::Binary(b, _, _) => match b {
                Binary::Add => a.vaddps(dy, x, y),
                Binary::Sub => a.vsubps(dy, x, y),
                Binary::Mul => a.vmulps(dy, x, y),
                Binary::Div => a.vdivps(dy, x, y),
                Binary::Max | Binary::Min => {
                    if b == Binary::Max {
                        a.vmaxps(dy, x, y)?;
                    } else {
                        a.vminps(dy, x, y)?;
                    }
                    // As on AVX-512: y where either is NaN, then x where x is.
                    a.vcmpps(t, x, x, UNORD_Q)?;
                    a.vblendvps(dy, dy, x, t)
                }
                Binary::Eq | Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge => {
                    a.vcmpps(dy, x, y, predicate(b))?;
                    a.vandps(dy, dy, one())
                }
                Binary::And | Binary::Or => {
                    a.vcmpps(t, x, zero(), NEQ_UQ)?;
                    a.vcmpps(dy, y, zero(), NEQ_UQ)?;
                    if b == Binary::And {
                        a.vandps(dy, dy, t)?;
                    } else {
                        a.vorps(dy, dy, t)?;
                    }
                    a.vandps(dy, dy, one())
                }
                _ => unreachable!("scheduled only with a generated form"),
            },
            ScalarOp::Select(..) => {
                a.vcmpps(t, x, zero(), EQ_OQ)?;
                a.vblendvps(dy, y, c, t)
            }
            _ => unreachable!("loads and constants are not ops here"),
        }
    }
}

fn predicate(b: Binary) -> i32 {
    match b {
        Binary::Eq => EQ_OQ,
        Binary::Lt => LT_OQ,
        Binary::Le => LE_OQ,
        Binary::Gt => GT_OQ,
        _ => GE_OQ,
    }
}

/// A body's code: what [`assemble`] needs besides the schedule.
pub(super) struct Body<'a> {
    pub ops: &'a [ScalarOp],
    pub access: &'a [Access],
    pub stores: &'a [(usize, usize)],
    pub sched: &'a Schedule,
    /// Vectors in a group.
    pub u: usize,
    /// Where the hoisted constants lie (baked into the code).
    pub consts: *const f32,
    /// Whether whole vectors are stored past the caches (the stores' pointers then
    /// aligned to the vector by the caller).
    pub stream: bool,
}

impl Body<'_> {
    /// The first register of the hoisted constants (past every slot's `u` vectors).
    fn const_base(&self) -> usize {
        self.sched.slots * self.u
    }

    /// The vector register holding vector `v` of a group of op `i`'s values.
    fn reg(&self, i: usize, v: usize) -> usize {
        match self.sched.const_of[i] {
            usize::MAX => self.sched.slot[i] * self.u + v,
            c => self.const_base() + c,
        }
    }

    /// Window `w`'s row pointer, in its register or read into `rax`.
    fn window(&self, a: &mut CodeAssembler, w: usize) -> Result<AsmRegister64, IcedError> {
        if w < WINDOW_GPRS.len() {
            return Ok(WINDOW_GPRS[w]);
        }
        a.mov(rax, qword_ptr(rdi + 8 * w as i32))?;
        Ok(rax)
    }

    /// One pass of the body over `vecs` vectors at byte offset `r8` (under the tail mask
    /// when `tail`).
    fn pass<A: VecIsa>(&self, a: &mut CodeAssembler, vecs: usize, tail: bool) -> R {
        let consts = Consts {
            sched: self.sched,
            base: self.const_base(),
        };
        for &i in &self.sched.steps {
            let op = &self.ops[i];
            if let ScalarOp::Load(w) = *op {
                let p = self.window(a, w)?;
                for v in 0..vecs {
                    match self.access[w] {
                        Access::Broadcast => A::bcast(a, self.reg(i, v), p + 0)?,
                        Access::Contiguous => {
                            A::load(a, self.reg(i, v), p + r8 + v as i32 * A::BYTES, tail)?
                        }
                    }
                }
                continue;
            }
            let mut o = [0usize; 3];
            for v in 0..vecs {
                for (slot, arg) in o.iter_mut().zip(op.operands()) {
                    *slot = self.reg(arg, v);
                }
                A::op(a, op, self.reg(i, v), o, &consts)?;
            }
        }
        for &(value, w) in self.stores {
            let p = self.window(a, w)?;
            for v in 0..vecs {
                let (m, r) = (p + r8 + v as i32 * A::BYTES, self.reg(value, v));
                if self.stream && !tail {
                    A::stream(a, m, r)?;
                } else {
                    A::store(a, m, r, tail)?;
                }
            }
        }
        Ok(())
    }
}

/// The whole function for `body` on instruction set `A`.
pub(super) fn assemble<A: VecIsa>(body: &Body, windows: usize) -> Result<Vec<u8>, IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let in_regs = windows.min(WINDOW_GPRS.len());
    let saved = &WINDOW_GPRS[SAVED_FROM.min(in_regs)..in_regs];
    for &r in saved {
        a.push(r)?;
    }
    for (w, &r) in WINDOW_GPRS[..in_regs].iter().enumerate() {
        a.mov(r, qword_ptr(rdi + 8 * w as i32))?;
    }
    a.mov(rax, body.consts as u64)?;
    for c in 0..body.sched.consts.len() {
        A::bcast(&mut a, body.const_base() + c, rax + 4 * c as i32)?;
    }
    a.xor(r8d, r8d)?;
    let (mut singles, mut single_loop) = (a.create_label(), a.create_label());
    let (mut group_loop, mut tail, mut done) =
        (a.create_label(), a.create_label(), a.create_label());
    a.test(rsi, rsi)?;
    a.jz(singles)?;
    a.set_label(&mut group_loop)?;
    body.pass::<A>(&mut a, body.u, false)?;
    a.add(r8, body.u as i32 * A::BYTES)?;
    a.dec(rsi)?;
    a.jnz(group_loop)?;
    a.set_label(&mut singles)?;
    a.test(rdx, rdx)?;
    a.jz(tail)?;
    a.set_label(&mut single_loop)?;
    body.pass::<A>(&mut a, 1, false)?;
    a.add(r8, A::BYTES)?;
    a.dec(rdx)?;
    a.jnz(single_loop)?;
    a.set_label(&mut tail)?;
    a.test(rcx, rcx)?;
    a.jz(done)?;
    A::set_tail(&mut a, rcx)?;
    body.pass::<A>(&mut a, 1, true)?;
    a.set_label(&mut done)?;
    if body.stream {
        // The streamed stores reach memory before the caller's next loads or stores.
        a.sfence()?;
    }
    a.vzeroupper()?;
    for &r in saved.iter().rev() {
        a.pop(r)?;
    }
    a.ret()?;
    a.assemble(0)
}
