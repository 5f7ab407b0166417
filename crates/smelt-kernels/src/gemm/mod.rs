//! f32 GEMM: packed panels, register-blocked micro-kernels per ISA, weights packed once,
//! work split over a grid of row and column blocks, and each finished tile handed to a
//! [`TileSink`] (the fused epilogue) while it is still in L1.
//!
//! Every element of C is one micro-kernel's in-order sum over all of k, whatever the grid
//! or the thread count, so results do not depend on how the work was split.

pub mod gathered;
pub mod micro;
pub mod offsets;
pub mod pack;

use crate::buf::with_scratch;
use crate::epilogue::TileEpi;
use crate::half::HalfPanels;
use crate::pool::ThreadPool;
use crate::prepack::{packed, Floats};
use crate::Kernels;
pub use micro::Micro;
pub use pack::MatRef;
use pack::{pack_a_panel, pack_b_panel};

/// A left operand packed once (weights): panels of `mr` rows, each `k x mr`, k-major.
#[derive(Clone, Debug)]
pub struct PackedA {
    mr: usize,
    m: usize,
    k: usize,
    data: Floats,
}

/// A right operand packed once (weights): panels of `nr` columns, each `k x nr`, k-major.
#[derive(Clone, Debug)]
pub struct PackedB {
    nr: usize,
    k: usize,
    n: usize,
    data: Floats,
}

impl PackedA {
    /// Packs the `m x k` matrix `a[i * rs + j * cs]` for `micro`'s tile rows.
    ///
    /// # Panics
    /// When an element of the matrix lies outside `a`.
    pub fn new(micro: &Micro, m: usize, k: usize, a: &[f32], rs: usize, cs: usize) -> PackedA {
        PackedA::from_source(micro, m, k, || (a, rs, cs))
    }

    /// [`PackedA::new`] of the matrix `source` gives, asked for only when the floats are
    /// packed here (not when a stored pack is replayed, see [`crate::prepack`]).
    ///
    /// # Panics
    /// When an element of the matrix lies outside the slice.
    pub fn from_source<'a>(
        micro: &Micro,
        m: usize,
        k: usize,
        source: impl FnOnce() -> (&'a [f32], usize, usize),
    ) -> PackedA {
        let mr = micro.mr;
        let panels = m.div_ceil(mr);
        let data = packed(
            || format!("gemm.a mr{mr} {m}x{k}"),
            panels * k * mr,
            |d| {
                let (a, rs, cs) = source();
                assert_fits(a.len(), m, k, rs, cs);
                let src = MatRef {
                    ptr: a.as_ptr(),
                    rs: rs as isize,
                    cs: cs as isize,
                };
                for (i, out) in d.chunks_mut((k * mr).max(1)).enumerate() {
                    let rows = mr.min(m - i * mr);
                    // SAFETY: assert_fits bounds every element of the matrix.
                    unsafe { pack_a_panel(src, i * mr, rows, k, mr, out) };
                }
            },
        );
        PackedA { mr, m, k, data }
    }

    /// Rows.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Depth.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Rows per panel (the micro-kernel's tile rows).
    pub fn mr(&self) -> usize {
        self.mr
    }

    /// Row panel `i`: `k x mr` floats, k-major, rows `i * mr ..` (zero past `m`).
    ///
    /// # Panics
    /// When `i` is past the last panel.
    pub fn panel(&self, i: usize) -> &[f32] {
        let len = self.k * self.mr;
        &self.data.as_slice()[i * len..(i + 1) * len]
    }

    /// Heap bytes held (none for a stored pack, see [`crate::prepack`]).
    pub fn bytes(&self) -> usize {
        self.data.heap_bytes()
    }
}

impl PackedB {
    /// Packs the `k x n` matrix `b[i * rs + j * cs]` for `micro`'s tile columns.
    ///
    /// # Panics
    /// When an element of the matrix lies outside `b`.
    pub fn new(micro: &Micro, k: usize, n: usize, b: &[f32], rs: usize, cs: usize) -> PackedB {
        PackedB::from_source(micro, k, n, || (b, rs, cs))
    }

