#!/usr/bin/env python3
"""Serves an ONNX model from Triton Inference Server's own dynamic batcher, with
onnxruntime running each batch: the peer `scripts/serve-compare.sh` loads beside `smelt serve`.

The tritonserver binary comes with the `nvidia-pytriton` wheel, whose Triton has only the
Python backend, so each model instance is a Python callable that runs one onnxruntime
session (the GIL is released while onnxruntime computes). Triton speaks the same KServe v2
protocol as `smelt serve`, so `smelt bench --server` loads both the same way.

Usage (with the venv serve-compare.sh makes):
  python scripts/pytriton_host.py MODEL.onnx --name minilm --instances 2 --threads 1 \
      --max-batch-size 16 --max-queue-delay-us 2000 [--http-port 8000 --grpc-port 8001 --metrics-port 8002]
"""

import argparse
import logging
import signal
import sys

import numpy as np
import onnxruntime as ort
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(uint8)": np.uint8,
    "tensor(int8)": np.int8,
    "tensor(bool)": np.bool_,
}


def per_sample_shape(dims):
    """A tensor's shape without its batch dim, variable dims as -1."""
    return tuple(d if isinstance(d, int) and d > 0 else -1 for d in dims[1:])


def instance(path, threads):
    """One model instance: its own onnxruntime session with `threads` threads."""
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    names = [x.name for x in s.get_outputs()]

    @batch
    def infer(**inputs):
        return dict(zip(names, s.run(None, inputs)))

    return s, infer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--name", default="model")
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime threads per instance")
    ap.add_argument("--max-batch-size", type=int, default=16)
    ap.add_argument("--max-queue-delay-us", type=int, default=2000)
    ap.add_argument("--http-port", type=int, default=8000)
    ap.add_argument("--grpc-port", type=int, default=8001)
    ap.add_argument("--metrics-port", type=int, default=8002)
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    # SIGTERM leaves through the `with` below, which stops the tritonserver it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    made = [instance(a.model, a.threads) for _ in range(a.instances)]
    s = made[0][0]
    inputs = [Tensor(name=i.name, dtype=DTYPES[i.type], shape=per_sample_shape(i.shape))
              for i in s.get_inputs()]
    outputs = [Tensor(name=o.name, dtype=DTYPES[o.type], shape=per_sample_shape(o.shape))
               for o in s.get_outputs()]
    batcher = DynamicBatcher(max_queue_delay_microseconds=a.max_queue_delay_us)
    config = TritonConfig(http_port=a.http_port, grpc_port=a.grpc_port,
                          metrics_port=a.metrics_port)
    with Triton(config=config) as triton:
        triton.bind(
            model_name=a.name,
            infer_func=[f for _, f in made],
            inputs=inputs,
            outputs=outputs,
            config=ModelConfig(max_batch_size=a.max_batch_size, batcher=batcher),
            strict=False,
        )
        triton.serve()


if __name__ == "__main__":
    main()
