//! Random graphs of elementwise ops (with Where, Clip, BatchNorm), broadcasts, transposes,
//! reshapes, splits, concats, slices, gathers, expands, reductions, softmax, layer norm,
//! pooling, MatMul and 1x1 Conv: the compiled plan (views, fusion,
//! transposed stores, in-place concats, arena reuse) must match the reference executor.
//! Tolerance: |plan - reference| <= 1e-5 + 1e-4 |reference|.

use smelt_ir::{Model, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;
use std::fmt::Write as _;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f32 {
        (self.next() % 20000) as f32 / 10000.0 - 1.0
    }
}

fn dims(s: &[usize]) -> String {
    s.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn floats(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| format!("{:.4}", rng.unit()))
        .collect::<Vec<_>>()
        .join(",")
}

/// A random graph: text and the input shape.
fn random_graph(seed: u64) -> (String, Vec<usize>) {
    let mut rng = Rng(seed);
    let shape = vec![1 + rng.below(2), 2 + rng.below(3) * 2, 2 + rng.below(3), 4];
    let mut text = format!("graph \"g\" {{\n  input %0 \"x\": f32[{}]\n", dims(&shape));
    let mut vals: Vec<(usize, Vec<usize>)> = vec![(0, shape.clone())];
    let mut next = 1usize;
    let mut body = String::new();
    let mut consts = String::new();
    let mut konst = |next: &mut usize, dt: &str, shape: &[usize], data: String| {
        let id = *next;
        *next += 1;
        let _ = writeln!(
            consts,
            "  const %{id} \"c{id}\" = {{\"dtype\":\"{dt}\",\"shape\":[{}],\"data\":{{\"{dt}\":[{data}]}}}}",
            dims(shape)
        );
        id
    };
    for step in 0..12 {
        let (a, sa) = vals[rng.below(vals.len())].clone();
        let r = sa.len();
        let mut out = sa.clone();
        let line = match rng.below(19) {
            0 => {
                let op = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs"][rng.below(5)];
                format!("elementwise.{op} (%{a})")
            }
            1 | 2 => {
                // Binary with a same-shape value, or a broadcast constant.
                let same: Vec<usize> = vals.iter().filter(|v| v.1 == sa).map(|v| v.0).collect();
                let op = ["Add", "Mul", "Sub", "Max"][rng.below(4)];
                let b = if rng.below(2) == 0 && same.len() > 1 {
                    same[rng.below(same.len())]
                } else {
                    let mut bs = sa.clone();
                    for d in bs.iter_mut() {
                        if rng.below(2) == 0 {
                            *d = 1;
                        }
                    }
                    let n = bs.iter().product();
                    let data = floats(&mut rng, n);
                    konst(&mut next, "F32", &bs, data)
                };
                format!("elementwise.{op} (%{a}, %{b})")
            }
            3 => {
                let mut perm: Vec<usize> = (0..r).collect();
                for i in (1..r).rev() {
                    perm.swap(i, rng.below(i + 1));
                }
                out = perm.iter().map(|&p| sa[p]).collect();
                format!("layout.Transpose {{\"perm\":[{}]}} (%{a})", dims(&perm))
            }
            4 if r >= 2 => {
                // Merge the last two dims.
                out = sa[..r - 2].to_vec();
                out.push(sa[r - 2] * sa[r - 1]);
                let s: Vec<String> = out.iter().map(|d| d.to_string()).collect();
                let c = konst(&mut next, "I64", &[out.len()], s.join(","));
                format!("layout.Reshape {{\"shape\":null,\"allowzero\":false}} (%{a}, %{c})")
            }
            5 => {
                let axis = rng.below(r);
                let same: Vec<usize> = vals
                    .iter()
                    .filter(|v| v.1.len() == r && (0..r).all(|d| d == axis || v.1[d] == sa[d]))
                    .map(|v| v.0)
                    .collect();
                let b = same[rng.below(same.len())];
                let bl = vals
                    .iter()
                    .find(|v| v.0 == b)
                    .map(|v| v.1[axis])
                    .unwrap_or(0);
                out[axis] = sa[axis] + bl;
                format!("layout.Concat {{\"axis\":{axis}}} (%{a}, %{b})")
            }
            6 => {
                let axis = r - 1;
                let red = if rng.below(2) == 0 {
                    "Softmax"
                } else {
                    "LogSoftmax"
                };
                format!("reduce.{red} {{\"axis\":{axis},\"coerce_2d\":false}} (%{a})")
            }
            7 => {
                let axis = rng.below(r);
                out[axis] = 1;
                format!(
                    "reduce.ReduceMean {{\"axes\":[{axis}],\"keepdims\":true,\"noop_with_empty_axes\":false}} (%{a})"
                )
            }
            8 if sa.iter().any(|&d| d >= 2) => {
                let axis = (0..r).find(|&d| sa[d] >= 2).unwrap_or(0);
                let start = rng.below(sa[axis] - 1);
                out[axis] = sa[axis] - start - 1;
                format!(
                    "layout.Slice {{\"starts\":[{start}],\"ends\":[{}],\"axes\":[{axis}]}} (%{a})",
                    sa[axis] - 1
                )
            }
            9 if r == 4 => {
                // 1x1 convolution to 2 channels with bias.
                let c = sa[1];
                out[1] = 2;
                let wdata = floats(&mut rng, 2 * c);
                let w = konst(&mut next, "F32", &[2, c, 1, 1], wdata);
                let bdata = floats(&mut rng, 2);
                let b = konst(&mut next, "F32", &[2], bdata);
                format!(
                    "nn.Conv {{\"auto_pad\":\"NotSet\",\"dilations\":[],\"group\":1,\"kernel_shape\":[1,1],\"pads\":[],\"strides\":[]}} (%{a}, %{w}, %{b})"
                )
            }
            10 => {
                let k = sa[r - 1];
                out[r - 1] = 3;
                let wdata = floats(&mut rng, k * 3);
                let w = konst(&mut next, "F32", &[k, 3], wdata);
                format!("nn.MatMul (%{a}, %{w})")
            }
            11 if r >= 3 => {
                let axis = rng.below(r);
                let i = rng.below(sa[axis]);
                out.remove(axis);
                let c = konst(&mut next, "I64", &[], i.to_string());
                format!("layout.Gather {{\"axis\":{axis}}} (%{a}, %{c})")
            }
            12 if sa.contains(&1) => {
                let axis = sa.iter().position(|&d| d == 1).unwrap_or(0);
                out[axis] = 3;
                let s: Vec<String> = out.iter().map(|d| d.to_string()).collect();
                let c = konst(&mut next, "I64", &[r], s.join(","));
                format!("layout.Expand (%{a}, %{c})")
            }
            13 => {
                // Where(a > 0, a, b): a comparison, a select.
                let zero = konst(&mut next, "F32", &[], "0.0".into());
                let cid = next;
                next += 1;
                let _ = writeln!(
                    body,
                    "  %{cid} \"g{cid}\" = elementwise.Greater (%{a}, %{zero}) # \"gt{step}\""
                );
                let n = sa[r - 1];
                let data = floats(&mut rng, n);
                let b = konst(&mut next, "F32", &[n], data);
                format!("elementwise.Where (%{cid}, %{a}, %{b})")
            }
            14 => {
                let lo = konst(&mut next, "F32", &[], "-0.3".into());
                let hi = konst(&mut next, "F32", &[], "0.6".into());
                format!("elementwise.Clip {{\"min\":null,\"max\":null}} (%{a}, %{lo}, %{hi})")
            }
            15 => {
                let n = sa[r - 1];
                let sdata = floats(&mut rng, n);
                let sc = konst(&mut next, "F32", &[n], sdata);
                let bdata = floats(&mut rng, n);
                let b = konst(&mut next, "F32", &[n], bdata);
                format!(
                    "nn.LayerNormalization {{\"axis\":-1,\"epsilon\":1e-5,\"stash_type\":\"F32\"}} (%{a}, %{sc}, %{b})"
                )
            }
            16 if r == 4 => {
                let c = sa[1];
                let mut ps = Vec::new();
                for k in 0..4 {
                    let data: Vec<String> = (0..c)
                        .map(|_| {
                            format!(
                                "{:.4}",
                                if k == 3 {
                                    0.5 + rng.unit().abs()
                                } else {
                                    rng.unit()
                                }
                            )
                        })
                        .collect();
                    ps.push(konst(&mut next, "F32", &[c], data.join(",")));
                }
                format!(
                    "nn.BatchNormalization {{\"epsilon\":1e-5,\"momentum\":0.9,\"training_mode\":false,\"spatial\":true}} (%{a}, %{}, %{}, %{}, %{})",
                    ps[0], ps[1], ps[2], ps[3]
                )
            }
            17 if r == 4 && sa[2] >= 2 && sa[3] >= 2 => {
                out[2] -= 1;
                out[3] -= 1;
                format!(
                    "nn.MaxPool {{\"auto_pad\":\"NotSet\",\"ceil_mode\":false,\"dilations\":[],\"kernel_shape\":[2,2],\"pads\":[],\"storage_order\":0,\"strides\":[1,1]}} (%{a})"
                )
            }
            18 if r == 4 => {
                out[2] = 1;
                out[3] = 1;
                format!("nn.GlobalAveragePool (%{a})")
            }
            _ => format!("elementwise.Sigmoid (%{a})"),
        };
        // Constants above took their ids first: the node gets the next free one.
        let nid = next;
        next += 1;
        let _ = writeln!(body, "  %{nid} \"v{nid}\" = {line} # \"n{step}\"");
        vals.push((nid, out));
    }
    // Split the last value in two along an even axis when there is one.
    let (last, sl) = vals[vals.len() - 1].clone();
    let mut outs: Vec<usize> = vec![last];
    if let Some(axis) = (0..sl.len()).find(|&d| sl[d] % 2 == 0 && sl[d] >= 2) {
        let (p, q) = (next, next + 1);
        let _ = writeln!(
            body,
            "  %{p} \"s{p}\", %{q} \"s{q}\" = layout.Split {{\"axis\":{axis},\"split\":null,\"num_outputs\":2}} (%{last}) # \"split\""
        );
        outs = vec![p, q];
    }
    for _ in 0..2 {
        outs.push(vals[rng.below(vals.len())].0);
    }
    outs.sort();
    outs.dedup();
    text.push_str(&consts);
    text.push_str(&body);
    let o: Vec<String> = outs.iter().map(|o| format!("%{o}")).collect();
    let _ = writeln!(text, "  output {}\n}}", o.join(", "));
    (text, shape)
}

