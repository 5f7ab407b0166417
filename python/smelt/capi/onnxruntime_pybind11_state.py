"""smelt's exception classes under onnxruntime's module path, so
``from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument`` needs only its
package name changed."""

from .._smelt import (  # noqa: F401
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    NotImplemented,
    RuntimeException,
    SmeltError,
)
from .._session import (  # noqa: F401
    ExecutionMode,
    GraphOptimizationLevel,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
)
