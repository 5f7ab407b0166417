"""An FX graph from Dynamo, as ONNX: which placeholders are the caller's tensors, which are
parameters and buffers Dynamo lifted to inputs (exported as initializers, so smelt packs
them once), which are symbolic sizes (read back from the tensor they size); dims Dynamo
made symbolic stay symbolic (named by their symbol). Exported with torch.onnx's
TorchScript-based exporter (dynamo=False)."""

from __future__ import annotations

import copy
import io
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch


class Unsupported(Exception):
    """The graph cannot go to smelt; the message says why (it runs eagerly instead)."""


@dataclass
class Layout:
    """Where each placeholder of the graph comes from."""

    # Per placeholder: ("input", k) the k-th tensor fed to smelt, ("const", j) the j-th
    # constant, ("size", k, dim) the size of a dim of the k-th fed tensor.
    slots: List[Tuple[Any, ...]] = field(default_factory=list)
    # Argument positions of the fed tensors and of the constants.
    input_args: List[int] = field(default_factory=list)
    const_args: List[int] = field(default_factory=list)
    # Per fed tensor: its symbolic dims, {dim: symbol name}.
    dynamic: List[Dict[int, str]] = field(default_factory=list)
    names: List[str] = field(default_factory=list)


def _source_names(node: torch.fx.Node) -> str:
    ga = node.meta.get("grapharg")
    return "" if ga is None else str(getattr(ga, "source", ""))


def _is_constant(node: torch.fx.Node, ex: Any) -> bool:
    """A parameter or buffer Dynamo lifted to a graph input."""
    if isinstance(ex, torch.nn.Parameter):
        return True
    if getattr(ex, "_dynamo_static_input_type", None) is not None:
        return True
    src = _source_names(node)
    return "_parameters" in src or "_buffers" in src


def _sym_expr(x: Any) -> Optional[str]:
    node = getattr(x, "node", None)
    expr = getattr(node, "expr", None)
    return None if expr is None else str(expr)


def layout_of(gm: torch.fx.GraphModule, example_inputs: List[Any]) -> Layout:
    """Classifies the placeholders; raises Unsupported for what smelt cannot be fed."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(phs) != len(example_inputs):
        raise Unsupported(f"{len(phs)} placeholders for {len(example_inputs)} example inputs")
    lay = Layout()
    pending: List[Tuple[int, str]] = []
    for pos, (n, ex) in enumerate(zip(phs, example_inputs)):
        if isinstance(ex, torch.Tensor):
            if ex.device.type != "cpu":
                raise Unsupported(f"input '{n.name}' is on {ex.device}; smelt runs on the CPU")
            if ex.layout != torch.strided:
                raise Unsupported(f"input '{n.name}' has layout {ex.layout}")
            if _is_constant(n, ex):
                lay.slots.append(("const", len(lay.const_args)))
                lay.const_args.append(pos)
                continue
            fake = n.meta.get("example_value")
            dyn = {}
            for d, size in enumerate(getattr(fake, "shape", ())):
                if isinstance(size, torch.SymInt):
                    dyn[d] = _sym_expr(size) or f"{n.name}_dim{d}"
            lay.slots.append(("input", len(lay.input_args)))
            lay.input_args.append(pos)
            lay.dynamic.append(dyn)
            lay.names.append(f"in{len(lay.names)}")
        elif isinstance(ex, (torch.SymInt, int)):
            expr = _sym_expr(n.meta.get("example_value", ex)) or _sym_expr(ex)
            if expr is None:
                raise Unsupported(f"integer input '{n.name}' is not a symbolic size")
            lay.slots.append(None)
            pending.append((len(lay.slots) - 1, expr))
        else:
            raise Unsupported(f"input '{n.name}' is a {type(ex).__name__}, not a tensor")
    # A symbolic size is read from a fed tensor that has it as a dim.
    for slot, expr in pending:
        where = [(k, d) for k, dyn in enumerate(lay.dynamic) for d, s in dyn.items() if s == expr]
        if not where:
            raise Unsupported(f"symbolic size {expr} is not a dim of any tensor input")
        lay.slots[slot] = ("size",) + where[0]
    return lay


def check_graph(gm: torch.fx.GraphModule) -> None:
    """Refuses graphs whose meaning an ONNX export would lose: mutated inputs, training
    mode batch norm, outputs that are not tensors."""
    phs = {n for n in gm.graph.nodes if n.op == "placeholder"}
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method"):
            name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
            mutates = name.endswith("_") and not name.startswith("_") and not name.endswith("__")
            mutates = mutates or n.kwargs.get("inplace") is True
            if mutates and n.args and n.args[0] in phs:
                raise Unsupported(f"node {n.name} ({name}) mutates an input in place")
            training = n.args[5] if len(n.args) > 5 else n.kwargs.get("training")
            if name == "batch_norm" and training is True:
                raise Unsupported(f"node {n.name}: batch norm in training mode")
        if n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (tuple, list)) else (n.args[0],)
            for o in outs:
                val = o.meta.get("example_value") if isinstance(o, torch.fx.Node) else o
                if not isinstance(val, torch.Tensor):
                    raise Unsupported(f"graph output {o} is a {type(val).__name__}, not a tensor")


def _mha(q_in, k_in, v_in, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b, mask, need_weights, average):
    """Multi-head attention as plain ops (what nn.MultiheadAttention's fast path computes)."""
    if mask is not None:
        raise Unsupported("fused attention with a mask")
    b, s, _ = q_in.shape
    t = k_in.shape[1]
    d = embed_dim // heads
    if q_in is k_in and k_in is v_in:
        q, k, v = torch.nn.functional.linear(q_in, qkv_w, qkv_b).chunk(3, -1)
    else:
        wq, wk, wv = qkv_w.chunk(3, 0)
        bq, bk, bv = qkv_b.chunk(3, 0)
        q = torch.nn.functional.linear(q_in, wq, bq)
        k = torch.nn.functional.linear(k_in, wk, bk)
        v = torch.nn.functional.linear(v_in, wv, bv)
    q = q.reshape(b, s, heads, d).transpose(1, 2)
    k = k.reshape(b, t, heads, d).transpose(1, 2)
    v = v.reshape(b, t, heads, d).transpose(1, 2)
    p = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1.0 / d**0.5), dim=-1)
    out = torch.matmul(p, v).transpose(1, 2).reshape(b, s, embed_dim)
    out = torch.nn.functional.linear(out, proj_w, proj_b)
    weights = (p.mean(1) if average else p) if need_weights else out.new_empty(0)
    return out, weights


