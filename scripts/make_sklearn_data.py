#!/usr/bin/env python3
"""Generate scikit-learn conformance cases (run via scripts/fetch-test-data.sh).

Trains small scikit-learn models on seeded random data, exports each with skl2onnx (its
default options, so classifiers end in ZipMap), and writes under <out> (default:
$SMELT_CACHE/data/sklearn):

  <case>/model.onnx, <case>/test_data_set_0/{input,output}_J.pb
      Inputs in graph-input order, outputs in graph-output order, computed by
      onnxruntime (the reference). Tensors are TensorProto, sequences SequenceProto,
      maps MapProto (a ZipMap output, a list of dicts, is a SequenceProto of MapProto).
  VERSION
      Versions of everything used.

Written to a sibling temporary folder and swapped in at the end. Needs the packages
of scripts/requirements.txt and scripts/requirements-sklearn.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

# Bump when the layout or contents of the generated data change.
DATA_FORMAT_VERSION = "1"

N_TRAIN = 120
N_TEST = 16
N_FEATURES = 4


def log(msg: str) -> None:
    print(f"[make_sklearn_data] {msg}", flush=True)


def serialize(value, vi: onnx.ValueInfoProto) -> bytes:
    """A value as the .pb file the backend-test format uses for its type."""
    t = vi.type
    if t.HasField("sequence_type"):
        elem = t.sequence_type.elem_type
        if elem.HasField("map_type"):
            seq = onnx.SequenceProto(name=vi.name, elem_type=onnx.SequenceProto.MAP)
            for d in value:
                seq.map_values.append(to_map_proto(d, elem.map_type))
            return seq.SerializeToString()
        return numpy_helper.from_list(list(value), vi.name).SerializeToString()
    if t.HasField("map_type"):
        m = to_map_proto(value, t.map_type)
        m.name = vi.name
        return m.SerializeToString()
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)
    arr = np.asarray(value)
    if dtype == np.dtype(object):
        arr = arr.astype(object)
    else:
        arr = arr.astype(dtype)
    return numpy_helper.from_array(arr, vi.name).SerializeToString()


def to_map_proto(d: dict, map_type) -> onnx.MapProto:
    """A dict as a MapProto of the declared key type, values a sequence of scalars."""
    vt = map_type.value_type.tensor_type.elem_type
    vdtype = onnx.helper.tensor_dtype_to_np_dtype(vt)
    m = onnx.MapProto(key_type=map_type.key_type)
    keys = list(d)
    if map_type.key_type == onnx.TensorProto.STRING:
        m.string_keys.extend(str(k).encode() for k in keys)
    else:
        m.keys.extend(int(k) for k in keys)
    m.values.elem_type = onnx.SequenceProto.TENSOR
    for k in keys:
        m.values.tensor_values.append(numpy_helper.from_array(np.asarray(d[k], dtype=vdtype)))
    return m


def write_case(out_dir: str, name: str, model: onnx.ModelProto, feeds: dict) -> dict:
    import onnxruntime as ort

    case = os.path.join(out_dir, name)
    os.makedirs(os.path.join(case, "test_data_set_0"))
    path = os.path.join(case, "model.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in model.graph.output]
    outs = sess.run(out_names, feeds)
    g = model.graph
    data = os.path.join(case, "test_data_set_0")
    for j, vi in enumerate(g.input):
        with open(os.path.join(data, f"input_{j}.pb"), "wb") as f:
            f.write(serialize(feeds[vi.name], vi))
    for j, (v, vi) in enumerate(zip(outs, g.output)):
        with open(os.path.join(data, f"output_{j}.pb"), "wb") as f:
            f.write(serialize(v, vi))
    ops = sorted({(n.domain or "ai.onnx") + "." + n.op_type for n in g.node})
    return {"ops": ops, "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import}}


def gen(out_dir: str) -> dict:
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import (
        Binarizer,
        LabelEncoder,
        Normalizer,
        OneHotEncoder,
        StandardScaler,
    )
    from sklearn.svm import SVC, SVR
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType

    rng = np.random.default_rng(2024)
    x = rng.standard_normal((N_TRAIN + N_TEST, N_FEATURES)).astype(np.float32)
    w = np.array([1.5, -2.0, 0.5, 1.0], np.float32)
    score = x @ w + 0.3 * rng.standard_normal(N_TRAIN + N_TEST).astype(np.float32)
    y3 = np.digitize(score, [-1.0, 1.0]).astype(np.int64)  # 3 classes
    y2 = (score > 0).astype(np.int64)
    ys = np.array(["low", "mid", "high"])[y3]  # string labels
    yr = (score + 0.1 * x[:, 0] ** 2).astype(np.float32)
    # A categorical fourth column (codes 0..2) for the one-hot pipeline.
    xc = x.copy()
    xc[:, 3] = rng.integers(0, 3, N_TRAIN + N_TEST).astype(np.float32)
    train, test = slice(0, N_TRAIN), slice(N_TRAIN, None)

    cases = [
        ("logreg", LogisticRegression(max_iter=500), x, y3),
        ("logreg_binary", LogisticRegression(max_iter=500), x, y2),
        ("logreg_strings", LogisticRegression(max_iter=500), x, ys),
        ("linear_regression", LinearRegression(), x, yr),
        ("random_forest_classifier", RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0), x, y3),
        ("random_forest_classifier_strings", RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0), x, ys),
        ("random_forest_regressor", RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0), x, yr),
        ("gradient_boosting_classifier", GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0), x, y3),
        ("gradient_boosting_classifier_binary", GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0), x, y2),
        ("gradient_boosting_regressor", GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0), x, yr),
        ("svc_probability", SVC(probability=True, random_state=0), x, y3),
        ("svc", SVC(), x, y3),
        ("svc_binary", SVC(), x, y2),
        ("svc_linear_binary_probability", SVC(kernel="linear", probability=True, random_state=0), x, y2),
        ("svc_poly_strings_probability", SVC(kernel="poly", degree=3, probability=True, random_state=0), x, ys),
        ("svr", SVR(), x, yr),
        ("knn_classifier", KNeighborsClassifier(n_neighbors=3), x, y3),
        ("knn_regressor", KNeighborsRegressor(n_neighbors=3), x, yr),
        ("pipeline_scaler_onehot_logreg",
         make_pipeline(ColumnTransformer([("num", StandardScaler(), [0, 1, 2]),
                                          ("cat", OneHotEncoder(handle_unknown="ignore"), [3])]),
                       LogisticRegression(max_iter=500)), xc, y3),
        ("pipeline_impute_normalize_binarize",
         make_pipeline(SimpleImputer(), Normalizer(), Binarizer(threshold=0.1),
                       LogisticRegression(max_iter=500)), x, y3),
    ]
    info = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, est, xs, ys_ in cases:
            est.fit(xs[train], ys_[train])
            onx = to_onnx(est, xs[:1])
            feeds = {onx.graph.input[0].name: xs[test]}
            info[name] = write_case(out_dir, name, onx, feeds)
            log(f"{name}: {info[name]['ops']}")

        # LabelEncoder (of class names): a string input.
        words = np.array(["cat", "dog", "emu", "ant"], dtype=object)
        le = LabelEncoder().fit(words)
        onx = to_onnx(le, initial_types=[("x", StringTensorType([None]))])
        feed = np.array(["dog", "ant", "emu", "dog", "cat"], dtype=object)
        info["label_encoder"] = write_case(out_dir, "label_encoder", onx, {"x": feed})
        log(f"label_encoder: {info['label_encoder']['ops']}")

        # DictVectorizer: a map input (one dict), then a regressor.
        dicts = [{"a": float(r[0]), "b": float(r[1]), "c": float(r[2])} for r in x]
        dv = make_pipeline(DictVectorizer(sparse=False), LinearRegression())
        dv.fit(dicts[:N_TRAIN], yr[train])
        onx = to_onnx(dv, initial_types=[("x", DictionaryType(StringTensorType([]), FloatTensorType([])))])
        info["dict_vectorizer"] = write_case(out_dir, "dict_vectorizer", onx, {"x": dicts[N_TRAIN]})
        log(f"dict_vectorizer: {info['dict_vectorizer']['ops']}")
    return info


def main() -> int:
    cache = os.environ.get("SMELT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "smelt")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(cache, "data", "sklearn"))
    args = ap.parse_args()

    import onnxruntime
    import skl2onnx
    import sklearn

    out = os.path.abspath(args.out)
    work = out + ".tmp"
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    t0 = time.time()
    info = gen(work)
    version = {
        "data_format": DATA_FORMAT_VERSION,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "scikit-learn": sklearn.__version__,
        "skl2onnx": skl2onnx.__version__,
        "cases": info,
    }
    with open(os.path.join(work, "VERSION"), "w") as f:
        json.dump(version, f, indent=1, sort_keys=True)
        f.write("\n")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(work, out)
    log(f"{len(info)} cases in {time.time() - t0:.1f}s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
