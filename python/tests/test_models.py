"""The public models (scripts/fetch-test-data.sh): an onnxruntime script, its module
swapped for smelt, gives onnxruntime's outputs within rtol 1e-3, atol 1e-4, and both agree
on the signature it reads."""

import numpy as np
import onnxruntime
import pytest

import smelt
from conftest import ATOL, RTOL, data_set, public_models

MODELS = public_models()


def script(rt, path, inputs):
    """What an onnxruntime user writes: a session, a feed built from get_inputs(), run."""
    sess = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {}
    for i, arg in enumerate(sess.get_inputs()):
        feed[arg.name] = inputs[i]
    outputs = sess.run(None, feed)
    return outputs, [(a.name, a.type, a.shape) for a in sess.get_inputs()]


@pytest.mark.skipif(not MODELS, reason="no test data (run scripts/fetch-test-data.sh)")
@pytest.mark.parametrize("name", MODELS)
def test_public_model(name):
    path, inputs, expected = data_set(name)
    got, sig = script(smelt, path, inputs)
    want, want_sig = script(onnxruntime, path, inputs)
    assert sig == want_sig
    assert len(got) == len(want) == len(expected)
    for g, w, e in zip(got, want, expected):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)
