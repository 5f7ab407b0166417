#!/usr/bin/env python3
"""Start-up time and memory of smelt's artifacts and JIT path against onnxruntime.

For each model: compiles a `.smelt` artifact, then reports
  - smelt start-up overhead: wall time of `smelt run FILE.smelt` (process start to first
    result, median of runs) minus the steady-state median of one run (`smelt bench`);
  - onnxruntime's `InferenceSession()` time, in-process (Python's own start excluded);
  - the memory each adds: peak RSS minus the RSS before the model is loaded (smelt: a
    process that loads nothing; onnxruntime: after `import onnxruntime`).

Usage: python scripts/startup.py [--smelt target/release/smelt] [--threads 1] [--only yolov8n]
       [--compile-arg=--max-memory=30M]
(run with a Python that has onnxruntime and numpy, e.g. ~/.cache/smelt/venv/bin/python).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = os.path.expanduser("~/.cache/smelt/data/models")
CASES = [
    ("resnet50", "resnet50/model.onnx", {}),
    ("minilm-b1", "minilm-b1/model.onnx", {"input_ids": "1x128", "attention_mask": "1x128"}),
    ("yolov8n", "yolov8n/model.onnx", {"images": "1x3x320x320"}),
    ("ppocr-det", "ppocr-det/model.onnx", {"x": "1x3x640x640"}),
]

ORT_CHILD = r"""
import json, resource, sys, time
import numpy as np
import onnxruntime as ort
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
path, threads, shapes = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
before = rss()
o = ort.SessionOptions()
o.intra_op_num_threads = threads
o.inter_op_num_threads = 1
t = time.perf_counter()
s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
load = time.perf_counter() - t
feed = {}
for i in s.get_inputs():
    dims = shapes.get(i.name) or [d if isinstance(d, int) else 1 for d in i.shape]
    dt = np.int64 if "int64" in i.type else np.float32
    feed[i.name] = np.ones(dims, dt)
s.run(None, feed)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"load_s": load, "added_bytes": peak - before}))
"""


def wall_and_rss(cmd):
    """Wall seconds and peak RSS bytes of a command (GNU time)."""
    with tempfile.NamedTemporaryFile("r") as f:
        t = time.perf_counter()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f.name] + cmd,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        return wall, int(f.read().strip().splitlines()[-1]) * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smelt", default="target/release/smelt")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", action="append", help="a case to run (repeatable; default all)")
    ap.add_argument("--compile-arg", action="append", default=[],
                    help="an extra argument for `smelt compile` (repeatable), e.g. --compile-arg=--max-memory=30M")
    a = ap.parse_args()
    th = str(a.threads)
    _, base_rss = wall_and_rss([a.smelt, "--version"])
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, rel, shapes in CASES:
            if a.only and name not in a.only:
                continue
            model = os.path.join(MODELS, rel)
            art = os.path.join(d, name + ".smelt")
            shape_args = [x for n, s in shapes.items() for x in ("--shape", f"{n}={s}")]
            subprocess.run([a.smelt, "compile", model, "-o", art] + shape_args + a.compile_arg, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs = [wall_and_rss([a.smelt, "run", art, "--random-inputs", "--threads", th])
                    for _ in range(a.runs)]
            jit = [wall_and_rss([a.smelt, "run", model, "--random-inputs", "--threads", th]
                                + shape_args) for _ in range(a.runs)]
            rep = os.path.join(d, name + ".json")
            subprocess.run([a.smelt, "bench", art, "--threads", th, "--duration", "3",
                            "--json", rep], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(rep) as f:
                b = json.load(f)
            steady = b["smelt"]["latency_ms"]["p50"] / 1e3
            ort_shapes = {n: [int(x) for x in s.split("x")] for n, s in shapes.items()}
            ort = [json.loads(subprocess.run(
                [sys.executable, "-c", ORT_CHILD, model, th, json.dumps(ort_shapes)],
                check=True, capture_output=True, text=True).stdout) for _ in range(3)]
            first = statistics.median(w for w, _ in runs)
            rows.append({
                "model": name,
                "artifact_first_result_s": first,
                "steady_p50_s": steady,
                "artifact_overhead_s": first - steady,
                "artifact_added_bytes": statistics.median(m for _, m in runs) - base_rss,
                "jit_first_result_s": statistics.median(w for w, _ in jit),
                "jit_added_bytes": statistics.median(m for _, m in jit) - base_rss,
                "ort_session_s": statistics.median(o["load_s"] for o in ort),
                "ort_added_bytes": statistics.median(o["added_bytes"] for o in ort),
            })
    print(f"{'model':<11} {'art first':>10} {'steady':>8} {'overhead':>9} {'ORT load':>9} "
          f"{'ratio':>6} {'art MiB':>8} {'JIT MiB':>8} {'ORT MiB':>8} {'art/ORT':>8}")
    for r in rows:
        mib = 1 << 20
        print(f"{r['model']:<11} {r['artifact_first_result_s']*1e3:>8.1f}ms "
              f"{r['steady_p50_s']*1e3:>6.1f}ms {r['artifact_overhead_s']*1e3:>7.1f}ms "
              f"{r['ort_session_s']*1e3:>7.1f}ms {r['artifact_overhead_s']/r['ort_session_s']:>6.3f} "
              f"{r['artifact_added_bytes']/mib:>8.1f} {r['jit_added_bytes']/mib:>8.1f} "
              f"{r['ort_added_bytes']/mib:>8.1f} {r['artifact_added_bytes']/r['ort_added_bytes']:>8.2f}")


if __name__ == "__main__":
    main()
