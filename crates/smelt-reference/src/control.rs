//! Reference kernels of the control op family: If, Loop, Scan.

use super::sequence::{concat_axis, norm_axis, select_axis, stack};
use super::{Ctx, Inputs};
use smelt_ir::op::ControlOp;
use smelt_ir::{bail, ensure, err, Dim, Graph, Result, Tensor, Value, ValueId, ValueType};

/// Runs one op of the family.
pub fn run(op: &ControlOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        ControlOp::If {
            then_branch,
            else_branch,
        } => {
            let cond = scalar_bool(x.tensor(0)?).map_err(|e| e.context("If condition"))?;
            let g = if cond { then_branch } else { else_branch };
            let outs = cx
                .run_subgraph(g, vec![])
                .map_err(|e| e.context(if cond { "then_branch" } else { "else_branch" }))?;
            ensure!(
                outs.len() >= cx.n_outputs,
                InvalidModel,
                "If: the branch returned {} values, the node has {} outputs",
                outs.len(),
                cx.n_outputs
            );
            Ok(outs)
        }
        ControlOp::Loop { body } => run_loop(body, x, cx),
        ControlOp::Scan {
            body,
            num_scan_inputs,
            scan_input_axes,
            scan_input_directions,
            scan_output_axes,
            scan_output_directions,
            batched,
        } => {
            let spec = ScanSpec {
                body,
                m: *num_scan_inputs,
                in_axes: scan_input_axes,
                in_dirs: scan_input_directions,
                out_axes: scan_output_axes,
                out_dirs: scan_output_directions,
            };
            if *batched {
                scan8(&spec, x, cx)
            } else {
                let vals: Vec<Value> = (0..x.len())
                    .map(|i| {
                        x.value(i)
                            .cloned()
                            .ok_or_else(|| err!(InvalidModel, "Scan input {i} is missing"))
                    })
                    .collect::<Result<_>>()?;
                let n = vals
                    .len()
                    .checked_sub(spec.m)
                    .ok_or_else(|| err!(InvalidModel, "Scan has fewer inputs than scan inputs"))?;
                let mut vals = vals;
                let ins = vals
                    .split_off(n)
                    .into_iter()
                    .map(Value::into_tensor)
                    .collect::<Result<Vec<_>>>()?;
                let (mut states, scans) = scan_core(&spec, vals, &ins, None, cx)?;
                states.extend(scans.into_iter().map(Value::Tensor));
                Ok(states)
            }
        }
    }
}

/// The one element of a boolean (or numeric) tensor.
fn scalar_bool(t: &Tensor) -> Result<bool> {
    match t.to_bool()?.as_slice() {
        [b] => Ok(*b),
        v => bail!(
            InvalidModel,
            "expected one boolean, got {} elements",
            v.len()
        ),
    }
}

fn run_loop(body: &Graph, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let max_trips = match x.opt_tensor(0)? {
        None => None,
        Some(t) => match t.to_i64()?.as_slice() {
            [m] => Some(*m),
            v => bail!(
                InvalidModel,
                "Loop: M should hold one value, got {}",
                v.len()
            ),
        },
    };
    let cond_given = x.value(1).is_some();
    let mut cond = match x.opt_tensor(1)? {
        None => true,
        Some(t) => scalar_bool(t).map_err(|e| e.context("Loop condition"))?,
    };
    ensure!(
        max_trips.is_some() || cond_given,
        InvalidModel,
        "Loop with neither a trip count nor a condition never ends"
    );
    let mut carried: Vec<Value> = (2..x.len())
        .map(|i| {
            x.value(i)
                .cloned()
                .ok_or_else(|| err!(InvalidModel, "Loop: loop-carried input {i} is missing"))
        })
        .collect::<Result<_>>()?;
    let n = carried.len();
    let k = body
        .outputs
        .len()
        .checked_sub(1 + n)
        .ok_or_else(|| err!(InvalidModel, "Loop: the body returns too few values"))?;
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); k];
    // The scan outputs gathered so far count against the run until they are stacked.
    let mut held = 0u64;
    let r = loop_trips(
        body,
        cx,
        max_trips,
        cond_given,
        &mut cond,
        &mut carried,
        &mut scans,
        &mut held,
    );
    cx.control.release(held);
    r?;
    let mut result = carried;
    for (j, parts) in scans.iter().enumerate() {
        let t = if parts.is_empty() {
            empty_stack(body, body.outputs[1 + n + j], 0)?
        } else {
            stack(&parts.iter().collect::<Vec<_>>(), 0)
                .map_err(|e| e.context(format!("Loop scan output {j}")))?
        };
        result.push(Value::Tensor(t));
    }
    Ok(result)
}

