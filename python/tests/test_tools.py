"""smelt.explain, smelt.bench and smelt.compile from Python."""

import numpy as np
import pytest

import smelt


def test_explain(mlp_path):
    r = smelt.explain(mlp_path, shapes={"x": [2, 16]})
    assert r["execution"] == "kernels"
    assert r["kernel_count"] == len(r["groups"]) > 0
    assert any("fc1_matmul" in g["nodes"] for g in r["groups"])
    assert r["passes"] and r["compilations"][0]["reason"]
    assert r["memory"]["arena_bytes"] >= 0
    # A session that has run explains its latest plan.
    s = smelt.InferenceSession(mlp_path)
    s.run(None, {"x": np.ones((3, 16), np.float32)})
    assert smelt.explain(s)["compilations"][-1]["shapes"] == {"x": "[3,16]"}


def test_explain_names_a_missing_shape(mlp_path):
    with pytest.raises(smelt.InvalidArgument, match="'x'"):
        smelt.explain(mlp_path)


def test_bench(mlp_path, mlp_x):
    r = smelt.bench(mlp_path, {"x": mlp_x}, iterations=200, warmup=2)
    assert r["smelt"]["iterations"] == 200
    assert r["smelt"]["latency_ms"]["p50"] > 0
    assert "smelt" in r["table"]
    r = smelt.bench(mlp_path, shapes={"x": [1, 16]}, iterations=50, vs=["onnxruntime"])
    assert "onnxruntime" in r["table"] and r["baseline"]["onnxruntime"]["iterations"] == 50


def test_compile_is_not_there_yet():
    with pytest.raises(NotImplementedError, match="artifact"):
        smelt.compile("model.onnx")
