//! Plan-building helpers and tests of elementwise loops, copies, validation and running.

use super::*;
use smelt_ir::kernel::{
    Binary, Buffer, BufferId, KernelGroup, Loop, MemoryStats, ScalarOp as S, Store, TensorRef,
    Unary, ARENA_ALIGN,
};

/// Builds small plans by hand.
pub(super) struct Builder {
    pub plan: KernelPlan,
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            plan: KernelPlan {
                buffers: vec![],
                weights: vec![],
                inputs: vec![],
                outputs: vec![],
                groups: vec![],
                rejected: vec![],
                memory: MemoryStats::default(),
            },
        }
    }

    fn add(&mut self, name: &str, dtype: DType, shape: &[usize], kind: BufferKind) -> BufferId {
        self.plan.buffers.push(Buffer {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            kind,
        });
        BufferId(self.plan.buffers.len() as u32 - 1)
    }

    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> BufferId {
        self.plan.inputs.push(name.into());
        let i = self.plan.inputs.len() - 1;
        self.add(name, dtype, shape, BufferKind::Input(i))
    }

    pub fn weight(&mut self, name: &str, t: Tensor) -> BufferId {
        self.plan.weights.push(t.clone());
        let i = self.plan.weights.len() - 1;
        self.add(name, t.dtype(), t.shape(), BufferKind::Weight(i))
    }

    pub fn output(&mut self, name: &str, dtype: DType, shape: &[usize]) -> BufferId {
        let i = self.plan.outputs.len();
        let id = self.add(name, dtype, shape, BufferKind::Output(i));
        self.plan.outputs.push((name.into(), id));
        id
    }

    pub fn arena(&mut self, name: &str, dtype: DType, shape: &[usize]) -> BufferId {
        let offset = self.plan.memory.arena_bytes;
        let bytes = shape.iter().product::<usize>() * dtype.storage_size();
        self.plan.memory.arena_bytes += bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        self.add(name, dtype, shape, BufferKind::Arena { offset })
    }

    pub fn group(&mut self, body: GroupBody) {
        self.plan.groups.push(KernelGroup {
            ops: vec![body.kind().into()],
            nodes: vec![],
            body,
            choice: Default::default(),
        });
    }

    pub fn build(self) -> CpuPlan {
        CpuPlan::new(self.plan).expect("valid plan")
    }
}

/// A row-major window over a whole buffer.
pub(super) fn dense(id: BufferId, shape: &[usize]) -> TensorRef {
    TensorRef::dense(id, shape)
}

/// A buffer of `src` shape broadcast (numpy rules, right-aligned) to `shape`.
pub(super) fn bcast(id: BufferId, src: &[usize], shape: &[usize]) -> TensorRef {
    let st = smelt_ir::strides(src);
    let lead = shape.len() - src.len();
    let strides = (0..shape.len())
        .map(|d| {
            if d < lead || src[d - lead] == 1 {
                0
            } else {
                st[d - lead] as isize
            }
        })
        .collect();
    TensorRef {
        buffer: id,
        offset: 0,
        shape: shape.to_vec(),
        strides,
    }
}

/// An elementwise group.
pub(super) fn ew(
    shape: &[usize],
    loads: Vec<TensorRef>,
    ops: Vec<S>,
    stores: Vec<(usize, TensorRef)>,
) -> GroupBody {
    GroupBody::Elementwise(Loop {
        shape: shape.to_vec(),
        loads,
        ops,
        stores: stores
            .into_iter()
            .map(|(value, dst)| Store {
                value,
                dst,
                per_row: false,
            })
            .collect(),
    })
}

/// Deterministic values in [-2, 2).
pub(super) fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// Runs a plan once.
pub(super) fn run(p: &CpuPlan, inputs: &[&Tensor]) -> Vec<Tensor> {
    p.run(inputs, &mut Arena::new(0), None).expect("run")
}

/// Asserts two f32 slices agree within `tol` relative (plus `tol` absolute).
pub(super) fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "at {i}: {x} vs {y}");
    }
}

