"""Recurrent, control-flow and data-dependent test cases with onnxruntime's outputs,
written to DATA/dynamic/<case>/:

    python scripts/make_dynamic_data.py --out ~/.cache/smelt/data/dynamic \
        --models ~/.cache/smelt/data/models

- lstm-b1, lstm-b8: one LSTM layer (seq 128, input 256, hidden 256, batch 1 and 8), weights
  as initializers.
- voice-16k, voice-8k: a streaming voice-activity style model: an If on the sample rate
  picks one of two stacks (two strided Conv1d + ReLU, an LSTM of hidden 64, a linear
  head with a sigmoid) over a 512-sample chunk, with the LSTM state carried in and out.
  The two cases feed the one model 16000 and 8000.
- yolov8n-nms: the models suite's YOLOv8n (320x320) followed by NonMaxSuppression over its
  boxes and class scores; nms: that NonMaxSuppression alone, on the detector's output.
- gru-b1, gru-b8: one GRU layer (seq 128, input 256, hidden 256, linear_before_reset as
  PyTorch exports it), batch 1 and 8; rnn-b8: one tanh RNN layer, the same sizes, batch 8.
"""
import argparse
import os
import shutil

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)


def weight(shape, fan_in):
    s = 1.0 / np.sqrt(fan_in)
    return RNG.uniform(-s, s, shape).astype(np.float32)


def model_of(graph):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def lstm_model(seq, batch, inp, hidden):
    inits = [
        numpy_helper.from_array(weight((1, 4 * hidden, inp), hidden), "W"),
        numpy_helper.from_array(weight((1, 4 * hidden, hidden), hidden), "R"),
        numpy_helper.from_array(weight((1, 8 * hidden), hidden), "B"),
    ]
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden)
    f = TensorProto.FLOAT
    return model_of(helper.make_graph(
        [node], "lstm",
        [helper.make_tensor_value_info("x", f, [seq, batch, inp])],
        [helper.make_tensor_value_info("y", f, [seq, 1, batch, hidden]),
         helper.make_tensor_value_info("y_h", f, [1, batch, hidden]),
         helper.make_tensor_value_info("y_c", f, [1, batch, hidden])],
        inits))


def rnn_model(op, seq, batch, inp, hidden, **attrs):
    """One GRU or RNN layer with its weights as initializers."""
    g = {"GRU": 3, "RNN": 1}[op]
    inits = [
        numpy_helper.from_array(weight((1, g * hidden, inp), hidden), "W"),
        numpy_helper.from_array(weight((1, g * hidden, hidden), hidden), "R"),
        numpy_helper.from_array(weight((1, 2 * g * hidden), hidden), "B"),
    ]
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=hidden, **attrs)
    f = TensorProto.FLOAT
    return model_of(helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("x", f, [seq, batch, inp])],
        [helper.make_tensor_value_info("y", f, [seq, 1, batch, hidden]),
         helper.make_tensor_value_info("y_h", f, [1, batch, hidden])],
        inits))


def voice_branch(tag, k1, s1, k2, s2, hidden=64):
    """Conv1d(1->16) ReLU Conv1d(16->32) ReLU, LSTM over time, linear + sigmoid."""
    n = lambda s: f"{tag}_{s}"
    inits = [
        numpy_helper.from_array(weight((16, 1, k1), k1), n("w1")),
        numpy_helper.from_array(weight((16,), k1), n("b1")),
        numpy_helper.from_array(weight((32, 16, k2), 16 * k2), n("w2")),
        numpy_helper.from_array(weight((32,), 16 * k2), n("b2")),
        numpy_helper.from_array(weight((1, 4 * hidden, 32), hidden), n("W")),
        numpy_helper.from_array(weight((1, 4 * hidden, hidden), hidden), n("R")),
        numpy_helper.from_array(weight((1, 8 * hidden), hidden), n("B")),
        numpy_helper.from_array(weight((hidden, 1), hidden), n("wo")),
        numpy_helper.from_array(weight((1,), hidden), n("bo")),
        numpy_helper.from_array(np.array([0], np.int64), n("axis0")),
    ]
    nodes = [
        helper.make_node("Conv", ["chunk", n("w1"), n("b1")], [n("c1")], strides=[s1]),
        helper.make_node("Relu", [n("c1")], [n("r1")]),
        helper.make_node("Conv", [n("r1"), n("w2"), n("b2")], [n("c2")], strides=[s2]),
        helper.make_node("Relu", [n("c2")], [n("r2")]),
        helper.make_node("Transpose", [n("r2")], [n("seq")], perm=[2, 0, 1]),
        helper.make_node("LSTM", [n("seq"), n("W"), n("R"), n("B"), "", "h", "c"],
                         ["", n("h_out"), n("c_out")], hidden_size=hidden),
        helper.make_node("Squeeze", [n("h_out"), n("axis0")], [n("last")]),
        helper.make_node("MatMul", [n("last"), n("wo")], [n("logit")]),
        helper.make_node("Add", [n("logit"), n("bo")], [n("logit_b")]),
        helper.make_node("Sigmoid", [n("logit_b")], [n("prob")]),
    ]
    f = TensorProto.FLOAT
    return helper.make_graph(
        nodes, tag, [],
        [helper.make_tensor_value_info(n("prob"), f, [1, 1]),
         helper.make_tensor_value_info(n("h_out"), f, [1, 1, hidden]),
         helper.make_tensor_value_info(n("c_out"), f, [1, 1, hidden])],
        inits)