/// Runs a Loop's iterations: the run's deadline and cancel token are checked before each.
#[allow(clippy::too_many_arguments)]
fn loop_trips(
    body: &Graph,
    cx: &Ctx,
    max_trips: Option<i64>,
    cond_given: bool,
    cond: &mut bool,
    carried: &mut Vec<Value>,
    scans: &mut [Vec<Tensor>],
    held: &mut u64,
) -> Result<()> {
    let (n, k) = (carried.len(), scans.len());
    let mut i: i64 = 0;
    while *cond && max_trips.is_none_or(|m| i < m) {
        cx.control
            .check()
            .map_err(|e| e.context(format!("Loop iteration {i}")))?;
        let mut inputs = Vec::with_capacity(2 + n);
        inputs.push(Value::Tensor(Tensor::scalar_i64(i)));
        inputs.push(Value::Tensor(Tensor::from_bools(vec![], vec![*cond])?));
        inputs.append(carried);
        let outs = cx
            .run_subgraph(body, inputs)
            .map_err(|e| e.context(format!("Loop iteration {i}")))?;
        ensure!(
            outs.len() == 1 + n + k,
            InvalidModel,
            "Loop: the body returned {} values, expected {}",
            outs.len(),
            1 + n + k
        );
        let mut outs = outs.into_iter();
        let c = outs
            .next()
            .ok_or_else(|| err!(InvalidModel, "Loop: the body returned no condition"))?;
        if cond_given {
            *cond = scalar_bool(c.tensor()?).map_err(|e| e.context("Loop body condition"))?;
        }
        carried.extend(outs.by_ref().take(n));
        for (s, v) in scans.iter_mut().zip(outs) {
            let bytes = v.memory_bytes();
            cx.control
                .charge(bytes, &|| format!("Loop scan output of iteration {i}"))?;
            *held += bytes;
            s.push(v.into_tensor().map_err(|e| e.context("Loop scan output"))?);
        }
        i += 1;
    }
    Ok(())
}

/// An empty stack (size 0 along `axis`) of the slices a body output declares.
fn empty_stack(body: &Graph, id: ValueId, axis: i64) -> Result<Tensor> {
    let (dtype, dims) = match &body.value(id).ty {
        Some(ValueType::Tensor { dtype, shape }) => {
            let dims: Option<Vec<usize>> = shape.as_ref().and_then(|s| {
                s.iter()
                    .map(|d| {
                        if let Dim::Known(v) = d {
                            Some(*v as usize)
                        } else {
                            None
                        }
                    })
                    .collect()
            });
            (*dtype, dims.unwrap_or_default())
        }
        _ => (smelt_ir::DType::F32, Vec::new()),
    };
    let mut shape = dims;
    let ax = norm_axis(axis, shape.len() + 1)?;
    shape.insert(ax, 0);
    Tensor::zeros(dtype, shape)
}

struct ScanSpec<'a> {
    body: &'a Graph,
    m: usize,
    in_axes: &'a [i64],
    in_dirs: &'a [bool],
    out_axes: &'a [i64],
    out_dirs: &'a [bool],
}