#[test]
fn chain_with_broadcast_and_transposed_load() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[3, 4]);
    let y = b.input("y", DType::F32, &[4, 3]);
    let bias = b.weight(
        "bias",
        Tensor::from_f32(vec![4], vec![1.0, -1.0, 0.5, 0.0]).unwrap(),
    );
    let out = b.output("out", DType::F32, &[3, 4]);
    // Transposed window of y: element [i][j] = y[j][i].
    let yt = TensorRef {
        buffer: y,
        offset: 0,
        shape: vec![3, 4],
        strides: vec![1, 3],
    };
    b.group(ew(
        &[3, 4],
        vec![dense(x, &[3, 4]), bcast(bias, &[4], &[3, 4]), yt],
        vec![
            S::Load(0),
            S::Const(2.0),
            S::Binary(Binary::Mul, 0, 1),
            S::Load(1),
            S::Binary(Binary::Add, 2, 3),
            S::Unary(Unary::Relu, 4),
            S::Load(2),
            S::Binary(Binary::Sub, 5, 6),
        ],
        vec![(7, dense(out, &[3, 4]))],
    ));
    let p = b.build();
    let xv = data(12, 1);
    let yv = data(12, 2);
    let xt = Tensor::from_f32(vec![3, 4], xv.clone()).unwrap();
    let ytn = Tensor::from_f32(vec![4, 3], yv.clone()).unwrap();
    let r = run(&p, &[&xt, &ytn]);
    let bias = [1.0, -1.0, 0.5, 0.0];
    let want: Vec<f32> = (0..12)
        .map(|k| {
            let (i, j) = (k / 4, k % 4);
            (xv[k] * 2.0 + bias[j]).max(0.0) - yv[j * 3 + i]
        })
        .collect();
    assert_eq!(r[0].as_f32().unwrap(), want.as_slice());
}

#[test]
fn in_place_store_through_the_arena() {
    let n = 1000;
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[n]);
    let t = b.arena("t", DType::F32, &[n]);
    let out = b.output("out", DType::F32, &[n]);
    let ops = |c: f32, op: Binary| vec![S::Load(0), S::Const(c), S::Binary(op, 0, 1)];
    b.group(ew(
        &[n],
        vec![dense(x, &[n])],
        ops(1.0, Binary::Add),
        vec![(2, dense(t, &[n]))],
    ));
    b.group(ew(
        &[n],
        vec![dense(t, &[n])],
        ops(3.0, Binary::Mul),
        vec![(2, dense(t, &[n]))],
    ));
    b.group(GroupBody::Copy {
        src: dense(t, &[n]),
        dst: dense(out, &[n]),
    });
    let p = b.build();
    let xv = data(n, 3);
    let r = run(&p, &[&Tensor::from_f32(vec![n], xv.clone()).unwrap()]);
    let want: Vec<f32> = xv.iter().map(|v| (v + 1.0) * 3.0).collect();
    assert_eq!(r[0].as_f32().unwrap(), want.as_slice());
}

#[test]
fn dtype_conversions() {
    let mut b = Builder::new();
    let x = b.input("x", DType::I64, &[6]);
    let gt = b.output("gt", DType::Bool, &[6]);
    let half = b.output("half", DType::I32, &[6]);
    let h16 = b.output("h16", DType::F16, &[6]);
    let u8o = b.output("u8", DType::U8, &[6]);
    b.group(ew(
        &[6],
        vec![dense(x, &[6])],
        vec![
            S::Load(0),
            S::Const(2.0),
            S::Binary(Binary::Gt, 0, 1),
            S::Binary(Binary::Div, 0, 1),
        ],
        vec![
            (2, dense(gt, &[6])),
            (3, dense(half, &[6])),
            (3, dense(h16, &[6])),
            (0, dense(u8o, &[6])),
        ],
    ));
    let p = b.build();
    let xs = Tensor::from_i64_vec(vec![6], vec![-3, -1, 0, 2, 3, 300]).unwrap();
    let r = run(&p, &[&xs]);
    assert_eq!(
        r[0].to_bool().unwrap(),
        vec![false, false, false, false, true, true]
    );
    assert_eq!(r[1].to_i64().unwrap(), vec![-1, 0, 0, 1, 1, 150]);
    assert_eq!(
        r[2].to_f64().unwrap(),
        vec![-1.5, -0.5, 0.0, 1.0, 1.5, 150.0]
    );
    assert_eq!(r[2].dtype(), DType::F16);
    assert_eq!(r[3].to_i64().unwrap(), vec![0, 0, 0, 2, 3, 255]);
}

