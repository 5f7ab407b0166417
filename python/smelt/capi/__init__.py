"""Where onnxruntime keeps its native classes; smelt mirrors the module path that scripts
import exception classes from (onnxruntime.capi.onnxruntime_pybind11_state)."""
