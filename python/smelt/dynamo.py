"""smelt as a torch.compile backend: ``torch.compile(model, backend="smelt")``.

Dynamo captures the graph (with its guards and graph breaks) and hands each FX graph to
:func:`smelt_backend`, which exports it to ONNX (parameters and buffers as constants,
symbolic dims kept symbolic), compiles it with smelt for the example inputs' shapes and
returns a callable that runs it. Parameters are guarded: a changed parameter (a new object,
or an in-place update that bumps its version) re-specializes the graph. What smelt cannot
take runs eagerly, with the reason logged (logger ``smelt.dynamo``) and recorded; the
user's forward never raises because of smelt.

:func:`report` says what was captured, what broke the graph and why each recompile
happened::

    compiled = torch.compile(model, backend="smelt")
    with torch.no_grad():
        compiled(x)
    print(smelt.dynamo.report())

Options (``torch.compile(..., options={...})``): ``threads`` (default
``torch.get_num_threads()``, the threads Inductor would use), ``opt_level`` (default 1).
smelt runs inference: a graph traced with autograd recording (grad mode on and a tensor
that requires grad) runs eagerly; call the model under ``torch.no_grad()`` or
``torch.inference_mode()``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import torch

from . import _fx_onnx, _smelt

__all__ = ["GraphBreak", "GraphRecord", "Report", "report", "reset", "smelt_backend"]

log = logging.getLogger("smelt.dynamo")


@dataclass
class GraphRecord:
    """One FX graph Dynamo handed to smelt, and what became of it."""

    index: int
    compile_id: str
    nodes: int
    ops: Dict[str, int]
    input_shapes: List[List[Any]]
    constants: int
    dynamic_dims: List[Dict[int, str]]
    backend: str = "smelt"  # or "eager"
    reason: str = ""  # why it runs eagerly
    export_seconds: float = 0.0
    compile_seconds: float = 0.0
    calls: int = 0
    eager_calls: int = 0
    respecializations: List[str] = field(default_factory=list)
    plans: List[Any] = field(default_factory=list)  # smelt's (shapes, reason) compilations


@dataclass
class GraphBreak:
    """Where Dynamo broke the graph, and why."""

    graph: int  # the record of the graph that ended at the break
    reason: str  # Dynamo's reason (e.g. "generic_jump TensorVariable()")
    location: str  # file:line of the user code
    code: str  # that line
    explanation: str = ""  # Dynamo's explanation, when it gave one (e.g. "Data-dependent branching")


@dataclass
class Report:
    """What Dynamo captured and smelt compiled: the graphs, the graph breaks with their
    reasons and counts, and the recompiles with the guard that failed."""

    graphs: List[GraphRecord]
    graph_breaks: List[GraphBreak]
    recompiles: List[tuple]  # (function, [guard failure reasons])
    frames: Dict[str, int]
    unique_graphs: int

    @property
    def graph_break_count(self) -> int:
        """Graph breaks seen."""
        return len(self.graph_breaks)

    @property
    def recompile_count(self) -> int:
        """Dynamo recompiles (guard failures that led to a new graph)."""
        return sum(len(r) for _, r in self.recompiles)

    def __str__(self) -> str:
        lines = [
            f"smelt.dynamo: {len(self.graphs)} graphs "
            f"({sum(g.backend == 'smelt' for g in self.graphs)} on smelt), "
            f"{self.graph_break_count} graph breaks, {self.recompile_count} recompiles"
        ]
        for g in self.graphs:
            ops = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in list(g.ops.items())[:8])
            more = " ..." if len(g.ops) > 8 else ""
            lines.append(
                f"  graph {g.index} [{g.compile_id}] {g.backend}: {g.nodes} nodes, "
                f"inputs {g.input_shapes}, {g.constants} constants, calls {g.calls}"
                f" (eager {g.eager_calls}); export {g.export_seconds * 1e3:.0f} ms, "
                f"compile {g.compile_seconds * 1e3:.0f} ms"
            )
            lines.append(f"    ops: {ops}{more}")
            if g.dynamic_dims and any(g.dynamic_dims):
                lines.append(f"    dynamic dims: {g.dynamic_dims}")
            if g.reason:
                lines.append(f"    eager because: {g.reason}")
            for r in g.respecializations:
                lines.append(f"    re-specialized: {r}")
            for shapes, why in g.plans[1:]:
                lines.append(f"    smelt plan for {dict(shapes)}: {why}")
        for b in self.graph_breaks:
            why = f"{b.explanation} ({b.reason})" if b.explanation else b.reason
            lines.append(f"  graph break after graph {b.graph} at {b.location}: {why}")
            if b.code:
                lines.append(f"    {b.code}")
        for fn, reasons in self.recompiles:
            for r in reasons:
                lines.append(f"  recompile of {fn}: {r}")
        return "\n".join(lines)


_lock = threading.Lock()
_records: List[GraphRecord] = []
_compiled: Dict[int, "_SmeltGraph"] = {}
_breaks: List[GraphBreak] = []


def _explanation(messages: List[str], location: str) -> str:
    """The headline of Dynamo's message about the break at `location` (file:line)."""
    file, _, line = location.rpartition(":")
    for m in messages:
        if f'File "{file}", line {line}' in m:
            return m.strip().splitlines()[0].strip()
    return ""