    /// [`PackedB::new`] of the matrix `source` gives, asked for only when the floats are
    /// packed here (not when a stored pack is replayed, see [`crate::prepack`]).
    ///
    /// # Panics
    /// When an element of the matrix lies outside the slice.
    pub fn from_source<'a>(
        micro: &Micro,
        k: usize,
        n: usize,
        source: impl FnOnce() -> (&'a [f32], usize, usize),
    ) -> PackedB {
        let nr = micro.nr;
        let panels = n.div_ceil(nr);
        let data = packed(
            || format!("gemm.b nr{nr} {k}x{n}"),
            panels * k * nr,
            |d| {
                let (b, rs, cs) = source();
                assert_fits(b.len(), k, n, rs, cs);
                let src = MatRef {
                    ptr: b.as_ptr(),
                    rs: rs as isize,
                    cs: cs as isize,
                };
                for (j, out) in d.chunks_mut((k * nr).max(1)).enumerate() {
                    let cols = nr.min(n - j * nr);
                    // SAFETY: assert_fits bounds every element of the matrix.
                    unsafe { pack_b_panel(src, j * nr, cols, k, nr, out) };
                }
            },
        );
        PackedB { nr, k, n, data }
    }

    /// Depth.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Panel `j`: `k x nr` floats, row-major, columns `j * nr ..` (zero past `n`).
    ///
    /// # Panics
    /// When `j` is past the last panel.
    pub fn panel(&self, j: usize) -> &[f32] {
        let len = self.k * self.nr;
        &self.data.as_slice()[j * len..(j + 1) * len]
    }

    /// Heap bytes held (none for a stored pack, see [`crate::prepack`]).
    pub fn bytes(&self) -> usize {
        self.data.heap_bytes()
    }
}

fn assert_fits(len: usize, rows: usize, cols: usize, rs: usize, cs: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    let last = (rows - 1)
        .checked_mul(rs)
        .and_then(|a| (cols - 1).checked_mul(cs).and_then(|b| a.checked_add(b)));
    assert!(
        last.is_some_and(|l| l < len),
        "matrix {rows}x{cols} (strides {rs}, {cs}) exceeds {len} elements"
    );
}

/// Where each batch of a strided operand starts, in elements past its `MatRef`.
#[derive(Clone, Copy, Debug)]
pub enum Batches<'a> {
    /// Batch `b` starts `b * stride` elements on (0: one matrix shared by every batch).
    Stride(isize),
    /// Batch `b` starts `offsets[b]` elements on.
    Table(&'a [isize]),
}

impl Batches<'_> {
    /// The offset of batch `b`.
    #[inline]
    pub fn at(&self, b: usize) -> isize {
        match self {
            Batches::Stride(s) => b as isize * s,
            Batches::Table(t) => t[b],
        }
    }
}

