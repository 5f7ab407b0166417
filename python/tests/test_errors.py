"""Each mistake raises what onnxruntime raises for it: a ValueError for missing inputs,
InvalidArgument for unknown names, wrong element types and shapes, NoSuchFile and
InvalidProtobuf for models that cannot be read, Fail for models that cannot be loaded.
Every case runs against onnxruntime too, and smelt's exception must be an instance of
smelt's class of the same name (smelt's InvalidGraph and NotImplemented derive from Fail,
the class onnxruntime raises for every model it cannot load)."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import smelt
from smelt.capi import onnxruntime_pybind11_state as smelt_state


def outcome(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def assert_same_class(case, smelt_fn, ort_fn, names_input=None):
    se, oe = outcome(smelt_fn), outcome(ort_fn)
    assert oe is not None, f"{case}: onnxruntime accepted it"
    assert se is not None, f"{case}: smelt accepted it (onnxruntime raised {type(oe).__name__})"
    name = type(oe).__name__
    mirror = ValueError if name == "ValueError" else getattr(smelt_state, name)
    assert isinstance(se, mirror), f"{case}: smelt raised {type(se).__name__}, onnxruntime {name}"
    if names_input:
        assert f"'{names_input}'" in str(se), f"{case}: {se}"
    return se


FEED_CASES = [
    ("missing input", lambda x: {}),
    ("unknown input name", lambda x: {"x": x, "z": x}),
    ("float64 for float", lambda x: {"x": x.astype(np.float64)}),
    ("int64 for float", lambda x: {"x": x.astype(np.int64)}),
    ("float16 for float", lambda x: {"x": x.astype(np.float16)}),
    ("bool for float", lambda x: {"x": x > 0}),
    ("rank 3 for rank 2", lambda x: {"x": x[None]}),
    ("rank 1 for rank 2", lambda x: {"x": x[0]}),
    ("wrong fixed dim", lambda x: {"x": np.zeros((2, 5), np.float32)}),
]


@pytest.mark.parametrize("case,feed", FEED_CASES, ids=[c for c, _ in FEED_CASES])
def test_bad_feeds(case, feed, mlp_path, mlp_x):
    s, o = smelt.InferenceSession(mlp_path), ort.InferenceSession(mlp_path)
    named = "z" if "unknown" in case else "x"
    e = assert_same_class(case, lambda: s.run(None, feed(mlp_x)), lambda: o.run(None, feed(mlp_x)), named)
    if not isinstance(e, ValueError):
        assert e.kind == "invalid_input"


def test_unknown_output_name(mlp_path, mlp_x):
    s, o = smelt.InferenceSession(mlp_path), ort.InferenceSession(mlp_path)
    assert_same_class("unknown output", lambda: s.run(["nope"], {"x": mlp_x}),
                      lambda: o.run(["nope"], {"x": mlp_x}), "nope")


def test_unreadable_models(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07 this is not protobuf")
    for case, src in [("missing file", str(tmp_path / "none.onnx")), ("garbage file", str(bad)),
                      ("garbage bytes", b"garbage bytes here")]:
        assert_same_class(case, lambda: smelt.InferenceSession(src), lambda: ort.InferenceSession(src))


def model_bytes(nodes, inputs):
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    g = helper.make_graph(nodes, "g", inputs, [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
Z = helper.make_tensor_value_info("z", TensorProto.INT64, [2])
MODEL_CASES = [
    ("undefined value", [helper.make_node("Add", ["x", "nope"], ["y"])], [X], smelt.InvalidGraph),
    ("unknown op", [helper.make_node("FooBar", ["x"], ["y"])], [X], smelt.NotImplemented),
    ("axis out of range", [helper.make_node("Softmax", ["x"], ["y"], axis=5)], [X], smelt.InvalidGraph),
    ("type mismatch", [helper.make_node("Add", ["x", "z"], ["y"])], [X, Z], smelt.InvalidGraph),
    ("domain not imported", [helper.make_node("Foo", ["x"], ["y"], domain="com.foo")], [X], smelt.InvalidGraph),
]


@pytest.mark.parametrize("case,nodes,inputs,cls", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_invalid_models(case, nodes, inputs, cls):
    data = model_bytes(nodes, inputs)
    feed = {"x": np.ones(2, np.float32), "z": np.ones(2, np.int64)}
    feed = {k: v for k, v in feed.items() if k in [i.name for i in inputs]}

    def run(rt):
        return lambda: rt.InferenceSession(data).run(None, feed)

    e = assert_same_class(case, run(smelt), run(ort))
    assert isinstance(e, cls), f"{case}: {type(e).__name__}"


def test_exception_classes():
    for name in ["Fail", "InvalidArgument", "NoSuchFile", "InvalidProtobuf", "InvalidGraph",
                 "NotImplemented", "RuntimeException"]:
        cls = getattr(smelt, name)
        assert issubclass(cls, smelt.SmeltError) and issubclass(cls, Exception)
        assert getattr(smelt_state, name) is cls
        assert hasattr(ort.capi.onnxruntime_pybind11_state, name)


def test_terminate_fails_the_run(mlp_path, mlp_x):
    ro, oro = smelt.RunOptions(), ort.RunOptions()
    ro.terminate = oro.terminate = True
    s, o = smelt.InferenceSession(mlp_path), ort.InferenceSession(mlp_path)
    assert_same_class("terminate", lambda: s.run(None, {"x": mlp_x}, ro), lambda: o.run(None, {"x": mlp_x}, oro))
