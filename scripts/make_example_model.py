#!/usr/bin/env python3
"""Build a tiny example ONNX model (2-layer MLP) for smelt's docs and smoke tests.

    python scripts/make_example_model.py OUT.onnx [SAMPLE_INPUT.npy]

Graph (opset 17, IR version 8):
    x: float32[batch, 16]
    h = Relu(MatMul(x, W1[16, 32]) + b1[32])
    y = Softmax(MatMul(h, W2[32, 4]) + b2[4], axis=-1)   -> y: float32[batch, 4]
Weights are fixed (seeded), so the file is byte-for-byte reproducible.
If a second path is given, a sample input x of shape [2, 16] is saved there
with numpy.save (needs numpy; use the venv from scripts/fetch-test-data.sh).
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IN, HIDDEN, OUT = 16, 32, 4


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(17)
    w1 = (rng.standard_normal((IN, HIDDEN)) * np.sqrt(2.0 / IN)).astype(np.float32)
    b1 = (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, OUT)) * np.sqrt(1.0 / HIDDEN)).astype(np.float32)
    b2 = (rng.standard_normal(OUT) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["mm1"], name="fc1_matmul"),
        helper.make_node("Add", ["mm1", "b1"], ["fc1"], name="fc1_add"),
        helper.make_node("Relu", ["fc1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "W2"], ["mm2"], name="fc2_matmul"),
        helper.make_node("Add", ["mm2", "b2"], ["logits"], name="fc2_add"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "smelt_example_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", OUT])],
        initializer=[
            numpy_helper.from_array(w1, "W1"),
            numpy_helper.from_array(b1, "b1"),
            numpy_helper.from_array(w2, "W2"),
            numpy_helper.from_array(b2, "b2"),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="smelt-make_example_model",
        ir_version=8,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    model = build()
    for path in argv[1:]:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    onnx.save(model, argv[1])
    if len(argv) == 3:
        x = np.random.default_rng(18).standard_normal((2, IN)).astype(np.float32)
        np.save(argv[2], x)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
