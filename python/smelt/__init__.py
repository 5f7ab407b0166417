"""smelt: a model compiler and runtime. `smelt.InferenceSession` has onnxruntime's API, so a
script written for onnxruntime runs with ``import smelt as onnxruntime``;
``torch.compile(model, backend="smelt")`` compiles PyTorch models with smelt
(see smelt.dynamo).

    import smelt
    sess = smelt.InferenceSession("model.onnx")
    outputs = sess.run(None, {"x": x})
"""

from ._smelt import (
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    NotImplemented,
    RuntimeException,
    SmeltError,
    __version__,
)
from ._session import (
    ExecutionMode,
    GraphOptimizationLevel,
    InferenceSession,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
    get_all_providers,
    get_available_providers,
    get_device,
)
from ._tools import bench, compile, explain

version = __version__

__all__ = [
    "ExecutionMode",
    "Fail",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelMetadata",
    "NoSuchFile",
    "NodeArg",
    "NotImplemented",
    "RunOptions",
    "RuntimeException",
    "SessionOptions",
    "SmeltError",
    "__version__",
    "bench",
    "compile",
    "explain",
    "get_all_providers",
    "get_available_providers",
    "get_device",
]
