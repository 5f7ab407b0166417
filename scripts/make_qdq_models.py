"""QDQ int8 copies of the public test models, as onnxruntime's static quantizer writes them,
for measuring smelt's integer kernels against onnxruntime on the same files.

Run with the peers' venv (onnxruntime and onnx; ../shared/tools/speed-table.sh makes it):

    $SMELT_CACHE/peers-venv/bin/python scripts/make_qdq_models.py [OUT_DIR]

Writes OUT_DIR/resnet50.qdq.onnx and OUT_DIR/minilm-b8.qdq.onnx (default
$SMELT_CACHE/data/qdq) from $SMELT_CACHE/data/models/<case>/model.onnx: opset 13 or later,
onnxruntime's pre-processing, then `quantize_static` with QDQ nodes, per-channel int8
weights, u8 activations and MinMax calibration on four seeded random batches (random
calibration: fit for speed and for checking smelt against onnxruntime, not for accuracy).
Also OUT_DIR/<case>.f32.onnx (the float model at opset 13 or later, what `smelt quantize
--per-channel` takes) and $SMELT_CACHE/data/calibration/minilm-b8/s<k>/input_<i>.npy,
those seeded batches as `smelt quantize --calibrate` reads them (real sentences for
MiniLM: scripts/make_calibration_sentences.py).
"""

import os
import sys

import numpy as np
import onnx
from onnx import version_converter
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

CACHE = os.environ.get("SMELT_CACHE", os.path.expanduser("~/.cache/smelt"))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CACHE, "data", "qdq")


class Batches(CalibrationDataReader):
    """Four seeded random batches shaped like the model's inputs."""

    def __init__(self, inputs, case):
        self.inputs, self.case, self.n = inputs, case, 0
        self.rng = np.random.default_rng(0)

    def get_next(self):
        if self.n >= 4:
            return None
        self.n += 1
        feed = {}
        for i in self.inputs:
            shape = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
            if self.case.startswith("minilm"):
                shape = [8, 128]
                ids = self.rng.integers(100, 20000, shape) if "ids" in i.name else np.ones(shape)
                feed[i.name] = ids.astype(np.int64)
            else:
                feed[i.name] = self.rng.standard_normal(shape).astype(np.float32)
        return feed


def quantize(case, src):
    os.makedirs(OUT, exist_ok=True)
    m = onnx.load(src)
    if max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) < 13:
        m = version_converter.convert_version(m, 13)
    f32 = os.path.join(OUT, f"{case}.f32.onnx")
    onnx.save(m, f32)
    pre = os.path.join(OUT, f"{case}.pre.onnx")
    quant_pre_process(f32, pre, skip_symbolic_shape=True)
    inits = {t.name for t in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    dst = os.path.join(OUT, f"{case}.qdq.onnx")
    quantize_static(
        pre,
        dst,
        Batches(inputs, case),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    print(dst)


def minilm_calibration():
    """The seeded MiniLM batches as smelt quantize's calibration folder."""
    model = onnx.load(os.path.join(CACHE, "data", "models", "minilm-b8", "model.onnx"))
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    reader = Batches(inputs, "minilm-b8")
    root = os.path.join(CACHE, "data", "calibration", "minilm-b8")
    k = 0
    while (feed := reader.get_next()) is not None:
        d = os.path.join(root, f"s{k}")
        os.makedirs(d, exist_ok=True)
        for i, inp in enumerate(inputs):
            np.save(os.path.join(d, f"input_{i}.npy"), feed[inp.name])
        k += 1
    print(root)


minilm_calibration()
for case in ("resnet50", "minilm-b8"):
    quantize(case, os.path.join(CACHE, "data", "models", case, "model.onnx"))