def _native_mha(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                proj_bias, mask=None, need_weights=True, average_attn_weights=True, mask_type=None):
    """torch._native_multi_head_attention (batch first), decomposed."""
    return _mha(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                proj_bias, mask, need_weights, average_attn_weights)


def _encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                   use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                   norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                   mask_type=None):
    """torch._transformer_encoder_layer_fwd (nn.TransformerEncoderLayer's fast path),
    decomposed."""
    F = torch.nn.functional

    def sa(x):
        return _mha(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                    proj_bias, mask, False, False)[0]

    def ff(x):
        h = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(h) if use_gelu else F.relu(h), ffn_weight_2, ffn_bias_2)

    shape = (embed_dim,)
    if norm_first:
        x = src + sa(F.layer_norm(src, shape, norm_weight_1, norm_bias_1, eps))
        return x + ff(F.layer_norm(x, shape, norm_weight_2, norm_bias_2, eps))
    x = F.layer_norm(src + sa(src), shape, norm_weight_1, norm_bias_1, eps)
    return F.layer_norm(x + ff(x), shape, norm_weight_2, norm_bias_2, eps)


# Fused fast-path ops Dynamo captures from torch.nn modules in eval mode, which the ONNX
# exporter has no translation for, and their decompositions into exportable ops.
_DECOMPOSE = {
    torch._transformer_encoder_layer_fwd: _encoder_layer,
    torch._native_multi_head_attention: _native_mha,
}


def decomposed(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of the graph with fused fast-path ops decomposed (the original, run when
    the graph falls back to eager, keeps them)."""
    if not any(n.op == "call_function" and n.target in _DECOMPOSE for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    for n in graph.nodes:
        if n.op == "call_function" and n.target in _DECOMPOSE:
            n.target = _DECOMPOSE[n.target]
    return torch.fx.GraphModule(gm, graph)


class _Exported(torch.nn.Module):
    """The graph with its constants as buffers and its sizes read from its inputs."""

    def __init__(self, gm: torch.fx.GraphModule, lay: Layout, consts: List[torch.Tensor]):
        super().__init__()
        self.gm = gm
        self.slots = lay.slots
        for j, t in enumerate(consts):
            self.register_buffer(f"c{j}", t.detach())

    def forward(self, *xs: torch.Tensor):
        args = []
        for s in self.slots:
            if s[0] == "input":
                args.append(xs[s[1]])
            elif s[0] == "const":
                args.append(getattr(self, f"c{s[1]}"))
            else:
                args.append(xs[s[1]].size(s[2]))
        out = self.gm(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def export(gm: torch.fx.GraphModule, lay: Layout, args: List[Any], opset: int = 17) -> Tuple[bytes, int]:
    """The graph as ONNX bytes, and its number of outputs; constants are the current values
    of the arguments at the constant positions."""
    consts = [args[i] for i in lay.const_args]
    inputs = tuple(args[i] for i in lay.input_args)
    mod = _Exported(decomposed(gm), lay, consts)
    dynamic_axes = {name: dict(d) for name, d in zip(lay.names, lay.dynamic) if d}
    nout = _output_count(gm)
    out_names = [f"out{i}" for i in range(nout)]
    f = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            mod,
            inputs,
            f,
            input_names=lay.names,
            output_names=out_names,
            dynamic_axes=dynamic_axes or None,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    return f.getvalue(), nout


def _output_count(gm: torch.fx.GraphModule) -> int:
    for n in gm.graph.nodes:
        if n.op == "output":
            return len(n.args[0]) if isinstance(n.args[0], (tuple, list)) else 1
    return 0
