"""How closely smelt follows onnxruntime on a QDQ model onnxruntime's own quantizer wrote:
for each float output that a DequantizeLinear produces, the share of elements within one
quantization step (that DequantizeLinear's scale) of onnxruntime's, and the largest
difference in steps. Run with the peers' venv (onnxruntime, onnx, numpy):

    $P scripts/qdq_agreement.py MODEL.qdq.onnx DIR [--opt none|all]

DIR holds the inputs: one .npy per sample for a one-input model (the ResNet-50
photographs of scripts/make_calibration_images.py), or s*/input_<i>.npy folders (the
MiniLM sentences of scripts/make_calibration_sentences.py). onnxruntime runs with its
default graph optimizations (`--opt all`, the way it is deployed) or with none (`--opt
none`: QDQ's float semantics, op by op). smelt is target/release/smelt, or $SMELT.
"""

import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from int8_accuracy import smelt  # noqa: E402


def output_steps(path):
    """Each graph output's quantization step: the scale of the DequantizeLinear making it."""
    m = onnx.load(path, load_external_data=False)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    made = {o: n for n in m.graph.node for o in n.output}
    steps = {}
    for out in m.graph.output:
        n = made.get(out.name)
        if n is not None and n.op_type == "DequantizeLinear" and n.input[1] in inits:
            steps[out.name] = float(np.max(inits[n.input[1]]))
    return steps


def samples(folder, names):
    dirs = sorted(glob.glob(os.path.join(folder, "s*")))
    if dirs:
        return [{n: os.path.join(d, f"input_{i}.npy") for i, n in enumerate(names)} for d in dirs]
    return [{names[0]: f} for f in sorted(glob.glob(os.path.join(folder, "*.npy")))]


def main():
    model, folder, *rest = sys.argv[1:]
    opt = rest[rest.index("--opt") + 1] if "--opt" in rest else "all"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    if opt == "none":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    steps = output_steps(model)
    within, total, worst = {}, {}, {}
    for feed in samples(folder, names):
        want = dict(zip([o.name for o in s.get_outputs()], s.run(None, {k: np.load(v) for k, v in feed.items()})))
        got = smelt(model, feed)
        for name, step in steps.items():
            d = np.abs(got[name.replace("/", "_").replace(":", "_")].astype(np.float64) - want[name]) / step
            within[name] = within.get(name, 0) + int((d <= 1.0 + 1e-3).sum())
            total[name] = total.get(name, 0) + d.size
            worst[name] = max(worst.get(name, 0.0), float(d.max()))
    for name in steps:
        print(
            f"{name}: {within[name]}/{total[name]} elements ({100 * within[name] / total[name]:.3f}%) within one step "
            f"({steps[name]:.6g}) of onnxruntime (opt {opt}), largest {worst[name]:.2f} steps"
        )


main()
