#!/usr/bin/env python3
"""Baseline worker for `smelt bench --vs RUNTIME`.

Loads a model in one runtime (onnxruntime, tract or openvino) with a given thread count,
reads the inputs from .npy files, then serves commands on stdin, one per line:

    run N     time N back-to-back run calls; reply {"ns": [t1, ..., tN]}
    quit      exit

The first line on stdout is {"ok": true, "runtime", "version", "load_ms"} or
{"ok": false, "error", "hint"}. Each run call is timed with time.perf_counter_ns()
around the call only, as smelt times its own run.
"""

import argparse
import json
import sys
import time


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(error, hint=""):
    reply({"ok": False, "error": error, "hint": hint})
    sys.exit(2)


def load_onnxruntime(model, threads):
    try:
        import onnxruntime as ort
    except ImportError as e:
        fail(f"onnxruntime is not importable: {e}", "pip install onnxruntime numpy")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # errors only: keep the harness's output readable
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])

    def run(feeds):
        return sess.run(None, feeds)

    return ort.__version__, run


def load_tract(model, threads, feeds):
    try:
        import tract
    except ImportError as e:
        fail(f"tract is not importable: {e}", "pip install tract numpy")
    if threads != 1:
        sys.stderr.write("note: tract runs single-threaded; --threads ignored for it\n")
    onnx = tract.onnx()
    m = onnx.model_for_path(model) if hasattr(onnx, "model_for_path") else onnx.load(model)
    names = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32",
             "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool"}
    for i, arr in enumerate(feeds.values()):
        m.set_input_fact(i, ",".join([*map(str, arr.shape), names.get(str(arr.dtype), str(arr.dtype))]))
    # Older tract Python APIs have into_optimized(); 0.23 offers into_model() only.
    typed = m.into_optimized() if hasattr(m, "into_optimized") else m.into_model()
    plan = typed.into_runnable()
    order = list(feeds.values())

    def run(_feeds):
        return plan.run(order)

    version = getattr(tract, "__version__", None)
    if version is None:
        from importlib.metadata import version as v
        version = v("tract")
    return version, run


def load_openvino(model, threads, f32=True):
    try:
        import openvino as ov
    except ImportError as e:
        fail(f"openvino is not importable: {e}", "pip install openvino numpy")
    core = ov.Core()
    # Same precision as smelt (f32): OpenVINO would otherwise use bf16 on AVX512-BF16 CPUs.
    # openvino-default leaves the precision to OpenVINO and reports what it chose.
    config = {
        "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "LATENCY",
        "NUM_STREAMS": 1,
    }
    if f32:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = core.compile_model(model, "CPU", config)
    req = compiled.create_infer_request()

    def run(feeds):
        return req.infer(feeds)

    version = ov.__version__ if hasattr(ov, "__version__") else ov.get_version()
    if not f32:
        version = f"{version} (precision {compiled.get_property('INFERENCE_PRECISION_HINT')})"
    return version, run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--inputs", required=True, help="JSON file: [[name, path.npy], ...] in model order")
    a = ap.parse_args()
    try:
        import numpy as np
    except ImportError as e:
        fail(f"numpy is not importable: {e}", "pip install numpy")
    with open(a.inputs) as f:
        pairs = json.load(f)
    feeds = {name: np.load(path) for name, path in pairs}
    t0 = time.perf_counter_ns()
    try:
        if a.runtime == "onnxruntime":
            version, run = load_onnxruntime(a.model, a.threads)
        elif a.runtime == "tract":
            version, run = load_tract(a.model, a.threads, feeds)
        elif a.runtime == "openvino":
            version, run = load_openvino(a.model, a.threads)
        elif a.runtime == "openvino-default":
            version, run = load_openvino(a.model, a.threads, f32=False)
        else:
            fail(f"unknown runtime '{a.runtime}'", "use onnxruntime, tract, openvino or openvino-default")
        load_ms = (time.perf_counter_ns() - t0) / 1e6
        run(feeds)  # fail now on a model or input the runtime rejects
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - report any runtime error to the harness
        fail(f"{a.runtime} could not load or run the model: {e}")
    reply({"ok": True, "runtime": a.runtime, "version": str(version), "load_ms": load_ms})
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "quit":
            break
        if parts[0] == "run" and len(parts) == 2:
            n = int(parts[1])
            ns = []
            try:
                for _ in range(n):
                    t = time.perf_counter_ns()
                    run(feeds)
                    ns.append(time.perf_counter_ns() - t)
            except Exception as e:  # noqa: BLE001
                reply({"error": f"{a.runtime} run failed: {e}"})
                continue
            reply({"ns": ns})
        else:
            reply({"error": f"unknown command: {line.strip()}"})


if __name__ == "__main__":
    main()
