"""How far an int8 (QDQ) model is from its float model, for smelt and onnxruntime on the
same int8 file. Run with the peers' venv (onnxruntime, numpy):

    $P scripts/int8_accuracy.py images F32.onnx INT8.onnx DIR [HELD]
        top-1 agreement with fp32 and output cosine over every DIR/*.npy (one image
        each); with HELD, also over the files after the first HELD (sorted), for a model
        calibrated on `smelt quantize --limit HELD`.
    $P scripts/int8_accuracy.py minilm F32.onnx INT8.onnx DIR
        cosine to fp32 of each f32 output's rows (sentences; real tokens, by the
        attention mask), mean and worst, over DIR/input_0.npy (input_ids) and
        DIR/input_1.npy (attention_mask), or over each DIR/s*/ holding such a pair
        (scripts/make_calibration_sentences.py writes them).

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
    """Cosine to fp32 per sentence (rows of the pooled embedding) and per real token (rows of
    the hidden states where the attention mask is 1), over every batch under `folder`."""
    dirs = sorted(glob.glob(os.path.join(folder, "s*"))) or [folder]
    s32, sq = session(f32), session(q)
    names = [o.name for o in s32.get_outputs()]
    rows = {}
    for d in dirs:
        paths = {"input_ids": os.path.join(d, "input_0.npy"), "attention_mask": os.path.join(d, "input_1.npy")}
        feeds = {k: np.load(v) for k, v in paths.items()}
        mask = feeds["attention_mask"].astype(bool)
        a = dict(zip(names, s32.run(None, feeds)))
        got = {"onnxruntime": dict(zip(names, sq.run(None, feeds))), "smelt": smelt(q, paths)}
        for name, x in a.items():
            if x.dtype != np.float32:
                continue
            keep = mask if x.ndim == 3 else np.ones(x.shape[0], bool)
            for k, outs in got.items():
                z = outs[name] if k == "onnxruntime" else outs[name.replace("/", "_").replace(":", "_")]
                rows.setdefault((name, x.shape[1:], k), []).extend(cos(r1, r2) for r1, r2 in zip(x[keep], z[keep]))
    for (name, shape, k), c in rows.items():
        print(f"{name} {list(shape)} {k}: {len(c)} rows over {len(dirs)} batches, cosine to fp32 mean {np.mean(c):.5f} worst {min(c):.5f}")


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    if kind == "images":
        images(rest[0], rest[1], rest[2], int(rest[3]) if len(rest) > 3 else 0)
    else:
        minilm(*rest[:3])