def _record_break(gm: torch.fx.GraphModule, index: int) -> None:
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None or not getattr(reason, "graph_break", False):
        return
    stack = list(getattr(reason, "user_stack", None) or [])
    top = stack[-1] if stack else None
    where = f"{top.filename}:{top.lineno}" if top is not None else "?"
    code = (top.line or "").strip() if top is not None else ""
    _breaks.append(GraphBreak(index, str(reason.reason), where, code))


def reset() -> None:
    """Forgets the records and resets Dynamo (its caches, counters and guard failures)."""
    with _lock:
        _records.clear()
        _compiled.clear()
        _breaks.clear()
    torch._dynamo.reset()


def report() -> Report:
    """The report of everything compiled since the last reset()."""
    from torch._dynamo.utils import counters, guard_failures

    messages = list(counters["graph_break"]) + list(counters["unimplemented"])
    recompiles = [
        (f"{getattr(code, 'co_name', code)} ({getattr(code, 'co_filename', '?')}:"
         f"{getattr(code, 'co_firstlineno', '?')})", list(reasons))
        for code, reasons in guard_failures.items()
        if reasons
    ]
    with _lock:
        graphs = list(_records)
        breaks = [b for b in _breaks]
    for b in breaks:
        b.explanation = b.explanation or _explanation(messages, b.location)
    for g in graphs:
        compiled = _compiled.get(g.index)
        if compiled is not None and not compiled.eager:
            g.plans = compiled.sess.compilations()
    return Report(
        graphs=graphs,
        graph_breaks=breaks,
        recompiles=recompiles,
        frames=dict(counters["frames"]),
        unique_graphs=int(counters["stats"]["unique_graphs"]),
    )


def _compile_id() -> str:
    try:
        cid = torch._guards.CompileContext.current_compile_id()
        return str(cid) if cid is not None else "?"
    except Exception:  # noqa: BLE001 - the id is decoration only
        return "?"