/// Runs the scan over `ins` (limited to the first `len` steps when given); returns the final
/// states and the stacked scan outputs.
fn scan_core(
    spec: &ScanSpec,
    mut states: Vec<Value>,
    ins: &[Tensor],
    len: Option<usize>,
    cx: &Ctx,
) -> Result<(Vec<Value>, Vec<Tensor>)> {
    let n = states.len();
    ensure!(
        ins.len() == spec.m,
        InvalidModel,
        "Scan: expected {} scan inputs, got {}",
        spec.m,
        ins.len()
    );
    let body = spec.body;
    let k = body
        .outputs
        .len()
        .checked_sub(n)
        .ok_or_else(|| err!(InvalidModel, "Scan: the body returns too few values"))?;
    ensure!(
        spec.out_axes.len() == k && spec.out_dirs.len() == k,
        InvalidModel,
        "Scan: scan output attributes do not match {k} outputs"
    );
    let mut axes = Vec::with_capacity(ins.len());
    let mut steps = None;
    for (j, t) in ins.iter().enumerate() {
        let a = spec.in_axes.get(j).copied().unwrap_or(0);
        let a = norm_axis(a, t.rank()).map_err(|e| e.context(format!("Scan input axis {j}")))?;
        let d = t.shape()[a];
        match steps {
            None => steps = Some(d),
            Some(s) => ensure!(
                s == d,
                InvalidModel,
                "Scan: scan inputs have different lengths ({s} and {d})"
            ),
        }
        axes.push(a);
    }
    let full = steps.unwrap_or(0);
    let steps = len.unwrap_or(full);
    ensure!(
        steps <= full,
        InvalidModel,
        "Scan: sequence length {steps} exceeds the scan input length {full}"
    );
    let mut parts: Vec<Vec<Tensor>> = vec![Vec::with_capacity(steps); k];
    for s in 0..steps {
        cx.control
            .check()
            .map_err(|e| e.context(format!("Scan iteration {s}")))?;
        let mut inputs = Vec::with_capacity(n + ins.len());
        inputs.append(&mut states);
        for (j, t) in ins.iter().enumerate() {
            let at = if spec.in_dirs.get(j).copied().unwrap_or(false) {
                steps - 1 - s
            } else {
                s
            };
            inputs.push(Value::Tensor(select_axis(t, axes[j], at)?));
        }
        let outs = cx
            .run_subgraph(body, inputs)
            .map_err(|e| e.context(format!("Scan iteration {s}")))?;
        ensure!(
            outs.len() == n + k,
            InvalidModel,
            "Scan: the body returned {} values, expected {}",
            outs.len(),
            n + k
        );
        let mut outs = outs.into_iter();
        states.extend(outs.by_ref().take(n));
        for (p, v) in parts.iter_mut().zip(outs) {
            p.push(v.into_tensor().map_err(|e| e.context("Scan output"))?);
        }
    }
    let mut scans = Vec::with_capacity(k);
    for (j, mut p) in parts.into_iter().enumerate() {
        if spec.out_dirs[j] {
            p.reverse();
        }
        let t = if p.is_empty() {
            empty_stack(body, body.outputs[n + j], spec.out_axes[j])?
        } else {
            stack(&p.iter().collect::<Vec<_>>(), spec.out_axes[j])
                .map_err(|e| e.context(format!("Scan output {j}")))?
        };
        scans.push(t);
    }
    Ok((states, scans))
}