fn run(text: &str, x: &Tensor, level: u8) -> Vec<Vec<f64>> {
    let graph = smelt_ir::text::parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let model = Model {
        graph,
        opsets: vec![(String::new(), 17)],
        ..Default::default()
    };
    let s = Session::from_model_with(
        model,
        &SessionOptions {
            opt_level: level,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let out = s
        .run(HashMap::from([("x".to_string(), Value::Tensor(x.clone()))]))
        .unwrap_or_else(|e| panic!("level {level}: {e}\n{text}"));
    if level > 0 {
        let plan = s.last_plan().expect("plan");
        assert!(
            plan.kernels().is_some(),
            "not planned: {:?}\n{text}",
            plan.fallback_reason()
        );
    }
    out.into_iter()
        .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
        .collect()
}

#[test]
fn random_graphs_match_the_reference() {
    for seed in 0..500u64 {
        let (text, shape) = random_graph(seed * 7919 + 3);
        let mut rng = Rng(seed);
        let n = shape.iter().product();
        let x = Tensor::from_f32(shape, (0..n).map(|_| rng.unit()).collect()).expect("x");
        let want = run(&text, &x, 0);
        let got = run(&text, &x, 1);
        assert_eq!(want.len(), got.len());
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w.len(), g.len(), "seed {seed}\n{text}");
            for (a, b) in g.iter().zip(w) {
                assert!(
                    (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                    "seed {seed}: {a} vs {b}\n{text}"
                );
            }
        }
    }
}
