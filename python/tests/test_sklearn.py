"""The scikit-learn suite (scripts/make_sklearn_data.py): string tensors, map inputs
(DictVectorizer) and ZipMap's sequences of maps come out of smelt as they come out of
onnxruntime (lists of dicts, object arrays of str), with the same signatures."""

import glob
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import smelt
from conftest import CACHE

SKLEARN = os.path.join(CACHE, "data", "sklearn")
MODELS = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(SKLEARN, "*", "model.onnx")))


def load_value(path):
    with open(path, "rb") as f:
        data = f.read()
    t = onnx.TensorProto()
    try:
        t.ParseFromString(data)
        if t.dims or t.raw_data or t.float_data or t.int64_data or t.string_data:
            return numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001 - not a tensor: a map
        pass
    m = onnx.MapProto()
    m.ParseFromString(data)
    d = numpy_helper.to_dict(m)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in d.items()}


def same(x, y):
    if isinstance(y, np.ndarray):
        assert isinstance(x, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape
        if x.dtype.kind in "fc":
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
        else:
            assert (x == y).all()
    elif isinstance(y, list):
        assert isinstance(x, list) and len(x) == len(y)
        for i, j in zip(x, y):
            same(i, j)
    elif isinstance(y, dict):
        assert isinstance(x, dict) and list(x) == list(y)
        for k in y:
            assert abs(x[k] - y[k]) <= 1e-6 + 1e-5 * abs(y[k]), k
    else:
        assert x == y


def sig(args):
    return [(a.name, a.type, a.shape) for a in args]


@pytest.mark.skipif(not MODELS, reason="no sklearn data (run scripts/fetch-test-data.sh)")
@pytest.mark.parametrize("name", MODELS)
def test_sklearn_model(name):
    d = os.path.join(SKLEARN, name)
    path = os.path.join(d, "model.onnx")
    s, o = smelt.InferenceSession(path), ort.InferenceSession(path)
    assert sig(s.get_inputs()) == sig(o.get_inputs())
    assert sig(s.get_outputs()) == sig(o.get_outputs())
    files = sorted(glob.glob(os.path.join(d, "test_data_set_0", "input_*.pb")))
    feed = {a.name: load_value(p) for a, p in zip(o.get_inputs(), files)}
    got, want = s.run(None, feed), o.run(None, feed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)