/// Opset 8 Scan: input 0 is `sequence_lens` (optional); states, scan inputs and outputs carry a
/// leading batch dimension; each batch entry is scanned on its own and the results stacked.
fn scan8(spec: &ScanSpec, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let lens = x.opt_ints(0)?;
    let vals: Vec<&Tensor> = (1..x.len()).map(|i| x.tensor(i)).collect::<Result<_>>()?;
    let n = vals
        .len()
        .checked_sub(spec.m)
        .ok_or_else(|| err!(InvalidModel, "Scan has fewer inputs than scan inputs"))?;
    let Some(first) = vals.first() else {
        bail!(InvalidModel, "Scan has no inputs")
    };
    ensure!(
        first.rank() > 0,
        InvalidModel,
        "Scan (opset 8): inputs need a batch dimension"
    );
    let batch = first.shape()[0];
    for (i, t) in vals.iter().enumerate() {
        ensure!(
            t.rank() > 0 && t.shape()[0] == batch,
            InvalidModel,
            "Scan input {} does not have the batch size {batch}",
            i + 1
        );
    }
    let max_len = vals[n..]
        .first()
        .map(|t| t.shape().get(1).copied().unwrap_or(0))
        .unwrap_or(0);
    if let Some(l) = &lens {
        ensure!(
            l.len() == batch,
            InvalidModel,
            "Scan: sequence_lens has {} entries for a batch of {batch}",
            l.len()
        );
    }
    let k = spec
        .body
        .outputs
        .len()
        .checked_sub(n)
        .ok_or_else(|| err!(InvalidModel, "Scan: the body returns too few values"))?;
    let mut states_b: Vec<Vec<Tensor>> = vec![Vec::with_capacity(batch); n];
    let mut scans_b: Vec<Vec<Tensor>> = vec![Vec::with_capacity(batch); k];
    for b in 0..batch {
        let states = vals[..n]
            .iter()
            .map(|t| select_axis(t, 0, b).map(Value::Tensor))
            .collect::<Result<Vec<_>>>()?;
        let ins = vals[n..]
            .iter()
            .map(|t| select_axis(t, 0, b))
            .collect::<Result<Vec<_>>>()?;
        let len = match &lens {
            Some(l) => {
                let v = l[b];
                ensure!(
                    v >= 0 && v as usize <= max_len,
                    InvalidInput,
                    "Scan: sequence length {v} is out of range 0..={max_len}"
                );
                Some(v as usize)
            }
            None => None,
        };
        let (states, scans) =
            scan_core(spec, states, &ins, len, cx).map_err(|e| e.context(format!("batch {b}")))?;
        for (acc, s) in states_b.iter_mut().zip(states) {
            acc.push(s.into_tensor()?);
        }
        for (acc, s) in scans_b.iter_mut().zip(scans) {
            // Pad short sequences with zeros up to the longest.
            let l = s.shape().first().copied().unwrap_or(0);
            let s = if l < max_len {
                let mut shape = s.shape().to_vec();
                shape[0] = max_len - l;
                let pad = Tensor::zeros(s.dtype(), shape)?;
                concat_axis(&[&s, &pad], 0)?
            } else {
                s
            };
            acc.push(s);
        }
    }
    let mut out = Vec::with_capacity(n + k);
    for parts in states_b.iter().chain(&scans_b) {
        ensure!(
            !parts.is_empty(),
            Unsupported,
            "Scan (opset 8) with an empty batch is not supported"
        );
        out.push(Value::Tensor(stack(&parts.iter().collect::<Vec<_>>(), 0)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_graph;
    use smelt_ir::op::reduce::{ReduceOp, Reduction};
    use smelt_ir::op::SequenceOp;
    use smelt_ir::{GraphInput, Node, Op};

    fn input(g: &mut Graph, name: &str) -> ValueId {
        let id = g.add_value(name, None);
        g.inputs.push(GraphInput { id, default: None });
        id
    }

    fn node(g: &mut Graph, op: Op, inputs: &[ValueId], n_out: usize) -> Vec<ValueId> {
        let outs: Vec<ValueId> = (0..n_out)
            .map(|k| g.add_value(format!("v{}_{k}", g.nodes.len()), None))
            .collect();
        let name = format!("n{}", g.nodes.len());
        g.nodes.push(Node {
            name,
            op,
            inputs: inputs.iter().map(|&i| Some(i)).collect(),
            outputs: outs.iter().map(|&o| Some(o)).collect(),
        });
        outs
    }

    fn i64s(v: &Value) -> Vec<i64> {
        v.tensor().unwrap().to_i64().unwrap()
    }

    #[test]
    fn loop_carries_a_sequence_and_stacks_scan_outputs() {
        // body(i, cond, seq) -> (cond, SequenceInsert(seq, i), i)
        let mut body = Graph {
            name: "body".into(),
            ..Graph::default()
        };
        let i = input(&mut body, "i");
        let c = input(&mut body, "cond");
        let s = input(&mut body, "seq");
        let s2 = node(
            &mut body,
            Op::Sequence(SequenceOp::SequenceInsert),
            &[s, i],
            1,
        )[0];
        body.outputs = vec![c, s2, i];
        let mut g = Graph {
            name: "main".into(),
            ..Graph::default()
        };
        let m = input(&mut g, "m");
        let e = node(
            &mut g,
            Op::Sequence(SequenceOp::SequenceEmpty {
                dtype: smelt_ir::DType::I64,
            }),
            &[],
            1,
        )[0];
        let cond = g.add_value("cond", None);
        g.constants.push(smelt_ir::Constant {
            id: cond,
            tensor: Tensor::from_bools(vec![], vec![true]).unwrap(),
        });
        let outs = node(
            &mut g,
            Op::Control(ControlOp::Loop {
                body: Box::new(body),
            }),
            &[m, cond, e],
            2,
        );
        g.outputs = outs;
        let r = run_graph(&g, vec![Some(Value::Tensor(Tensor::scalar_i64(3)))]).unwrap();
        let Value::Sequence(seq) = &r[0] else {
            panic!("expected a sequence")
        };
        assert_eq!(
            seq.items.iter().map(i64s).collect::<Vec<_>>(),
            vec![vec![0], vec![1], vec![2]]
        );
        assert_eq!(r[1].tensor().unwrap().shape(), &[3]);
        assert_eq!(i64s(&r[1]), vec![0, 1, 2]);
        // Zero trips: the carried value passes through, the scan output is empty.
        let r = run_graph(&g, vec![Some(Value::Tensor(Tensor::scalar_i64(0)))]).unwrap();
        assert_eq!(r[1].tensor().unwrap().shape(), &[0]);
    }

    #[test]
    fn scan_sums_slices_backwards() {
        // body(s, x) -> (s + x, s + x), the sum through ConcatFromSequence + ReduceSum.
        let mut body = Graph {
            name: "body".into(),
            ..Graph::default()
        };
        let s = input(&mut body, "s");
        let x = input(&mut body, "x");
        let q = node(
            &mut body,
            Op::Sequence(SequenceOp::SequenceConstruct),
            &[s, x],
            1,
        )[0];
        let st = node(
            &mut body,
            Op::Sequence(SequenceOp::ConcatFromSequence {
                axis: 0,
                new_axis: true,
            }),
            &[q],
            1,
        )[0];
        let red = Reduction {
            axes: Some(vec![0]),
            keepdims: false,
            noop_with_empty_axes: false,
        };
        let sum = node(&mut body, Op::Reduce(ReduceOp::ReduceSum(red)), &[st], 1)[0];
        body.outputs = vec![sum, sum];
        let mut g = Graph {
            name: "main".into(),
            ..Graph::default()
        };
        let init = input(&mut g, "init");
        let xs = input(&mut g, "xs");
        let op = ControlOp::Scan {
            body: Box::new(body),
            num_scan_inputs: 1,
            scan_input_axes: vec![1],
            scan_input_directions: vec![true],
            scan_output_axes: vec![0],
            scan_output_directions: vec![false],
            batched: false,
        };
        g.outputs = node(&mut g, Op::Control(op), &[init, xs], 2);
        let init = Tensor::from_i64_vec(vec![2], vec![0, 100]).unwrap();
        let xs = Tensor::from_i64_vec(vec![2, 3], vec![1, 2, 3, 4, 5, 6]).unwrap();
        let r = run_graph(&g, vec![Some(init.into()), Some(xs.into())]).unwrap();
        assert_eq!(i64s(&r[0]), vec![6, 115]);
        assert_eq!(r[1].tensor().unwrap().shape(), &[3, 2]);
        assert_eq!(i64s(&r[1]), vec![3, 106, 5, 111, 6, 115]);
    }

    #[test]
    fn if_picks_a_branch_and_rejects_bad_conditions() {
        let branch = |v: i64| {
            let mut b = Graph {
                name: "b".into(),
                ..Graph::default()
            };
            let id = b.add_value("k", None);
            b.constants.push(smelt_ir::Constant {
                id,
                tensor: Tensor::scalar_i64(v),
            });
            b.outputs = vec![id];
            Box::new(b)
        };
        let mut g = Graph {
            name: "main".into(),
            ..Graph::default()
        };
        let c = input(&mut g, "c");
        g.outputs = node(
            &mut g,
            Op::Control(ControlOp::If {
                then_branch: branch(1),
                else_branch: branch(2),
            }),
            &[c],
            1,
        );
        let run = |b: Vec<bool>| {
            run_graph(
                &g,
                vec![Some(Tensor::from_bools(vec![b.len()], b).unwrap().into())],
            )
        };
        assert_eq!(i64s(&run(vec![true]).unwrap()[0]), vec![1]);
        assert_eq!(i64s(&run(vec![false]).unwrap()[0]), vec![2]);
        assert!(run(vec![true, false]).is_err());
    }
}
