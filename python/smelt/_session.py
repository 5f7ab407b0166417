"""onnxruntime's Python API over smelt: InferenceSession, SessionOptions, RunOptions,
NodeArg, ModelMetadata, the enums and the provider functions. A script written for
onnxruntime runs with ``import smelt as onnxruntime``."""

from __future__ import annotations

import enum
import os
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _smelt
from ._smelt import Fail

__all__ = [
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "RunOptions",
    "SessionOptions",
    "get_all_providers",
    "get_available_providers",
    "get_device",
]


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's optimization levels. smelt has one pass pipeline: every level but
    ORT_DISABLE_ALL runs it; ORT_DISABLE_ALL runs the imported graph on smelt's reference
    executor (correct, and slow)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """onnxruntime's execution modes; smelt runs kernel groups in order either way."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


# onnxruntime's optimization level -> smelt's opt_level.
_OPT_LEVEL = {
    GraphOptimizationLevel.ORT_DISABLE_ALL: 0,
    GraphOptimizationLevel.ORT_ENABLE_BASIC: 1,
    GraphOptimizationLevel.ORT_ENABLE_EXTENDED: 1,
    GraphOptimizationLevel.ORT_ENABLE_LAYOUT: 1,
    GraphOptimizationLevel.ORT_ENABLE_ALL: 1,
}

# onnxruntime's provider names (onnxruntime.get_all_providers()) and the smelt target each
# maps to; None: a provider smelt has no target for (warned about and skipped, as
# onnxruntime skips providers its build lacks).
_PROVIDERS: Dict[str, Optional[str]] = {
    name: None
    for name in [
        "NvTensorRTRTXExecutionProvider", "TensorrtExecutionProvider", "CUDAExecutionProvider",
        "MIGraphXExecutionProvider", "OpenVINOExecutionProvider", "DnnlExecutionProvider",
        "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider",
        "VSINPUExecutionProvider", "JsExecutionProvider", "CoreMLExecutionProvider",
        "ACLExecutionProvider", "DmlExecutionProvider", "RknpuExecutionProvider",
        "WebNNExecutionProvider", "WebGpuExecutionProvider", "XnnpackExecutionProvider",
        "CANNExecutionProvider", "AzureExecutionProvider", "ROCMExecutionProvider",
        "ArmNNExecutionProvider",
    ]
}
_PROVIDERS["CPUExecutionProvider"] = "cpu"


def get_all_providers() -> List[str]:
    """Every provider name smelt recognizes (onnxruntime's list)."""
    return list(_PROVIDERS)


def get_available_providers() -> List[str]:
    """The providers smelt can run on this machine."""
    return [name for name, target in _PROVIDERS.items() if target is not None]


def get_device() -> str:
    """The device smelt runs on ('CPU')."""
    return "CPU"


def _providers(providers, provider_options) -> List[tuple]:
    """(name, options) pairs smelt will use, checked as onnxruntime checks them."""
    if providers is None:
        return [("CPUExecutionProvider", {})]
    if isinstance(providers, str):
        raise ValueError("providers must be a list of provider names or (name, options) tuples")
    pairs = []
    for i, p in enumerate(providers):
        if isinstance(p, tuple):
            if len(p) != 2 or not isinstance(p[0], str) or not isinstance(p[1], dict):
                raise ValueError("a provider tuple must be (name, options dict)")
            name, opts = p
        elif isinstance(p, str):
            name = p
            opts = provider_options[i] if provider_options is not None else {}
        else:
            raise ValueError(f"a provider must be a name or a (name, options) tuple, got {p!r}")
        if name not in _PROVIDERS:
            raise ValueError(
                f"Unknown Provider Type: {name}; smelt knows {', '.join(get_all_providers())}"
            )
        if _PROVIDERS[name] is None:
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names."
                f"Available providers: '{', '.join(get_available_providers())}'"
            )
            continue
        pairs.append((name, dict(opts)))
    return pairs or [("CPUExecutionProvider", {})]


class SessionOptions:
    """onnxruntime's SessionOptions. smelt reads intra_op_num_threads (0: every CPU the
    process may use), graph_optimization_level, enable_profiling, profile_file_prefix and
    the config entry "smelt.precision" (fp32, bf16, fp16 or int8, as `smelt run
    --precision`); the other fields are kept so scripts that set them run unchanged."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = 0
        self.enable_profiling = False
        self.profile_file_prefix = "smelt_profile_"
        self.optimized_model_filepath = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self._config: Dict[str, str] = {}
        self._free_dims: Dict[str, int] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Stores a config entry (smelt reads "smelt.precision")."""
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        """A stored config entry."""
        return self._config[key]

    def add_free_dimension_override_by_name(self, name: str, value: int) -> None:
        """Fixes a named (symbolic) dimension: inputs using it are compiled for that size at
        load."""
        self._free_dims[name] = int(value)