/// The left operand of a product.
#[derive(Clone, Copy)]
pub enum Lhs<'a> {
    /// Packed once, shared by every batch.
    Packed(&'a PackedA),
    /// Packed once per batch: batch `b` uses `packs[b % packs.len()]`.
    PackedEach(&'a [PackedA]),
    /// Read in place (packed per call).
    Strided(MatRef, Batches<'a>),
    /// Produced panel by panel, packed per call: `mr` rows of A at a time, each panel laid
    /// out as a [`PanelSource`] lays out B's (`out[p * mr + r] = A_batch[i0 + r, p]`).
    Panels(&'a dyn PanelSource),
    /// Half-precision weights shared by every batch (panels of `mr` rows, A transposed:
    /// the panels' rows are k), widened once per call.
    Half(&'a HalfPanels),
}

/// The right operand of a product.
#[derive(Clone, Copy)]
pub enum Rhs<'a> {
    /// Packed once, shared by every batch.
    Packed(&'a PackedB),
    /// Read in place (packed per call).
    Strided(MatRef, Batches<'a>),
    /// Produced panel by panel (e.g. the im2col view of a convolution's input).
    Panels(&'a dyn PanelSource),
    /// Packed once per batch: batch `b` uses `packs[b % packs.len()]`.
    PackedEach(&'a [PackedB]),
}

/// A right operand that packs its own panels: `out[p * nr + j] = B_batch[p, j0 + j]` for
/// `j < cols`, zero for `cols <= j < nr`.
pub trait PanelSource: Sync {
    /// Packs one `k x nr` panel of batch `batch` starting at column `j0`.
    #[allow(clippy::too_many_arguments)]
    fn pack(&self, batch: usize, j0: usize, cols: usize, k: usize, nr: usize, out: &mut [f32]);
}

/// `batch` products `C_b[m x n] = A_b[m x k] * B_b[k x n]`.
#[derive(Clone, Copy)]
pub struct Gemm<'a> {
    /// Independent products.
    pub batch: usize,
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// A.
    pub a: Lhs<'a>,
    /// B.
    pub b: Rhs<'a>,
}

/// Receives finished tiles of C: rows `i0 .. i0 + rows`, columns `j0 .. j0 + cols` of
/// product `batch`, row-major with row stride `ld`. It may rewrite the tile (it is scratch).
/// Tiles of one call arrive on several threads at once, each exactly once.
pub trait TileSink: Sync {
    /// Takes one tile.
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &self,
        batch: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        tile: &mut [f32],
        ld: usize,
    );

    /// Where a full tile at `(batch, i0, j0)` may be written in place, as (its first
    /// element, row stride), when the sink only stores tiles (no epilogue): the
    /// micro-kernel then writes there and `tile` is not called for it.
    fn in_place(&self, _batch: usize, _i0: usize, _j0: usize) -> Option<(*mut f32, usize)> {
        None
    }

    /// The epilogue of a full tile at `(batch, i0, j0)` for a fused micro-kernel, which
    /// then finishes and stores the tile from registers and `tile` is not called for it.
    fn fused(&self, _batch: usize, _i0: usize, _j0: usize) -> Option<TileEpi> {
        None
    }
}

/// A sink that stores tiles into a row-major C (`c + batch * batch_stride + i * ldc + j`).
pub struct StoreC {
    /// C's first element.
    pub c: *mut f32,
    /// Row stride.
    pub ldc: usize,
    /// Stride between batches.
    pub batch_stride: usize,
}

// SAFETY: tiles are disjoint, so concurrent stores never touch one element twice.
unsafe impl Sync for StoreC {}

impl TileSink for StoreC {
    fn tile(
        &self,
        b: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        t: &mut [f32],
        ld: usize,
    ) {
        for r in 0..rows {
            // SAFETY: the creator of StoreC guarantees C holds every (batch, row, col).
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    self.c.add(b * self.batch_stride + (i0 + r) * self.ldc + j0),
                    cols,
                )
            };
            crate::buf::copy_short(dst, &t[r * ld..r * ld + cols]);
        }
    }

    fn in_place(&self, b: usize, i0: usize, j0: usize) -> Option<(*mut f32, usize)> {
        // SAFETY: as for `tile`: C holds the whole tile.
        Some((
            unsafe { self.c.add(b * self.batch_stride + i0 * self.ldc + j0) },
            self.ldc,
        ))
    }
}

/// A sink for a product computed transposed (`C^T = B^T A^T`): each tile of `C^T` it takes
/// reaches `inner` as the matching tile of C (rows and columns swapped), so the epilogue
/// and the destination see C whatever the orientation the GEMM ran in.
pub struct Transposed<'a>(pub &'a dyn TileSink);

impl TileSink for Transposed<'_> {
    fn tile(
        &self,
        b: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        t: &mut [f32],
        ld: usize,
    ) {
        const MAX: usize = 8 * 64;
        assert!(
            rows * cols <= MAX,
            "tile {rows}x{cols} exceeds {MAX} floats"
        );
        let mut tt = [0f32; MAX];
        for r in 0..rows {
            for (c, &v) in t[r * ld..r * ld + cols].iter().enumerate() {
                tt[c * rows + r] = v;
            }
        }
        self.0
            .tile(b, j0, i0, cols, rows, &mut tt[..rows * cols], rows);
    }
}

/// Bytes of A one task's row block aims at: a quarter of the core's L2, so the block stays
/// there while B's panels stream past it.
pub fn a_block_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| (crate::isa::l2_bytes() / 4).clamp(64 << 10, 1 << 20))
}

