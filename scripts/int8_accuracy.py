"""How far an int8 (QDQ) model is from its float model, for smelt and onnxruntime on the
same int8 file. Run with the peers' venv (onnxruntime, numpy):

    $P scripts/int8_accuracy.py images F32.onnx INT8.onnx DIR [HELD]
        top-1 agreement with fp32 and output cosine over every DIR/*.npy (one image
        each); with HELD, also over the files after the first HELD (sorted), for a model
        calibrated on `smelt quantize --limit HELD`.
    $P scripts/int8_accuracy.py minilm F32.onnx INT8.onnx DIR
        cosine to fp32 of each f32 output (and its worst row) for DIR/input_0.npy
        (input_ids) and DIR/input_1.npy (attention_mask).

smelt is target/release/smelt, or $SMELT.
"""

import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

SMELT = os.environ.get("SMELT", os.path.join(os.path.dirname(__file__), "..", "target", "release", "smelt"))


def session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def smelt(model, inputs):
    """smelt run's outputs, by file stem."""
    with tempfile.TemporaryDirectory() as out:
        args = [SMELT, "run", model, "--output-dir", out]
        for name, path in inputs.items():
            args += ["--input", f"{name}={path}"]
        subprocess.run(args, check=True, capture_output=True)
        return {os.path.basename(p)[:-4]: np.load(p) for p in glob.glob(f"{out}/*.npy")}


def cos(u, v):
    u, v = u.astype(np.float64).ravel(), v.astype(np.float64).ravel()
    return float((u * v).sum() / np.sqrt((u * u).sum() * (v * v).sum()))


def images(f32, q, folder, held=0):
    s32, sq = session(f32), session(q)
    name = s32.get_inputs()[0].name
    files = sorted(glob.glob(os.path.join(folder, "*.npy")))
    agree = {"onnxruntime": [0, 0], "smelt": [0, 0]}
    cosines = {"onnxruntime": [], "smelt": []}
    for i, f in enumerate(files):
        x = np.load(f)
        a = s32.run(None, {name: x})[0]
        got = {"onnxruntime": sq.run(None, {name: x})[0], "smelt": next(iter(smelt(q, {name: f}).values()))}
        for k, b in got.items():
            same = int(a.argmax() == b.argmax())
            agree[k][0] += same
            agree[k][1] += same if held and i >= held else 0
            cosines[k].append(cos(a, b))
    n = len(files)
    for k in agree:
        line = f"{k}: top-1 agreement with fp32 {agree[k][0]}/{n}, output cosine min {min(cosines[k]):.5f} mean {np.mean(cosines[k]):.5f}"
        if held:
            line += f", on the {n - held} not calibrated on {agree[k][1]}/{n - held}"
        print(line)


def minilm(f32, q, folder):
    paths = {"input_ids": os.path.join(folder, "input_0.npy"), "attention_mask": os.path.join(folder, "input_1.npy")}
    feeds = {k: np.load(v) for k, v in paths.items()}
    s32, sq = session(f32), session(q)
    a = dict(zip([o.name for o in s32.get_outputs()], s32.run(None, feeds)))
    b = dict(zip([o.name for o in sq.get_outputs()], sq.run(None, feeds)))
    c = smelt(q, paths)
    for name, x in a.items():
        if x.dtype != np.float32:
            continue
        z = c[name.replace("/", "_").replace(":", "_")]
        rows = min(cos(r1, r2) for r1, r2 in zip(x.reshape(-1, x.shape[-1]), z.reshape(-1, z.shape[-1])))
        print(f"{name} {x.shape}: cosine to fp32 onnxruntime {cos(x, b[name]):.5f}, smelt {cos(x, z):.5f} (worst row {rows:.5f})")


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    if kind == "images":
        images(rest[0], rest[1], rest[2], int(rest[3]) if len(rest) > 3 else 0)
    else:
        minilm(*rest[:3])
