"""Python's per-call overhead: one run of the shipped MLP (examples/mlp, x of 2x16) through
smelt.InferenceSession.run against the same run through the Rust API, in one process, in
interleaved blocks, on the same session and input.

    python python/benchmarks/overhead.py [--calls 20000] [--blocks 20]

The Rust side is smelt.bench's runner: Session::run_ref timed in Rust, call by call. The
Python side times each InferenceSession.run(None, feed) call with perf_counter_ns: the
feed's conversion, the GIL released and taken back, the outputs handed to numpy.
"""

import argparse
import os
import statistics
import time

import numpy as np

import smelt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20000, help="timed calls per side")
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="intra_op_num_threads (0: all)")
    a = ap.parse_args()
    so = smelt.SessionOptions()
    so.intra_op_num_threads = a.threads
    sess = smelt.InferenceSession(os.path.join(ROOT, "examples", "mlp", "model.onnx"), so)
    x = np.load(os.path.join(ROOT, "examples", "mlp", "x.npy"))
    feed = {"x": x}
    per = a.calls // a.blocks
    py_ns, rust_ns = [], []
    for _ in range(1000):
        sess.run(None, feed)
    for b in range(a.blocks):
        for side in (("py", "rust") if b % 2 == 0 else ("rust", "py")):
            if side == "py":
                run, clock = sess.run, time.perf_counter_ns
                for _ in range(per):
                    t = clock()
                    run(None, feed)
                    py_ns.append(clock() - t)
            else:
                r = smelt.bench(sess, feed, iterations=per, warmup=1)
                rust_ns.append(r["smelt"]["latency_ms"]["p50"] * 1e6)
    py_p50 = statistics.median(py_ns) / 1e3
    rust_p50 = statistics.median(rust_ns) / 1e3
    print(f"MLP {x.shape}, {sess.get_session_options().intra_op_num_threads or smelt._smelt.default_threads()} threads, "
          f"{per * a.blocks} calls per side in {a.blocks} interleaved blocks")
    print(f"  Rust API (Session::run_ref)     p50 {rust_p50:7.2f} us (median of block p50s)")
    print(f"  Python (InferenceSession.run)   p50 {py_p50:7.2f} us  p90 {np.percentile(py_ns, 90) / 1e3:7.2f} us")
    print(f"  Python overhead per call            {py_p50 - rust_p50:7.2f} us")


if __name__ == "__main__":
    main()
