#!/usr/bin/env python3
"""The elementwise bar of the convolution issue: a 16-op elementwise chain over f32 tensors
4x the last-level cache, its bandwidth (bytes read plus written, from `smelt run --profile
--roofline`) against the STREAM triad that the same run measures, at 1 and 2 threads:
once against the roofline's triad (streaming stores where AVX-512 has them) and once
against a plain-store triad (`SMELT_ROOFLINE_TRIAD=plain`), the issue's reference.

    ~/.cache/smelt/peers-venv/bin/python scripts/chain_bandwidth.py [--smelt target/release/smelt]

Needs the onnx package (the speed table's peers venv has it). The ops alternate the two
inputs, Add/Mul/Sub/Max/Min, so no pass folds them: one fused group, 12 bytes an element.
"""
import argparse, json, os, re, subprocess, tempfile
import onnx
from onnx import helper, TensorProto

p = argparse.ArgumentParser()
p.add_argument("--smelt", default="target/release/smelt")
p.add_argument("--llc-mib", type=int, default=0, help="last-level cache (default: from lscpu)")
a = p.parse_args()
llc = a.llc_mib
if not llc:
    out = subprocess.run(["lscpu", "-B"], capture_output=True, text=True).stdout
    m = re.search(r"L3 cache:\s+(\d+)", out)
    llc = int(m.group(1)) >> 20 if m else 32
n = llc << 20  # f32s in a tensor of 4x the LLC (4 bytes each)
seq = ["Add", "Mul", "Sub", "Max", "Add", "Mul", "Min", "Sub"] * 2
nodes, cur = [], "x"
for i, op in enumerate(seq):
    out = "z" if i == len(seq) - 1 else f"t{i}"
    nodes.append(helper.make_node(op, [cur, "y" if i % 2 == 0 else "x"], [out], name=f"n{i}"))
    cur = out
vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [n])
g = helper.make_graph(nodes, "chain16", [vi("x"), vi("y")], [vi("z")])
d = tempfile.mkdtemp()
model = os.path.join(d, "chain16.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
print(f"chain of {len(seq)} ops over {n} floats ({4 * n >> 20} MiB a tensor, LLC {llc} MiB)")
for t in (1, 2):
    res = {}
    for kind in ("streaming", "plain"):
        trace = os.path.join(d, f"t{t}-{kind}.json")
        env = dict(os.environ, SMELT_ROOFLINE_TRIAD=kind)
        r = subprocess.run([a.smelt, "run", model, "--random-inputs", "--threads", str(t), "--repeat", "10",
                            "--profile", trace, "--roofline"], capture_output=True, text=True, check=True, env=env)
        triad = float(re.search(r"([\d.]+) GB/s \(triad\)", r.stdout + r.stderr).group(1))
        ev = json.load(open(trace))["traceEvents"]
        runs = sorted({e["args"]["run"] for e in ev})[1:]  # the first run warms up
        best = min(sum(e["dur"] for e in ev if e["args"]["run"] == k) for k in runs)  # microseconds
        res[kind] = (best, triad)
    best = min(b for b, _ in res.values())
    gbs = 12 * n / (best * 1e3)
    print(f"threads {t}: best run {best / 1e3:.1f} ms, {gbs:.1f} GB/s = "
          + ", ".join(f"{100 * gbs / tr:.0f}% of the {k} triad's {tr:.1f} GB/s" for k, (_, tr) in res.items()))
