"""smelt.explain (what the compiler did), smelt.bench (the benchmark harness) and
smelt.compile (the ahead-of-time artifact, not done yet) from Python."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Iterable, Optional

import numpy as np

from . import _smelt
from ._session import InferenceSession, SessionOptions

__all__ = ["bench", "compile", "explain"]


def _session(model: Any, sess_options: Optional[SessionOptions]) -> InferenceSession:
    if isinstance(model, InferenceSession):
        return model
    return InferenceSession(model, sess_options=sess_options)


def _label(model: Any) -> str:
    if isinstance(model, InferenceSession):
        return model._model_path or "<bytes>"
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    return "<bytes>"


def explain(
    model: Any,
    shapes: Optional[Dict[str, Iterable[int]]] = None,
    sess_options: Optional[SessionOptions] = None,
) -> Dict[str, Any]:
    """What smelt's compiler did to ``model`` (a path, bytes or an InferenceSession) at the
    given input shapes (needed for inputs with named dims, unless the session has run):
    each pass, the compilations and their reasons, the kernel groups with their source
    nodes, the fusions refused and why, the memory plan. The same report as
    ``smelt explain MODEL --json``, as a dict."""
    sess = _session(model, sess_options)
    shapes = None if shapes is None else {k: [int(d) for d in v] for k, v in shapes.items()}
    return json.loads(sess._sess.explain(_label(model), shapes))


def _random_feed(sess: InferenceSession, shapes: Dict[str, Iterable[int]], seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feed = {}
    for i in sess.get_inputs():
        dims = list(shapes.get(i.name, i.shape))
        if not all(isinstance(d, int) for d in dims):
            raise ValueError(f"input '{i.name}' has shape {i.shape}: give its shape in shapes=")
        t = i.type
        if t == "tensor(float)":
            feed[i.name] = rng.standard_normal(dims, dtype=np.float32)
        elif t == "tensor(double)":
            feed[i.name] = rng.standard_normal(dims)
        elif t in ("tensor(int64)", "tensor(int32)"):
            feed[i.name] = np.zeros(dims, np.int64 if t.endswith("64)") else np.int32)
        elif t == "tensor(bool)":
            feed[i.name] = rng.integers(0, 2, dims).astype(bool)
        else:
            raise ValueError(f"input '{i.name}' is {t}: give a feed")
    return feed


def bench(
    model: Any,
    feed: Optional[Dict[str, Any]] = None,
    *,
    shapes: Optional[Dict[str, Iterable[int]]] = None,
    warmup: int = 3,
    iterations: Optional[int] = None,
    duration: Optional[float] = None,
    vs: Iterable[str] = (),
    sess_options: Optional[SessionOptions] = None,
    seed: int = 0,
    python: Optional[str] = None,
) -> Dict[str, Any]:
    """Benchmarks ``model`` (a path or an InferenceSession) on ``feed`` (random inputs of
    ``shapes`` when None), single-stream: smelt through the Rust API in this process,
    timed in Rust, and each runtime in ``vs`` ('onnxruntime', 'tract', 'openvino') in a
    worker process of ``python`` (default: this interpreter), interleaved on the same
    inputs and threads. ``iterations`` or ``duration`` (seconds, default 10) bound the
    measurement. Returns ``smelt bench --json``'s report as a dict, its terminal table
    under 'table'."""
    sess = _session(model, sess_options)
    feed = feed if feed is not None else _random_feed(sess, shapes or {}, seed)
    vs = list(vs)
    if vs and sess._model_path is None:
        raise ValueError("a baseline runs the model from its file: give a path")
    threads = sess.get_session_options().intra_op_num_threads or _smelt.default_threads()
    with tempfile.TemporaryDirectory(prefix="smelt-bench-") as tmp:
        npy = []
        if vs:
            for j, i in enumerate(sess.get_inputs()):
                if i.name in feed:
                    path = os.path.join(tmp, f"input_{j}.npy")
                    np.save(path, np.asarray(feed[i.name]))
                    npy.append((i.name, path))
        args = {
            "label": _label(model),
            "warmup": int(warmup),
            "iterations": iterations,
            "duration": duration,
            "threads": int(threads),
            "seed": int(seed),
            "vs": vs,
            "model_path": sess._model_path,
            "npy_inputs": npy,
            "python": python or _python(),
            "workdir": tmp,
        }
        report, table = _smelt.bench(sess._sess, feed, _Args(args))
    out = json.loads(report)
    out["table"] = table
    return out


class _Args:
    """Keyword arguments as attributes, as the native benchmark reads them."""

    def __init__(self, d: dict) -> None:
        self.__dict__.update(d)


def _python() -> str:
    import sys

    return sys.executable


def compile(*args: Any, **kwargs: Any) -> None:
    """Writing an ahead-of-time artifact from Python: not available yet. Compile with the
    command line (``smelt compile MODEL -o model.smelt``) and load the file with
    ``smelt.InferenceSession("model.smelt")``."""
    raise NotImplementedError(
        "smelt.compile: write the artifact with the command line (smelt compile MODEL -o "
        "model.smelt); smelt.InferenceSession loads the .smelt file"
    )