/// The task grid: `(row blocks, column blocks)` and the task count.
fn grid(g: &Gemm, mr: usize, nr: usize, threads: usize) -> (usize, usize, usize) {
    let mp = g.m.div_ceil(mr);
    let np = g.n.div_ceil(nr);
    let ab = a_block_bytes();
    let mut mpt = (ab / (g.k.max(1) * mr * 4)).clamp(1, mp);
    // A short A beside a packed B (weights, read from memory once per row block) is one
    // row block while it fits in half of L2: B streams past it once.
    let packed_b = matches!(g.b, Rhs::Packed(_) | Rhs::PackedEach(_));
    if packed_b && g.m * g.k * 4 <= 2 * ab {
        mpt = mp;
    }
    let mut npt = np;
    let tasks = |mpt: usize, npt: usize| g.batch * mp.div_ceil(mpt) * np.div_ceil(npt);
    if threads > 1 {
        let want = 4 * threads;
        while tasks(mpt, npt) < want && npt > 1 {
            npt = npt.div_ceil(2);
        }
        while tasks(mpt, npt) < want && mpt > 1 {
            mpt = mpt.div_ceil(2);
        }
    }
    let (rb, mut cb) = (mp.div_ceil(mpt), np.div_ceil(npt));
    // A few tasks the threads do not divide leave threads idle at the end (9 tasks on two
    // threads run as 5 and 4): then more column blocks, up to a count they divide, where
    // there are panels for them. Past 16 tasks a thread the rest is under a thirtieth.
    let per = g.batch * rb;
    if threads > 1 && per * cb < 16 * threads {
        let mut c = cb;
        while !(per * c).is_multiple_of(threads) && c < np {
            c += 1;
        }
        if (per * c).is_multiple_of(threads) {
            cb = c;
        }
    }
    (rb, cb, per * cb)
}

/// Whether an `m`-row A packed at run time spreads its rows evenly over its `m / mr`
/// (rounded up) row panels: when the last of a few panels would hold at most 3 rows. A
/// 1-row tile costs a whole read of its B panel and waits on its two accumulators' FMA
/// latency: ResNet-50's 7x7 layers (49 pixel rows: 12, 12, 12, 12, 1) spent 7% of their
/// time in their 1-row tiles; as 10, 10, 10, 10, 9 rows they take the same five tiles.
fn even_row_panels(m: usize, mr: usize) -> bool {
    m.div_ceil(mr) <= 8 && (1..=3).contains(&(m % mr))
}

/// Cache lines of the next packed B panel one tile may prefetch: more stalls the tile
/// (ResNet-50's 7x7 layers, 1,800 lines a tile, ran slower). Intel CPUs only: on an
/// Emerald Rapids Xeon it made MiniLM 2-3% faster, on Zen 5 its prefetches clogged the
/// miss buffers its own stream prefetchers use (MiniLM 4-7% slower, a chain of ResNet-50's
/// 14x14 Winograd layers, their weights from memory, 33%).
const NEXT_PANEL_PREFETCH_LINES: usize = 256;

/// Depth up to which a product with B read in place, and columns from which, it sweeps row
/// panels outer within chunks of column panels (see `gemm`).
const SHALLOW_K: usize = 128;
/// See [`SHALLOW_K`].
const SHALLOW_MIN_N: usize = 16384;

/// Column panels a task must sweep before it copies its aliasing A block (see `gemm`).
const A_COPY_MIN_PANELS: usize = 4;

/// Whether `mr` rows `rs` floats apart share L1 sets enough to evict each other: more of
/// them land on one set than it has ways. Measured on Zen 4 (32 KiB, 8 ways): rows 4 KiB
/// apart (12 on one set) lose 15% unpacked; 2 or 6 KiB apart (6 per set) lose nothing. On
/// Zen 5 (48 KiB, 12 ways) 12 rows on one set lose nothing: copying them cost
/// 1024x128x1024 7% and gained 1024x1024x1024 nothing.
fn rows_alias(rs: isize, mr: usize) -> bool {
    let (period, ways) = crate::isa::l1d_geometry();
    rows_per_set(rs, mr, period) > ways
}

/// How many of `mr` rows `rs` floats apart fall on the fullest L1 set, sets repeating every
/// `period` bytes.
fn rows_per_set(rs: isize, mr: usize, period: usize) -> usize {
    let bytes = (rs.unsigned_abs() * 4) % period;
    // Distinct set offsets the rows cycle through: period / gcd(bytes, period) (a zero
    // stride offset puts them all on one).
    let mut g = period;
    let mut x = bytes;
    while x != 0 {
        (g, x) = (x, g % x);
    }
    mr.div_ceil((period / g).min(mr))
}

