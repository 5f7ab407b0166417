//! The memory plan: liveness of every arena buffer over the run order, in-place reuse
//! where an elementwise store can overwrite a dying input of the same layout, and
//! offsets in one arena (largest first, each at the lowest offset free over its life).

use smelt_ir::kernel::{BufferKind, GroupBody, KernelPlan, Loop, TensorRef, ARENA_ALIGN};

/// Every window a group touches: (window, written).
fn touches(body: &GroupBody) -> Vec<(&TensorRef, bool)> {
    fn of_loop<'a>(l: &'a Loop, out: &mut Vec<(&'a TensorRef, bool)>) {
        out.extend(l.loads.iter().map(|r| (r, false)));
        out.extend(l.stores.iter().map(|s| (&s.dst, true)));
    }
    let mut out = Vec::new();
    match body {
        GroupBody::Elementwise(l) => of_loop(l, &mut out),
        GroupBody::Reduction(r) => of_loop(&r.body, &mut out),
        GroupBody::Anchor(a) => {
            out.extend(a.inputs.iter().flatten().map(|r| (r, false)));
            of_loop(&a.epilogue, &mut out);
        }
        GroupBody::Copy { src, dst } => {
            out.push((src, false));
            out.push((dst, true));
        }
        GroupBody::Single(s) => {
            out.extend(s.inputs.iter().flatten().map(|r| (r, false)));
            out.extend(s.outputs.iter().flatten().map(|r| (r, true)));
        }
    }
    out
}

fn loop_of(body: &GroupBody) -> Option<&Loop> {
    match body {
        GroupBody::Elementwise(l) => Some(l),
        GroupBody::Reduction(r) => Some(&r.body),
        GroupBody::Anchor(a) => Some(&a.epilogue),
        _ => None,
    }
}

/// Whether two windows of one shape address the same elements in the same order.
fn same_window(a: &TensorRef, b: &TensorRef) -> bool {
    a.offset == b.offset
        && a.shape == b.shape
        && a.shape
            .iter()
            .zip(a.strides.iter().zip(&b.strides))
            .all(|(&n, (x, y))| n == 1 || x == y)
}

fn whole(r: &TensorRef, len: usize) -> bool {
    r.offset == 0 && r.is_contiguous() && r.shape.iter().product::<usize>() == len
}

/// Assigns arena offsets (with in-place reuse) and fills `plan.memory`.
pub fn plan_arena(plan: &mut KernelPlan) {
    let nb = plan.buffers.len();
    let is_arena = |k: BufferKind| matches!(k, BufferKind::Arena { .. });
    // Lifetimes in group indices.
    let mut first = vec![usize::MAX; nb];
    let mut last = vec![0usize; nb];
    for (gi, grp) in plan.groups.iter().enumerate() {
        for (r, _) in touches(&grp.body) {
            let b = r.buffer.0 as usize;
            first[b] = first[b].min(gi);
            last[b] = last[b].max(gi);
        }
    }
    // In place: a store that creates a buffer may take over a loaded buffer that dies here,
    // when both are whole buffers of the same type, size and element order. The loaded
    // buffer may itself have taken over another (a chain of residual blocks, each adding
    // into the last one's output): `alias` always names the chain's first buffer, whose
    // lifetime covers the whole chain.
    let mut alias: Vec<usize> = (0..nb).collect();
    let mut in_place = 0;
    for (gi, grp) in plan.groups.iter().enumerate() {
        let Some(l) = loop_of(&grp.body) else {
            continue;
        };
        let touched = touches(&grp.body);
        // An anchor's op reads its inputs in its own order (a convolution a pixel's
        // neighbours, a product a whole row) while its epilogue already stores finished
        // tiles: no buffer it reads may be overwritten in place.
        // (By the chains' first buffers: the memory, whichever buffer names it.)
        let op_reads: Vec<usize> = match &grp.body {
            GroupBody::Anchor(a) => (a.inputs.iter().flatten())
                .map(|r| alias[r.buffer.0 as usize])
                .collect(),
            _ => Vec::new(),
        };
        let mut taken = Vec::new();
        for s in &l.stores {
            let out = s.dst.buffer.0 as usize;
            let ob = &plan.buffers[out];
            if !is_arena(ob.kind) || first[out] != gi || s.per_row || !whole(&s.dst, ob.len()) {
                continue;
            }
            let cand = l.loads.iter().find(|r| {
                let b = r.buffer.0 as usize;
                let ib = &plan.buffers[b];
                let root = alias[b];
                is_arena(ib.kind)
                    && last[b] == gi
                    && last[root] == gi
                    && first[b] < gi
                    && !taken.contains(&root)
                    && ib.dtype == ob.dtype
                    && ib.len() == ob.len()
                    && same_window(r, &s.dst)
                    && whole(r, ib.len())
                    && !op_reads.contains(&root)
                    // Every other touch of the input in this group reads the same window.
                    && touched.iter().all(|(t, w)| {
                        t.buffer.0 as usize != b || (!w && same_window(t, r))
                    })
            });
            if let Some(r) = cand {
                let root = alias[r.buffer.0 as usize];
                taken.push(root);
                alias[out] = root;
                last[root] = last[root].max(last[out]);
                in_place += 1;
            }
        }
    }
    // Offsets for the representatives, largest first.
    let mut reps: Vec<usize> = (0..nb)
        .filter(|&b| is_arena(plan.buffers[b].kind) && alias[b] == b && first[b] != usize::MAX)
        .collect();
    let size = |b: usize| plan.buffers[b].bytes().div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
    reps.sort_by(|&a, &b| size(b).cmp(&size(a)).then(a.cmp(&b)));
    let mut placed: Vec<(usize, usize, usize, usize)> = Vec::new(); // (offset, size, first, last)
    let mut offset = vec![0usize; nb];
    let mut arena = 0usize;
    for b in reps {
        let (sz, f, l) = (size(b), first[b], last[b]);
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|p| p.2 <= l && f <= p.3)
            .map(|p| (p.0, p.0 + p.1))
            .collect();
        busy.sort();
        let mut at = 0usize;
        for (s, e) in busy {
            if at + sz <= s {
                break;
            }
            at = at.max(e);
        }
        placed.push((at, sz, f, l));
        offset[b] = at;
        arena = arena.max(at + sz);
    }
    let mut intermediate = 0usize;
    for (buf, &rep) in plan.buffers.iter_mut().zip(&alias) {
        if is_arena(buf.kind) {
            intermediate += buf.bytes();
            buf.kind = BufferKind::Arena {
                offset: offset[rep],
            };
        }
    }
    plan.memory.arena_bytes = arena;
    plan.memory.intermediate_bytes = intermediate;
    plan.memory.in_place = in_place;
}
