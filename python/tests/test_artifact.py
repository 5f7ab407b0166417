"""smelt.InferenceSession on a compiled artifact (`smelt compile MODEL -o model.smelt`)."""

import os
import subprocess

import numpy as np
import pytest

import smelt

from conftest import ROOT


def smelt_cli() -> str:
    """The command line that writes artifacts: $SMELT_CLI, else the workspace's release build
    (scripts/test-python.sh builds it)."""
    path = os.environ.get("SMELT_CLI") or os.path.join(ROOT, "target", "release", "smelt")
    assert os.access(path, os.X_OK), f"no smelt command line at {path} (set SMELT_CLI)"
    return path


@pytest.fixture
def mlp_artifact(tmp_path, mlp_path, mlp_x):
    out = tmp_path / "mlp.smelt"
    dims = "x".join(str(d) for d in mlp_x.shape)
    subprocess.run(
        [smelt_cli(), "compile", mlp_path, "--shape", f"x={dims}", "-o", str(out)],
        check=True,
        capture_output=True,
    )
    return str(out)


def test_artifact_runs_like_the_onnx_model(mlp_artifact, mlp_path, mlp_x):
    art = smelt.InferenceSession(mlp_artifact)
    jit = smelt.InferenceSession(mlp_path)
    assert [i.name for i in art.get_inputs()] == [i.name for i in jit.get_inputs()]
    assert art.get_inputs()[0].type == "tensor(float)"
    assert art.get_inputs()[0].shape == list(mlp_x.shape)
    assert [o.name for o in art.get_outputs()] == [o.name for o in jit.get_outputs()]
    (got,) = art.run(None, {"x": mlp_x})
    (want,) = jit.run(None, {"x": mlp_x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_artifact_refuses_another_shape(mlp_artifact, mlp_x):
    art = smelt.InferenceSession(mlp_artifact)
    wider = np.concatenate([mlp_x, mlp_x], axis=0)
    with pytest.raises(smelt.SmeltError):
        art.run(None, {"x": wider})


def test_a_damaged_artifact_is_a_clear_error(mlp_artifact, tmp_path):
    data = bytearray(open(mlp_artifact, "rb").read())
    bad = tmp_path / "bad.smelt"
    bad.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(smelt.SmeltError, match="bad.smelt"):
        smelt.InferenceSession(str(bad))