#[cfg(test)]
thread_local! {
    /// Tests set this to take the A copy path on any cache geometry.
    pub(crate) static FORCE_A_COPY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a test asked the calling thread's products to copy their row-major A blocks.
fn force_a_copy() -> bool {
    #[cfg(test)]
    return FORCE_A_COPY.with(|f| f.get());
    #[cfg(not(test))]
    false
}

/// The row stride, at least `k` floats, at which `mr` copied rows do not alias in L1 (see
/// [`rows_alias`]).
fn unaliased_stride(k: usize, mr: usize) -> usize {
    let mut rs = k.next_multiple_of(16);
    while rows_alias(rs as isize, mr) {
        rs += 16;
    }
    rs
}

/// A raw pointer shared by tasks that write disjoint parts (or only read).
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: see the uses: packing writes disjoint panels, compute only reads.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// Runs the products on up to `threads` threads of `pool`, handing every tile to `sink`.
///
/// # Safety
/// Every element of every batch of a strided operand must be readable and not written
/// during the call; a packed operand must have been packed with `kern`'s micro-kernel
/// family and have `g`'s dimensions.
pub unsafe fn gemm(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Gemm,
    sink: &dyn TileSink,
) {
    if g.batch == 0 || g.m == 0 || g.n == 0 {
        return;
    }
    let micro = kern.micro;
    let (mr, nr, k) = (micro.mr, micro.nr, g.k);
    let (mp, np) = (g.m.div_ceil(mr), g.n.div_ceil(nr));
    let a_batch_len = mp * k * mr;
    let b_batch_len = np * k * nr;
    let a_len = match g.a {
        Lhs::Packed(p) => {
            debug_assert!(p.mr == mr && p.m == g.m && p.k == k);
            0
        }
        Lhs::PackedEach(ps) => {
            debug_assert!(ps.iter().all(|p| p.mr == mr && p.m == g.m && p.k == k));
            0
        }
        // Row-major A (unit column step) is read in place by the micro-kernel.
        Lhs::Strided(a, _) if a.cs == 1 => 0,
        Lhs::Strided(..) | Lhs::Panels(_) => g.batch * a_batch_len,
        Lhs::Half(h) => {
            debug_assert!(h.width() == mr && h.cols() == g.m && h.rows() == k);
            a_batch_len
        }
    };
    // Where row panel `i` starts: every `mr` rows, or where A is packed here and its last
    // panel would be a sliver, the rows spread evenly over the same panels (see
    // `even_row_panels`). Packed, each panel still takes `mr` rows' room.
    let even = a_len > 0 && !matches!(g.a, Lhs::Half(_)) && even_row_panels(g.m, mr);
    let row0 = move |i: usize| {
        if even {
            i * (g.m / mp) + i.min(g.m % mp)
        } else {
            (i * mr).min(g.m)
        }
    };
    let (rb, cb, tasks) = grid(g, mr, nr, threads);
    // Block `q` of `blocks` over `n` panels starts at `block_start(n, blocks, q)`: blocks of
    // even size (50 panels in 8 blocks are 6 or 7 each, not seven 7s and a 1, which left
    // one of two threads 28 panels and the other 22).
    let block_start = |n: usize, blocks: usize, q: usize| q * (n / blocks) + q.min(n % blocks);
    // A B that needs packing is packed panel by panel inside the tile loop when one task
    // runs every row panel of its columns: each panel is packed once, into this thread's
    // scratch, and read back from cache instead of from a whole packed copy in memory.
    let b_inline = rb == 1 && matches!(g.b, Rhs::Strided(..) | Rhs::Panels(_));
    // A row-major A is read in place, its broadcasts served from `mr` rows a stride apart,
    // unless that stride puts more of them on one L1 set than it has ways (see
    // `rows_alias`): then a task that sweeps several column panels copies its row block's
    // rows once into its scratch at a stride that does not alias. (A row copy is a memcpy;
    // packing the block into k-major panels gathers the aliasing rows float by float: on
    // Zen 5, 1024x128x1024 ran 12% faster copied than packed. Copying or packing costs
    // more than it saves at other strides.)
    let a_inline = k > 0
        && matches!(g.a, Lhs::Strided(a, _) if a.cs == 1 && (rows_alias(a.rs, mr) || force_a_copy()))
        && np / cb >= A_COPY_MIN_PANELS;
    let b_len = match g.b {
        Rhs::Packed(p) => {
            debug_assert!(p.nr == nr && p.n == g.n && p.k == k);
            0
        }
        Rhs::PackedEach(ps) => {
            debug_assert!(ps.iter().all(|p| p.nr == nr && p.n == g.n && p.k == k));
            0
        }
        Rhs::Strided(..) | Rhs::Panels(_) if b_inline => 0,
        Rhs::Strided(..) | Rhs::Panels(_) => g.batch * b_batch_len,
    };
    with_scratch(a_len + b_len, |scratch| {
        let (abuf, bbuf) = scratch.split_at_mut(a_len);
        let (ap, bp) = (Shared(abuf.as_mut_ptr()), Shared(bbuf.as_mut_ptr()));
        // Phase 1: pack the operands that were not packed ahead (panels split among threads).
        let a_tasks = match g.a {
            Lhs::Half(_) => mp,
            _ if a_len > 0 => g.batch * mp,
            _ => 0,
        };
        let b_tasks = if b_len > 0 { g.batch * np } else { 0 };
        if a_tasks + b_tasks > 0 {
            let pack_threads = if (a_len + b_len) > (1 << 15) {
                threads
            } else {
                1
            };
            pool.run(pack_threads, a_tasks + b_tasks, &|t| {
                let _ = (&ap, &bp);
                if t < a_tasks {
                    let (bi, i) = (t / mp, t % mp);
                    let out = std::slice::from_raw_parts_mut(
                        ap.0.add(bi * a_batch_len + i * k * mr),
                        k * mr,
                    );
                    let rows = row0(i + 1) - row0(i);
                    match g.a {
                        Lhs::Strided(a, bs) => {
                            pack_a_panel(a.offset(bs.at(bi)), row0(i), rows, k, mr, out)
                        }
                        Lhs::Panels(src) => src.pack(bi, row0(i), rows, k, mr, out),
                        Lhs::Half(h) => h.widen_panel(i, out),
                        Lhs::Packed(_) | Lhs::PackedEach(_) => {}
                    }
                } else {
                    let t = t - a_tasks;
                    let (bi, j) = (t / np, t % np);
                    let out = std::slice::from_raw_parts_mut(
                        bp.0.add(bi * b_batch_len + j * k * nr),
                        k * nr,
                    );
                    let cols = nr.min(g.n - j * nr);
                    match g.b {
                        Rhs::Strided(b, bs) => {
                            pack_b_panel(b.offset(bs.at(bi)), j * nr, cols, k, nr, out)
                        }
                        Rhs::Panels(src) => src.pack(bi, j * nr, cols, k, nr, out),
                        Rhs::Packed(_) | Rhs::PackedEach(_) => {}
                    }
                }
            });
        }
        // Phase 2: the tiles.
        pool.run(threads, tasks, &|t| {
            let _ = (&ap, &bp);
            let bi = t / (rb * cb);
            let (ib, jb) = ((t / cb) % rb, t % cb);
            // Where A's row panel i starts, its row and k steps.
            let (a0, a_rs, a_ps, a_panel): (*const f32, isize, isize, isize) = match g.a {
                Lhs::Packed(p) => (
                    p.data.as_slice().as_ptr(),
                    1,
                    mr as isize,
                    (k * mr) as isize,
                ),
                Lhs::PackedEach(ps) => (
                    ps[bi % ps.len()].data.as_slice().as_ptr(),
                    1,
                    mr as isize,
                    (k * mr) as isize,
                ),
                Lhs::Strided(a, bs) if a.cs == 1 => {
                    (a.ptr.offset(bs.at(bi)), a.rs, 1, a.rs * mr as isize)
                }
                Lhs::Half(_) => (ap.0, 1, mr as isize, (k * mr) as isize),
                Lhs::Strided(..) | Lhs::Panels(_) => (
                    ap.0.add(bi * a_batch_len),
                    1,
                    mr as isize,
                    (k * mr) as isize,
                ),
            };
            let bpanels: *const f32 = match g.b {
                Rhs::Packed(p) => p.data.as_slice().as_ptr(),
                Rhs::PackedEach(ps) => ps[bi % ps.len()].data.as_slice().as_ptr(),
                // Unused (and past the empty buffer) when B is packed inline.
                Rhs::Strided(..) | Rhs::Panels(_) => bp.0.wrapping_add(bi * b_batch_len),
            };
            let mut tile = [0f32; 8 * 64];
            let panel_len = if b_inline { k * nr } else { 0 };
            let (i_lo, i_hi) = (block_start(mp, rb, ib), block_start(mp, rb, ib + 1));
            let (j_lo, j_end) = (block_start(np, cb, jb), block_start(np, cb, jb + 1));
            // A packed B panel (weights) comes from memory on its first tile; each tile of
            // the current panel prefetches its share of the next one, when that share is
            // small enough not to stall the tile (MiniLM's 128 x 384 x 1536: 2-3% faster).
            let next_panel_share = match g.b {
                Rhs::Packed(_) | Rhs::PackedEach(_) => {
                    let share = (k * nr).div_ceil(i_hi - i_lo).next_multiple_of(16);
                    if share <= NEXT_PANEL_PREFETCH_LINES * 16 && crate::isa::is_intel() {
                        share
                    } else {
                        0
                    }
                }
                Rhs::Strided(..) | Rhs::Panels(_) => 0,
            };
            // A shallow, wide product (k small, n large) with B read in place sweeps chunks
            // of column panels row panel by row panel, so only one row panel's output rows
            // are written at a time: a 16 -> 32 channel 1x1 convolution at 320x320, its 32
            // output planes and 16 input planes each a stream, took 2.2 ms sweeping all its
            // rows per column panel, 1.4-1.6 this way. Each chunk of B stays in L2
            // meanwhile. Narrow ones (Winograd's products, 56x56 images) lose by it: their
            // B panel no longer stays in L1 across the row panels.
            let rows_outer = match g.b {
                Rhs::Strided(b, _)
                    if b_inline
                        && b.cs == 1
                        && i_hi - i_lo > 1
                        && k <= SHALLOW_K
                        && g.n >= SHALLOW_MIN_N =>
                {
                    (a_block_bytes() / (k.max(1) * nr * 4)).max(1)
                }
                _ => 0,
            };
            // A row-major B read in place (a 1x1 convolution's input) is `k` rows a stride
            // apart, too many streams for the hardware prefetchers: each tile of a column
            // panel prefetches its share of the next panel's rows (Intel only, where it was
            // measured: a 2-vCPU Xeon, one thread, ResNet-50's 56x56 1x1 layers 8-29%
            // faster, a 64 -> 256 channel one alone 0.92-0.97 -> 0.79-0.85 ms).
            let next_b_rows = match g.b {
                Rhs::Strided(b, _) if b_inline && b.cs == 1 && crate::isa::is_intel() => {
                    k.div_ceil(i_hi - i_lo)
                }
                _ => 0,
            };
            // Whether a tile of row panel i finds its B panel in this thread's caches, so the
            // k loop need not prefetch it (see `Micro::warm`): a panel packed here, or one
            // the previous row panel's tile just read when it fits in the L2 share this
            // task's A block leaves (ResNet-50's 7x7 products, 590 KB panels, needed the
            // prefetches on every tile). The prefetches are load-port uops the FMAs then
            // wait on: a 2-vCPU Xeon (family 6 model 167), one thread, four interleaved
            // rounds, sums of per-layer minimums: MiniLM b8 68.96 -> 67.61 ms, b1 8.78 ->
            // 8.53, ResNet-50 54.27 -> 53.13, YOLOv8n 13.24 -> 12.97, PP-OCRv4 det within
            // noise; MiniLM b8 at two threads 38.29 -> 37.72.
            let warm_after_first = rows_outer == 0 && k * nr * 4 <= a_block_bytes();
            let warm = |i: usize| b_inline || (i > i_lo && warm_after_first);
            let a_copy_rs = if a_inline { unaliased_stride(k, mr) } else { 0 };
            let a_pack_len = (i_hi - i_lo) * mr * a_copy_rs;
            with_scratch(panel_len + a_pack_len, |own| {
                let (own, apack) = own.split_at_mut(panel_len);
                let (a0, a_rs, a_ps, a_panel) = match g.a {
                    Lhs::Strided(a, bs) if a_inline => {
                        // The block's rows, copied whole to a stride that spreads them
                        // over L1's sets, are read in place like any row-major A.
                        let src = a.offset(bs.at(bi));
                        let (r_lo, r_hi) = (i_lo * mr, (i_hi * mr).min(g.m));
                        for (r, out) in (r_lo..r_hi).zip(apack.chunks_exact_mut(a_copy_rs)) {
                            let row = src.ptr.offset(r as isize * src.rs);
                            std::ptr::copy_nonoverlapping(row, out.as_mut_ptr(), k);
                        }
                        // Row r sits at (r - r_lo) strides into the copy.
                        let rs = a_copy_rs as isize;
                        (
                            apack.as_ptr().wrapping_offset(-(r_lo as isize) * rs),
                            rs,
                            1,
                            rs * mr as isize,
                        )
                    }
                    _ => (a0, a_rs, a_ps, a_panel),
                };
                // Column panel j of B: where it is, its k step, its columns.
                let mut panel = |j: usize| {
                    let cols = nr.min(g.n - j * nr);
                    let (bpan, b_step) = match g.b {
                        // A full panel of a row-major B is read in place by the
                        // micro-kernel, its rows a stride apart.
                        Rhs::Strided(b, bs) if b_inline && b.cs == 1 && cols == nr => {
                            (b.offset(bs.at(bi)).ptr.add(j * nr), b.rs)
                        }
                        Rhs::Strided(b, bs) if b_inline => {
                            pack_b_panel(b.offset(bs.at(bi)), j * nr, cols, k, nr, own);
                            (own.as_ptr(), nr as isize)
                        }
                        Rhs::Panels(src) if b_inline => {
                            src.pack(bi, j * nr, cols, k, nr, own);
                            (own.as_ptr(), nr as isize)
                        }
                        _ => (bpanels.add(j * k * nr), nr as isize),
                    };
                    (bpan, b_step, cols)
                };
                // The tile of row panel i and column panel j (B's panel as `panel` gave it).
                let mut tile_at =
                    |i: usize, j: usize, (bpan, b_step, cols): (*const f32, isize, usize)| {
                        if next_panel_share > 0 && j + 1 < j_end {
                            // This tile's share of the next packed panel, towards L2.
                            let next = bpanels.add((j + 1) * k * nr);
                            let lo = (i - i_lo) * next_panel_share;
                            let hi = (lo + next_panel_share).min(k * nr);
                            for o in (lo..hi).step_by(16) {
                                crate::simd::prefetch_l2(next.add(o));
                            }
                        }
                        if next_b_rows > 0 && j + 1 < j_end {
                            if let Rhs::Strided(b, bs) = g.b {
                                // This tile's share of the next column panel's rows, towards L1.
                                let next = b.offset(bs.at(bi)).ptr.wrapping_add((j + 1) * nr);
                                let lo = (i - i_lo) * next_b_rows;
                                for p in lo..(lo + next_b_rows).min(k) {
                                    let row = next.wrapping_offset(p as isize * b.rs);
                                    for x in (0..nr).step_by(16) {
                                        crate::simd::prefetch_read(row.wrapping_add(x));
                                    }
                                }
                            }
                        }
                        let rows = row0(i + 1) - row0(i);
                        let apan = a0.wrapping_offset(i as isize * a_panel);
                        // (A last panel of at most half the tile's columns gets the
                        // half-width kernel: 1024x196x256 took 18% longer than 1024x192x256
                        // with the full one, its 4 columns costing a whole panel.)
                        let warm = warm(i);
                        let ker = if warm {
                            micro.for_warm_tile(rows, cols)
                        } else {
                            micro.for_tile(rows, cols)
                        };
                        if rows == mr && cols == nr {
                            if let Some((c, ldc)) = sink.in_place(bi, row0(i), j * nr) {
                                // The tile's rows, fetched while the k loop runs: its
                                // stores otherwise miss and stall the next tile.
                                for r in 0..mr {
                                    let row = c.wrapping_add(r * ldc);
                                    let mut x = 0;
                                    while x < nr {
                                        crate::simd::prefetch_write(row.wrapping_add(x));
                                        x += 16;
                                    }
                                }
                                ker(k, apan, a_rs, a_ps, bpan, b_step, c, ldc, false);
                                return;
                            }
                            let fused = if warm { micro.fused_warm } else { micro.fused };
                            if let Some(fused) = fused {
                                if let Some(epi) = sink.fused(bi, row0(i), j * nr) {
                                    fused(k, apan, a_rs, a_ps, bpan, b_step, &epi);
                                    return;
                                }
                            }
                        }
                        ker(
                            k,
                            apan,
                            a_rs,
                            a_ps,
                            bpan,
                            b_step,
                            tile.as_mut_ptr(),
                            nr,
                            false,
                        );
                        sink.tile(bi, row0(i), j * nr, rows, cols, &mut tile[..rows * nr], nr);
                    };
                if rows_outer > 0 {
                    // Chunks of column panels, row panels outer within each.
                    for j0 in (j_lo..j_end).step_by(rows_outer) {
                        for i in i_lo..i_hi {
                            for j in j0..(j0 + rows_outer).min(j_end) {
                                tile_at(i, j, panel(j));
                            }
                        }
                    }
                } else {
                    for j in j_lo..j_end {
                        let p = panel(j);
                        for i in i_lo..i_hi {
                            tile_at(i, j, p);
                        }
                    }
                }
            });
        });
    });
}

#[cfg(test)]
mod tests;
