"""Writes an LSTM layer model (one ONNX LSTM node, weights as initializers) for benchmarks:

    python scripts/make_lstm_model.py OUT.onnx --seq 128 --batch 1 --input 256 --hidden 256
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--bidirectional", action="store_true")
    a = ap.parse_args()
    dirs = 2 if a.bidirectional else 1
    rng = np.random.default_rng(0)
    s = 1.0 / np.sqrt(a.hidden)
    w = rng.uniform(-s, s, (dirs, 4 * a.hidden, a.input)).astype(np.float32)
    r = rng.uniform(-s, s, (dirs, 4 * a.hidden, a.hidden)).astype(np.float32)
    b = rng.uniform(-s, s, (dirs, 8 * a.hidden)).astype(np.float32)
    node = helper.make_node(
        "LSTM",
        ["x", "W", "R", "B"],
        ["y", "y_h", "y_c"],
        hidden_size=a.hidden,
        direction="bidirectional" if a.bidirectional else "forward",
    )
    graph = helper.make_graph(
        [node],
        "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [a.seq, a.batch, a.input])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [a.seq, dirs, a.batch, a.hidden]),
            helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [dirs, a.batch, a.hidden]),
            helper.make_tensor_value_info("y_c", TensorProto.FLOAT, [dirs, a.batch, a.hidden]),
        ],
        [numpy_helper.from_array(t, n) for t, n in [(w, "W"), (r, "R"), (b, "B")]],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, a.out)


if __name__ == "__main__":
    main()
