"""Shared fixtures: the repository's example model, the public models fetched by
scripts/fetch-test-data.sh (under ${SMELT_CACHE:-~/.cache/smelt}/data/models), and
onnxruntime as the reference."""

import glob
import os

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MLP = os.path.join(ROOT, "examples", "mlp", "model.onnx")
CACHE = os.environ.get("SMELT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "smelt")
MODELS = os.path.join(CACHE, "data", "models")

RTOL, ATOL = 1e-3, 1e-4


def public_models():
    """Names of the fetched models that have a test data set."""
    return sorted(
        os.path.basename(os.path.dirname(d))
        for d in glob.glob(os.path.join(MODELS, "*", "test_data_set_0"))
    )


def load_pb(path):
    import onnx
    from onnx import numpy_helper

    return numpy_helper.to_array(onnx.load_tensor(path))


def data_set(name):
    """(model path, inputs, expected outputs) of a public model's first data set."""
    d = os.path.join(MODELS, name)
    ds = os.path.join(d, "test_data_set_0")
    ins = [load_pb(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")))]
    outs = [load_pb(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")))]
    return os.path.join(d, "model.onnx"), ins, outs


@pytest.fixture
def mlp_path():
    return MLP


@pytest.fixture
def mlp_x():
    return np.load(os.path.join(ROOT, "examples", "mlp", "x.npy"))
