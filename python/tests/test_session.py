"""smelt.InferenceSession against onnxruntime.InferenceSession on the same model: what a
session reports (inputs, outputs, metadata, providers), runs, options, profiling, outputs
handed over without copies, and runs from many threads."""

import json
import os
import threading

import numpy as np
import onnxruntime as ort
import pytest

import smelt
from conftest import ATOL, RTOL


def sig(args):
    return [(a.name, a.type, a.shape) for a in args]


def test_signature_and_metadata_match_onnxruntime(mlp_path):
    s, o = smelt.InferenceSession(mlp_path), ort.InferenceSession(mlp_path)
    assert sig(s.get_inputs()) == sig(o.get_inputs())
    assert sig(s.get_outputs()) == sig(o.get_outputs())
    sm, om = s.get_modelmeta(), o.get_modelmeta()
    for field in ["producer_name", "graph_name", "graph_description", "domain", "description",
                  "version", "custom_metadata_map"]:
        assert getattr(sm, field) == getattr(om, field), field
    assert repr(s.get_inputs()[0]) == "NodeArg(name='x', type='tensor(float)', shape=['batch', 16])"


def test_providers(mlp_path):
    assert smelt.get_available_providers() == ["CPUExecutionProvider"]
    assert set(smelt.get_all_providers()) >= set(ort.get_all_providers())
    s = smelt.InferenceSession(mlp_path, providers=["CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert s.get_provider_options() == {"CPUExecutionProvider": {}}
    s = smelt.InferenceSession(mlp_path, providers=[("CPUExecutionProvider", {"arena": "1"})])
    assert s.get_provider_options() == {"CPUExecutionProvider": {"arena": "1"}}
    # A provider onnxruntime knows but smelt has no target for: warned about and skipped.
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        s = smelt.InferenceSession(mlp_path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(ValueError, match="FooExecutionProvider"):
        smelt.InferenceSession(mlp_path, providers=["FooExecutionProvider"])


def test_run_matches_onnxruntime(mlp_path, mlp_x):
    s, o = smelt.InferenceSession(mlp_path), ort.InferenceSession(mlp_path)
    for feed in [{"x": mlp_x}, {"x": mlp_x[:1]}, {"x": np.tile(mlp_x, (4, 1))}]:
        (a,), (b,) = s.run(None, feed), o.run(None, feed)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    assert len(s.run(["y"], {"x": mlp_x})) == 1
    assert len(s.run(["y", "y"], {"x": mlp_x})) == 2
    # Lists and non-contiguous arrays are taken, as onnxruntime takes them.
    want = o.run(None, {"x": mlp_x})[0]
    np.testing.assert_allclose(s.run(None, {"x": mlp_x.tolist()})[0], want, rtol=RTOL, atol=ATOL)
    f = np.asfortranarray(mlp_x)
    np.testing.assert_allclose(s.run(None, {"x": f})[0], o.run(None, {"x": f})[0], rtol=RTOL, atol=ATOL)
    strided = np.tile(mlp_x, (3, 2))[::2, ::2]  # a view with steps, not contiguous
    np.testing.assert_allclose(s.run(None, {"x": strided})[0], o.run(None, {"x": strided})[0], rtol=RTOL, atol=ATOL)
    assert s.run(None, {"x": mlp_x}, smelt.RunOptions())[0].shape == (2, 4)


def test_bytes_and_pathlike(mlp_path, mlp_x):
    import pathlib

    with open(mlp_path, "rb") as f:
        data = f.read()
    a = smelt.InferenceSession(data).run(None, {"x": mlp_x})[0]
    b = smelt.InferenceSession(pathlib.Path(mlp_path)).run(None, {"x": mlp_x})[0]
    np.testing.assert_array_equal(a, b)


def test_outputs_are_not_copied(mlp_path, mlp_x):
    y = smelt.InferenceSession(mlp_path).run(None, {"x": mlp_x})[0]
    # The array views the buffer smelt computed into (owned by a base object), writable.
    assert not y.flags["OWNDATA"] and y.base is not None and y.flags["WRITEABLE"]
    assert y.flags["C_CONTIGUOUS"]


def test_session_options(mlp_path, mlp_x):
    want = ort.InferenceSession(mlp_path).run(None, {"x": mlp_x})[0]
    for level in smelt.GraphOptimizationLevel:
        so = smelt.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = smelt.ExecutionMode.ORT_SEQUENTIAL
        so.add_session_config_entry("session.x", "1")
        got = smelt.InferenceSession(mlp_path, sess_options=so).run(None, {"x": mlp_x})[0]
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert set(smelt.GraphOptimizationLevel.__members__) == set(ort.GraphOptimizationLevel.__members__)
    so = smelt.SessionOptions()
    so.add_free_dimension_override_by_name("batch", 2)
    s = smelt.InferenceSession(mlp_path, sess_options=so)
    assert len(s.compilations()) == 1  # compiled at load for batch 2
    s.run(None, {"x": mlp_x})
    assert len(s.compilations()) == 1


def test_precision_config_entry(mlp_path, mlp_x):
    want = ort.InferenceSession(mlp_path).run(None, {"x": mlp_x})[0]
    for precision in ["fp32", "bf16", "fp16", "int8"]:
        so = smelt.SessionOptions()
        so.add_session_config_entry("smelt.precision", precision)
        got = smelt.InferenceSession(mlp_path, sess_options=so).run(None, {"x": mlp_x})[0]
        # Softmax outputs: int8 (the first layer's weights and activations) moves them most.
        np.testing.assert_allclose(got, want, atol=0.05)
        if precision == "int8":
            assert np.abs(got - want).max() > 1e-4  # the first product did run in int8
    so = smelt.SessionOptions()
    so.add_session_config_entry("smelt.precision", "int4")
    with pytest.raises(smelt.InvalidArgument, match="int4"):
        smelt.InferenceSession(mlp_path, sess_options=so)


def test_profiling_writes_a_chrome_trace(mlp_path, mlp_x, tmp_path):
    so = smelt.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    s = smelt.InferenceSession(mlp_path, sess_options=so)
    for _ in range(3):
        s.run(None, {"x": mlp_x})
    path = s.end_profiling()
    assert os.path.exists(path)
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    assert events and {e["args"]["run"] for e in events} == {0, 1, 2}
    assert any("fc1_matmul" in e["args"]["onnx_nodes"] for e in events)
    assert smelt.InferenceSession(mlp_path).end_profiling() == ""


def test_many_threads(mlp_path):
    s = smelt.InferenceSession(mlp_path)
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((1 + i % 5, 16), dtype=np.float32) for i in range(16)]
    want = [s.run(None, {"x": x})[0] for x in feeds]
    errors = []

    def work():
        try:
            for _ in range(50):
                for x, w in zip(feeds, want):
                    np.testing.assert_array_equal(s.run(None, {"x": x})[0], w)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_gil_is_released_while_running(mlp_path):
    """Another Python thread makes progress while runs are in flight."""
    s = smelt.InferenceSession(mlp_path)
    x = np.ones((4096, 16), np.float32)
    stop, ticks = threading.Event(), [0]

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    before = ticks[0]
    for _ in range(20):
        s.run(None, {"x": x})
    stop.set()
    t.join()
    assert ticks[0] > before


def test_import_alias_runs_an_onnxruntime_script(mlp_path, mlp_x):
    """The pattern of an onnxruntime script, with only the module changed."""

    def script(rt):
        sess = rt.InferenceSession(mlp_path, providers=["CPUExecutionProvider"])
        feed = {i.name: mlp_x for i in sess.get_inputs()}
        return sess.run(None, feed)

    np.testing.assert_allclose(script(smelt)[0], script(ort)[0], rtol=RTOL, atol=ATOL)