class RunOptions:
    """onnxruntime's RunOptions; `terminate` set before a run fails it, as in onnxruntime."""

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config: Dict[str, str] = {}

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Stores a config entry (smelt reads none yet)."""
        self._config[key] = value

    def get_run_config_entry(self, key: str) -> str:
        """A stored config entry."""
        return self._config[key]


class NodeArg:
    """An input or output: .name, .type ('tensor(float)') and .shape (int for a fixed
    dim, str for a named one, None for an unknown one)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name: str, type: str, shape: list) -> None:
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    __str__ = __repr__


class ModelMetadata:
    """The model's metadata, as onnxruntime's ModelMetadata has it."""

    def __init__(self, d: dict) -> None:
        self.producer_name: str = d["producer_name"]
        self.graph_name: str = d["graph_name"]
        self.graph_description: str = d["graph_description"]
        self.domain: str = d["domain"]
        self.description: str = d["description"]
        self.version: int = d["version"]
        self.custom_metadata_map: Dict[str, str] = d["custom_metadata_map"]


class InferenceSession:
    """A model compiled by smelt, with onnxruntime's InferenceSession API.

    ``path_or_bytes`` is an ONNX file path or the model's bytes, or the path of an artifact
    from ``smelt compile MODEL -o model.smelt`` (loaded as compiled, no passes run; it runs
    at the shapes it was compiled for). ``run`` may be called from many threads at once; it
    releases the GIL while the model runs."""

    def __init__(
        self,
        path_or_bytes: Union[str, bytes, os.PathLike],
        sess_options: Optional[SessionOptions] = None,
        providers: Optional[Sequence[Any]] = None,
        provider_options: Optional[Sequence[dict]] = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_path: Optional[str] = os.fspath(path_or_bytes)
            model: Any = self._model_path
        elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_path = None
            model = bytes(path_or_bytes)
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._providers = _providers(providers, provider_options)
        so = self._sess_options
        level = _OPT_LEVEL.get(so.graph_optimization_level, 1)
        self._sess = _smelt.Session(
            model,
            opt_level=level,
            threads=max(0, int(so.intra_op_num_threads)),
            free_dims=so._free_dims,
            profile=bool(so.enable_profiling),
            precision=so._config.get("smelt.precision"),
        )
        self._profiling_start_ns = time.time_ns()
        self._inputs = [NodeArg(*a) for a in self._sess.inputs()]
        self._outputs = [NodeArg(*a) for a in self._sess.outputs()]
        self._overridable = [
            NodeArg(*a)
            for a in self._sess.inputs(all=True)
            if a[0] not in {i.name for i in self._inputs}
        ]

    def get_inputs(self) -> List[NodeArg]:
        """The inputs a feed must (or may, for optional ones) give."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        """The outputs, in graph order."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        """Inputs with a default (initializers listed among the graph inputs)."""
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata."""
        return ModelMetadata(self._sess.meta())

    def get_providers(self) -> List[str]:
        """The providers this session runs on."""
        return [name for name, _ in self._providers]

    def get_provider_options(self) -> Dict[str, dict]:
        """Each provider's options."""
        return {name: dict(opts) for name, opts in self._providers}

    def set_providers(self, providers=None, provider_options=None) -> None:
        """Checks and sets the providers (smelt runs on the CPU whatever they are)."""
        self._providers = _providers(providers, provider_options)

    def get_session_options(self) -> SessionOptions:
        """The options the session was made with."""
        return self._sess_options

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started (the session's creation), in ns since the epoch."""
        return self._profiling_start_ns

    def disable_fallback(self) -> None:
        """onnxruntime's provider fallback switch; smelt has nothing to fall back from."""

    def enable_fallback(self) -> None:
        """onnxruntime's provider fallback switch; smelt has nothing to fall back from."""

    def run(self, output_names, input_feed, run_options: Optional[RunOptions] = None) -> list:
        """Runs the model on ``input_feed`` (input name -> array) and returns the outputs
        named (None: all), as numpy arrays."""
        if run_options is not None and run_options.terminate:
            raise Fail("[smelt] FAIL (cancelled): Exiting due to terminate flag being set to true.")
        return self._sess.run(output_names, input_feed)

    def end_profiling(self) -> str:
        """Writes the kernel profile of the runs so far as a Chrome trace (chrome://tracing,
        Perfetto) and returns its file name; '' when profiling is off."""
        if not self._sess_options.enable_profiling:
            return ""
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(self._profiling_start_ns / 1e9))
        path = f"{self._sess_options.profile_file_prefix}_{stamp}.json"
        self._sess.end_profiling(path)
        return path

    def compilations(self) -> List[tuple]:
        """smelt's plan compilations so far: (input shapes, reason) each."""
        return self._sess.compilations()