def voice_model(hidden=64):
    f = TensorProto.FLOAT
    inits = [
        numpy_helper.from_array(np.array([16000], np.int64), "sr16k"),
        numpy_helper.from_array(np.array([1, 1, 512], np.int64), "chunk_shape"),
    ]
    nodes = [
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
        helper.make_node("Reshape", ["audio", "chunk_shape"], ["chunk"]),
        helper.make_node("If", ["is16k"], ["prob", "h_next", "c_next"],
                         then_branch=voice_branch("k16", 8, 4, 4, 2, hidden),
                         else_branch=voice_branch("k8", 4, 2, 4, 4, hidden)),
    ]
    return model_of(helper.make_graph(
        nodes, "voice",
        [helper.make_tensor_value_info("audio", f, [1, 512]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("h", f, [1, 1, hidden]),
         helper.make_tensor_value_info("c", f, [1, 1, hidden])],
        [helper.make_tensor_value_info("prob", f, [1, 1]),
         helper.make_tensor_value_info("h_next", f, [1, 1, hidden]),
         helper.make_tensor_value_info("c_next", f, [1, 1, hidden])],
        inits))


def yolo_nms(models_dir):
    """The detector with NMS appended, and the NMS alone; the detector's input."""
    yolo = onnx.load(os.path.join(models_dir, "yolov8n", "model.onnx"))
    g = yolo.graph
    out = g.output[0].name
    ints = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    floats = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
    consts = [ints("nms_b0", [0]), ints("nms_b1", [4]), ints("nms_c1", [22]), ints("nms_axis", [1]),
              ints("nms_max", [20]), floats("nms_iou", [0.5]), floats("nms_score", [0.0001])]
    nodes = [
        helper.make_node("Slice", [out, "nms_b0", "nms_b1", "nms_axis"], ["nms_boxes_t"]),
        helper.make_node("Transpose", ["nms_boxes_t"], ["nms_boxes"], perm=[0, 2, 1]),
        helper.make_node("Slice", [out, "nms_b1", "nms_c1", "nms_axis"], ["nms_scores"]),
        helper.make_node("NonMaxSuppression", ["nms_boxes", "nms_scores", "nms_max", "nms_iou",
                                               "nms_score"], ["selected"], center_point_box=1),
    ]
    f = TensorProto.FLOAT
    image = helper.make_tensor_value_info(g.input[0].name, f, [1, 3, 320, 320])
    det = helper.make_graph(
        list(g.node) + nodes, "yolov8n_nms", [image],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["k", 3])],
        list(g.initializer) + consts)
    det_model = helper.make_model(det, opset_imports=list(yolo.opset_import))
    det_model.ir_version = yolo.ir_version
    nms = helper.make_graph(
        nodes, "nms", [helper.make_tensor_value_info(out, f, [1, 22, 2100])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["k", 3])], consts)
    nms_model = model_of(nms)
    return det_model, nms_model, yolo


def write_case(out, name, model, feeds):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    for j, i in enumerate(model.graph.input):
        with open(os.path.join(d, "test_data_set_0", f"input_{j}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(feeds[i.name], i.name).SerializeToString())
    for j, (o, v) in enumerate(zip(model.graph.output, outs)):
        with open(os.path.join(d, "test_data_set_0", f"output_{j}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(v, o.name).SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", required=True, help="the models suite (for yolov8n)")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    work = out + ".tmp"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(11)
    for batch in (1, 8):
        write_case(work, f"lstm-b{batch}", lstm_model(128, batch, 256, 256),
                   {"x": rng.standard_normal((128, batch, 256)).astype(np.float32)})
    voice = voice_model()
    for sr in (16000, 8000):
        write_case(work, f"voice-{sr // 1000}k", voice, {
            "audio": (0.1 * rng.standard_normal((1, 512))).astype(np.float32),
            "sr": np.array([sr], np.int64),
            "h": (0.1 * rng.standard_normal((1, 1, 64))).astype(np.float32),
            "c": (0.1 * rng.standard_normal((1, 1, 64))).astype(np.float32),
        })
    det, nms, yolo = yolo_nms(args.models)
    image = np.random.default_rng(3008).random((1, 3, 320, 320), dtype=np.float32)
    write_case(work, "yolov8n-nms", det, {det.graph.input[0].name: image})
    raw = onnxruntime.InferenceSession(yolo.SerializeToString(), providers=["CPUExecutionProvider"])
    detections = raw.run(None, {det.graph.input[0].name: image})[0]
    write_case(work, "nms", nms, {nms.graph.input[0].name: detections})
    for batch in (1, 8):
        write_case(work, f"gru-b{batch}",
                   rnn_model("GRU", 128, batch, 256, 256, linear_before_reset=1),
                   {"x": rng.standard_normal((128, batch, 256)).astype(np.float32)})
    write_case(work, "rnn-b8", rnn_model("RNN", 128, 8, 256, 256),
               {"x": rng.standard_normal((128, 8, 256)).astype(np.float32)})
    with open(os.path.join(work, "VERSION"), "w") as fh:
        fh.write(f"onnx {onnx.__version__} onnxruntime {onnxruntime.__version__}\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(work, out)


if __name__ == "__main__":
    main()