def _needs_autograd(example_inputs: List[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
    )


class _SmeltGraph:
    """A compiled FX graph: runs on smelt while its constants stay the ones it was
    compiled with, re-specializes when they change, runs eagerly if smelt fails."""

    def __init__(self, gm, lay, args, rec: GraphRecord, threads: int, opt_level: int):
        self.gm = gm
        self.lay = lay
        self.rec = rec
        self.threads = threads
        self.opt_level = opt_level
        self.eager = False
        self._build(args)

    def _build(self, args) -> None:
        t = time.perf_counter()
        onnx_bytes, self.nout = _fx_onnx.export(self.gm, self.lay, list(args))
        t1 = time.perf_counter()
        shapes = {
            name: list(args[i].shape) for name, i in zip(self.lay.names, self.lay.input_args)
        }
        self.sess = _smelt.Session(
            onnx_bytes, opt_level=self.opt_level, threads=self.threads, shapes=shapes
        )
        if len(self.sess.outputs()) != self.nout:
            raise _fx_onnx.Unsupported(
                f"the ONNX export has {len(self.sess.outputs())} outputs, the graph {self.nout}"
            )
        self.rec.export_seconds += t1 - t
        self.rec.compile_seconds += time.perf_counter() - t1
        # The constants this build packed, with their versions (the guard).
        self.guards = [(i, args[i], args[i]._version) for i in self.lay.const_args]
        self.feed = list(zip(self.lay.names, self.lay.input_args))

    def _changed(self, args) -> Optional[str]:
        for i, t0, ver in self.guards:
            a = args[i]
            if a is not t0:
                return f"constant input {i} is another tensor"
            if a._version != ver:
                return f"constant input {i} was modified in place"
        return None

    def __call__(self, *args):
        rec = self.rec
        rec.calls += 1
        if self.eager:
            rec.eager_calls += 1
            return self.gm(*args)
        why = self._changed(args)
        try:
            if why is not None:
                rec.respecializations.append(why)
                log.info("graph %d re-specializes: %s", rec.index, why)
                self._build(args)
            feed = {name: args[i].detach().numpy() for name, i in self.feed}
            outs = self.sess.run(None, feed)
        except Exception as e:  # noqa: BLE001 - any failure runs the graph eagerly
            self.eager = True
            rec.backend = "eager"
            rec.reason = f"smelt failed at run time: {type(e).__name__}: {e}"
            log.warning("graph %d runs eagerly from now on: %s", rec.index, rec.reason)
            rec.eager_calls += 1
            return self.gm(*args)
        return tuple(torch.from_numpy(o) for o in outs)


def smelt_backend(gm: torch.fx.GraphModule, example_inputs: List[Any], **kwargs: Any) -> Callable:
    """The torch.compile backend: returns a callable running ``gm`` on smelt, or ``gm``
    itself (eager) when smelt cannot take it, with the reason logged and recorded."""
    options = dict(kwargs.get("options") or {})
    threads = int(options.get("threads") or torch.get_num_threads())
    opt_level = int(options.get("opt_level", 1))
    ops = collections.Counter(
        n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
        for n in gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module")
    )
    with _lock:
        index = len(_records)
        rec = GraphRecord(
            index=index,
            compile_id=_compile_id(),
            nodes=sum(1 for n in gm.graph.nodes if n.op not in ("placeholder", "output")),
            ops=dict(ops),
            input_shapes=[],
            constants=0,
            dynamic_dims=[],
        )
        _records.append(rec)
        _record_break(gm, index)
    try:
        lay = _fx_onnx.layout_of(gm, example_inputs)
        rec.constants = len(lay.const_args)
        rec.dynamic_dims = lay.dynamic
        rec.input_shapes = [
            [lay.dynamic[k].get(d, s) for d, s in enumerate(example_inputs[i].shape)]
            for k, i in enumerate(lay.input_args)
        ]
        if _needs_autograd(example_inputs):
            raise _fx_onnx.Unsupported(
                "autograd is recording (grad mode is on and an input or parameter requires "
                "grad); smelt runs inference: call under torch.no_grad() or "
                "torch.inference_mode()"
            )
        if not lay.input_args and not lay.const_args:
            raise _fx_onnx.Unsupported("the graph has no tensor inputs")
        _fx_onnx.check_graph(gm)
        compiled = _SmeltGraph(gm, lay, example_inputs, rec, threads, opt_level)
        with _lock:
            _compiled[index] = compiled
        return compiled
    except Exception as e:  # noqa: BLE001 - whatever fails, the graph runs eagerly
        rec.backend = "eager"
        kind = "" if isinstance(e, _fx_onnx.Unsupported) else f"{type(e).__name__}: "
        rec.reason = f"{kind}{e}".strip()
        log.warning("graph %d [%s] runs eagerly: %s", index, rec.compile_id, rec.reason)
        return _counted_eager(gm, rec)


def _counted_eager(gm: torch.fx.GraphModule, rec: GraphRecord) -> Callable:
    def run(*args):
        rec.calls += 1
        rec.eager_calls += 1
        return gm(*args)

    return run