#[test]
fn copy_of_a_transposed_i64_window() {
    let mut b = Builder::new();
    let x = b.input("x", DType::I64, &[2, 3]);
    let out = b.output("out", DType::I64, &[3, 2]);
    let src = TensorRef {
        buffer: x,
        offset: 0,
        shape: vec![3, 2],
        strides: vec![1, 3],
    };
    b.group(GroupBody::Copy {
        src,
        dst: dense(out, &[3, 2]),
    });
    let p = b.build();
    let big = i64::MAX - 7; // not representable in f32: the copy must be exact
    let xs = Tensor::from_i64_vec(vec![2, 3], vec![big, 1, 2, 3, 4, -5]).unwrap();
    let r = run(&p, &[&xs]);
    assert_eq!(r[0].to_i64().unwrap(), vec![big, 3, 1, 4, 2, -5]);
    assert_eq!(r[0].shape(), &[3, 2]);
}

#[test]
fn outputs_that_are_inputs_weights_or_repeated() {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[2]);
    let w = b.weight("w", Tensor::from_i64_vec(vec![1], vec![7]).unwrap());
    b.plan.outputs.push(("x".into(), x));
    b.plan.outputs.push(("w".into(), w));
    let p = b.build();
    let xs = Tensor::from_f32(vec![2], vec![1.0, 2.0]).unwrap();
    let r = run(&p, &[&xs]);
    assert_eq!(r[0], xs);
    assert_eq!(r[1].to_i64().unwrap(), vec![7]);
}

#[test]
fn threads_and_profiles() {
    let n = 1 << 18;
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[n]);
    let t = b.arena("t", DType::F32, &[n]);
    let out = b.output("out", DType::F32, &[n]);
    let body = vec![
        S::Load(0),
        S::Unary(Unary::Tanh, 0),
        S::Const(0.5),
        S::Binary(Binary::Mul, 1, 2),
    ];
    b.group(ew(
        &[n],
        vec![dense(x, &[n])],
        body.clone(),
        vec![(3, dense(t, &[n]))],
    ));
    b.group(ew(
        &[n],
        vec![dense(t, &[n])],
        body,
        vec![(3, dense(out, &[n]))],
    ));
    let plan = b.plan.clone();
    let serial = b.build().with_threads(1);
    let parallel = CpuPlan::new(plan).unwrap().with_threads(2);
    let xs = Tensor::from_f32(vec![n], data(n, 9)).unwrap();
    let want = run(&serial, &[&xs]);
    assert_eq!(run(&parallel, &[&xs]), want);
    // Many runs at once, one arena each.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut arena = Arena::new(0);
                let mut prof = Vec::new();
                let r = parallel.run(&[&xs], &mut arena, Some(&mut prof)).unwrap();
                assert_eq!(r, want);
                assert_eq!(prof.len(), 2);
                assert!(prof[1].start_ns >= prof[0].start_ns);
                assert_eq!(total_by_group(&prof, 2).len(), 2);
            });
        }
    });
}

#[test]
#[ignore]
fn bench_elementwise_chain() {
    let n = 16 << 20;
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, &[n]);
    let y = b.input("y", DType::F32, &[n]);
    let out = b.output("out", DType::F32, &[n]);
    let ops = vec![
        S::Load(0),
        S::Load(1),
        S::Binary(Binary::Mul, 0, 1),
        S::Const(1.0),
        S::Binary(Binary::Add, 2, 3),
        S::Unary(Unary::Relu, 4),
    ];
    b.group(ew(
        &[n],
        vec![dense(x, &[n]), dense(y, &[n])],
        ops,
        vec![(5, dense(out, &[n]))],
    ));
    let p = b.build().with_threads(1);
    let xs = Tensor::from_f32(vec![n], data(n, 1)).unwrap();
    let ys = Tensor::from_f32(vec![n], data(n, 2)).unwrap();
    let mut arena = Arena::new(0);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let r = p.run(&[&xs, &ys], &mut arena, None).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(r);
    }
    let bytes = (3 * n * 4) as f64;
    println!(
        "elementwise mul+add+relu over {n} f32 into a fresh output: {:.2} ms, {:.2} GB/s (2 loads + 1 store, 1 thread)",
        best * 1e3,
        bytes / best / 1e9
    );
    // The same loop into an arena buffer: the kernel alone, no output allocation.
    let mut plan = p.plan().clone();
    plan.weights = vec![];
    plan.buffers[2].kind = BufferKind::Arena { offset: 0 };
    plan.outputs.clear();
    plan.memory.arena_bytes = n * 4;
    let q = CpuPlan::new(plan).unwrap().with_threads(1);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        q.run(&[&xs, &ys], &mut arena, None).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "the same into a warm arena buffer: {:.2} ms, {:.2} GB/s",
        best * 1e3,
        bytes / best / 1e9
    );
}
