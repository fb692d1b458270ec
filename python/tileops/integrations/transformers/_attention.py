"""The "attention" kind: the attention function of a transformers attention module served by
GroupedQueryAttentionVarlenFwdOp, for one model instance only.

A transformers attention forward projects q, k and v, rotates them, updates the KV cache, then
calls ``ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, ...)`` (a global of
its modeling module) with q ``[B, Hq, Sq, D]``, k and v ``[B, Hkv, Sk, D]`` and the mask the
model built for that implementation. The attention module gets an instance-level forward whose
``ALL_ATTENTION_FUNCTIONS`` is its own ``AttentionInterface`` (_rebind.py): the model's
implementation there is this module's tileops function, every other name transformers' own.
``config._attn_implementation`` is not changed (it is shared by every model built from the same
config object, and the model builds its masks from it), and nothing is registered globally.

Served implementation: "sdpa". Its mask function returns None exactly when a call needs no mask
beyond causality (no padding, no sliding window that binds, no packed sequences), and
``sdpa_attention_forward`` then computes: one query over all its keys, or causal attention aligned
top-left (query i sees keys 0..i), which with Sq == Sk is the op's bottom-right causal mask, and
with 1 < Sq < Sk (prefill into an empty StaticCache) that mask over the first Sq keys, as sdpa
itself slices them. A call is served when it is such a call, with the module's scaling and no
dropout, softcap or position bias; decode steps (Sq == 1 < Sk) on the CPU in float16 and
bfloat16 only (the CUDA kernel does not split a sequence's keys across blocks, and torch's
float32 sdpa is faster on the CPU at short contexts); every other call runs the model's own
function with its mask (see docs/design/integrations.md, "attention").

Layout: the op takes packed tokens ``[T, H, D]``; the batch's rows are its sequences (all Sq long:
``cu_seqlens = [0, Sq, 2 Sq, ...]``, built on the device without a host synchronisation). q and the
projections' k and v are ``[B, S, H, D]`` data viewed ``[B, H, S, D]``: packing them is a view, and
the output ``[B * Sq, Hq, D]`` is the ``[B, Sq, Hq, D]`` transformers wants. k and v that come out
of a DynamicCache (``[B, Hkv, S, D]`` contiguous) are copied once (2 S Hkv D elements; sdpa copies
its output, S Hq D elements, instead). A decode step reads the cache as it is: one sequence per
batch row and KV head (``[B Hkv S, 1, D]``), the group's Hq / Hkv query heads as its one query's
heads, so q ``[B, Hq, 1, D]`` and the output ``[B, 1, Hq, D]`` are views too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import tileops
from tileops.integrations.transformers._architectures import architecture_of, modeling_module
from tileops.integrations.transformers._common import (
    Replacement,
    device_refusal,
    runs_transformers,
    traces_transformers,
)
from tileops.integrations.transformers._rebind import foreign_forward, rebind, unbind

# The global of the modeling modules through which an attention forward finds its function.
INTERFACE = "ALL_ATTENTION_FUNCTIONS"
# The implementations whose masks and attention semantics are mirrored (module docstring).
IMPLEMENTATIONS = ("sdpa",)
# What the op's implementations take (manifest/attention.yaml): the CPU any head dim in three
# dtypes; the CUDA kernel float16 / bfloat16 with head dims 64, 128, 256.
DTYPES = {"cpu": (torch.float32, torch.float16, torch.bfloat16), "cuda": (torch.float16, torch.bfloat16)}
CUDA_HEAD_DIMS = (64, 128, 256)
# The dtypes whose CPU decode steps the op serves: in float32 torch's sdpa is faster below about
# 2k keys (docs/design/integrations.md, "attention").
CPU_DECODE_DTYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Plan:
    """How an attention module is served: its implementation, its scaling, and one op per
    sliding window its forward may pass (None: no window), each built and called once."""

    implementation: str
    scaling: float
    ops: dict[int | None, Any]


def _forward_code(cls: type) -> Any:
    fn: Any = cls.forward
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return getattr(fn, "__code__", None)


def _windows(module: nn.Module, config: Any) -> list[int | None]:
    """The sliding windows the forward may pass: the module's own (Qwen2, Qwen3, Qwen3-MoE) or
    the config's (Mistral-style: Mixtral, Phi-3); None always."""
    found: list[int | None] = [None]
    for value in (getattr(module, "sliding_window", None), getattr(config, "sliding_window", None)):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0 and value not in found:
            found.append(value)
    return found


def _op(scaling: float, window: int | None) -> Any:
    # transformers' window w: key j is visible from query i when i - w < j <= i, so w - 1 keys
    # to the left of the diagonal.
    return tileops.GroupedQueryAttentionVarlenFwdOp(
        causal=True, softmax_scale=scaling, window_left=-1 if window is None else window - 1)


def plan(module: nn.Module, config: Any) -> Plan | str:
    """How to serve an attention module of a listed architecture, or why it cannot be served.

    Each op is built and called once on one token of the module's dtype and device: the call checks
    the op's rules there (the CUDA kernel's dtypes and head dims), and a refusal is the reason."""
    arch = architecture_of(type(module), "attention")
    assert arch is not None
    config = getattr(module, "config", None) or config  # what its forward reads
    implementation = getattr(config, "_attn_implementation", None)
    if implementation not in IMPLEMENTATIONS:
        return (f"attention implementation {implementation!r} (served: {', '.join(map(repr, IMPLEMENTATIONS))}, "
                "whose mask is None exactly when a call is causal without padding; load the model "
                "with attn_implementation='sdpa')")
    if module._forward_hooks or module._forward_pre_hooks:
        return "the module carries forward hooks, which a replacement would drop"
    if foreign_forward(module):
        return "the module's forward is already patched on the instance (accelerate hooks?)"
    modeling = modeling_module(arch)
    code = _forward_code(type(module))
    if modeling is None or not hasattr(getattr(modeling, INTERFACE, None), "get_interface") \
            or code is None or INTERFACE not in code.co_names:
        return f"{arch.module}.{arch.attention}.forward does not call {INTERFACE} (a transformers version not served)"
    qk_dim = getattr(module, "qk_head_dim", None) or getattr(module, "head_dim", None)
    v_dim = getattr(module, "v_head_dim", None) or qk_dim
    if not isinstance(qk_dim, int) or not isinstance(v_dim, int):
        return "no integer head_dim"
    if qk_dim != v_dim:
        return (f"q and k have head dim {qk_dim}, v {v_dim} (multi-head latent attention): "
                "GroupedQueryAttentionVarlenFwdOp takes one head dim for q, k and v")
    scaling = getattr(module, "scaling", None)
    if not isinstance(scaling, (int, float)) or isinstance(scaling, bool):
        return f"scaling {scaling!r} is not a float"
    weight = next(module.parameters(), None)
    if weight is None:
        return "no parameters (its dtype and device are unknown)"
    if (why := device_refusal(weight, "the projection weight")) is not None:
        return why
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    q = torch.zeros(1, heads, qk_dim, dtype=weight.dtype, device=weight.device)
    kv = torch.zeros(1, kv_heads, qk_dim, dtype=weight.dtype, device=weight.device)
    offsets = torch.tensor([0, 1], dtype=torch.int32, device=weight.device)
    ops: dict[int | None, Any] = {}
    try:
        for window in _windows(module, config):
            ops[window] = _op(float(scaling), window)
            with torch.no_grad():
                ops[window](q, kv, kv, offsets, offsets)
    except tileops.Error as exc:
        return str(exc)
    return Plan(implementation, float(scaling), ops)


def _takes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether the op's implementation on this device takes these tensors."""
    device = query.device
    dtypes = DTYPES.get(device.type)
    if dtypes is None or key.device != device or value.device != device:
        return False
    if query.dtype not in dtypes or key.dtype != query.dtype or value.dtype != query.dtype:
        return False
    if query.dim() != 4 or key.dim() != 4 or value.shape != key.shape:
        return False
    b, hq, _, d = query.shape
    if key.shape[0] != b or key.shape[3] != d or hq % key.shape[1] != 0:
        return False
    return device.type != "cuda" or d in CUDA_HEAD_DIMS


def _decodes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether a decode step is served: on the CPU in half precision, over a cache whose k and v
    are contiguous (each batch row and KV head's keys then form one sequence without a copy)."""
    return (query.device.type == "cpu" and query.dtype in CPU_DECODE_DTYPES
            and key.is_contiguous() and value.is_contiguous())


def _serves(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
            attention_mask: Any, args: tuple[Any, ...], kwargs: dict[str, Any], scaling: float) -> bool:
    """Whether a call of sdpa_attention_forward computes exactly what the op computes here."""
    if attention_mask is not None or args or kwargs.get("dropout", 0.0) != 0.0:
        return False
    if kwargs.get("scaling") != scaling or kwargs.get("output_attentions"):
        return False
    if kwargs.get("softcap") is not None or kwargs.get("position_bias") is not None:
        return False  # sdpa raises on a softcap: it still does
    q_len, kv_len = query.shape[2], key.shape[2]
    if q_len > kv_len:
        return False  # no key for a query
    if q_len == 1 and kv_len > 1 and not _decodes(query, key, value):
        return False  # a decode step the op does not serve here (docs/design/integrations.md)
    is_causal = kwargs.get("is_causal")
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    if q_len > 1 and not is_causal:
        return False
    return _takes(query, key, value) and not runs_transformers(query, key, value)


def _attend(op: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """The op over the batch's rows as sequences: [B, Sq, Hq, D]."""
    b, hq, q_len, d = query.shape
    hkv = key.shape[1]
    kv_len = key.shape[2]
    if q_len == 1 and kv_len > 1:
        # A decode step: sequence (row, KV head) holds that head's kv_len keys and one query, whose
        # heads are the group's; query 0 of kv_len keys sees every key under the causal mask.
        rows = b * hkv
        q = query.reshape(rows, hq // hkv, d)
        k = key.reshape(rows * kv_len, 1, d)
        v = value.reshape(rows * kv_len, 1, d)
        cu_q = torch.arange(0, rows + 1, dtype=torch.int32, device=query.device)
        cu_k = torch.arange(0, (rows + 1) * kv_len, kv_len, dtype=torch.int32, device=query.device)
        out, _ = op(q, k, v, cu_q, cu_k)
        return out.view(b, 1, hq, d)
    if kv_len != q_len:  # sdpa's causal mask is aligned top-left: the first q_len keys
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    q = query.transpose(1, 2).reshape(b * q_len, hq, d)
    k = key.transpose(1, 2).reshape(b * q_len, hkv, d)
    v = value.transpose(1, 2).reshape(b * q_len, hkv, d)
    offsets = torch.arange(0, (b + 1) * q_len, q_len, dtype=torch.int32, device=query.device)
    out, _ = op(q, k, v, offsets, offsets)
    return out.view(b, q_len, hq, d)


class _MinTokens:
    """A replacement's compiled_min_tokens as its attention function reads it. The function is
    shared by deep copies of the model (the rebound forward's globals are), so it holds this
    rather than the module: a copy must not keep the original's weights alive."""

    def __init__(self) -> None:
        self.value = 0


def _function(plan: Plan, original: Any, min_tokens: _MinTokens) -> Callable[..., Any]:
    """The attention function of one module: the op where it computes what transformers' function
    of plan.implementation computes, that function (found in `original`, the modeling module's
    interface, at call time) otherwise, and for compiled calls below `min_tokens`."""
    ops, scaling, implementation = plan.ops, plan.scaling, plan.implementation

    def tileops_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attention_mask: Any, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, None]:
        tokens = query.shape[0] * query.shape[2]
        # The compiled threshold first: a call it decides reads nothing else (fewer guards).
        op = None if traces_transformers(tokens, min_tokens.value) else ops.get(kwargs.get("sliding_window"))
        if op is None or not _serves(module, query, key, value, attention_mask, args, kwargs, scaling):
            return original[implementation](module, query, key, value, attention_mask, *args, **kwargs)
        return _attend(op, query, key, value), None

    return tileops_attention


def _interface(plan: Plan, original: Any, min_tokens: _MinTokens) -> Any:
    """An AttentionInterface like `original` (its local names too) whose plan.implementation is
    this module's tileops function."""
    interface = type(original)()
    interface._local_mapping.update(getattr(original, "_local_mapping", {}))
    interface[plan.implementation] = _function(plan, original, min_tokens)
    return interface


class TileOpsAttention(Replacement):
    """An attention module whose attention function is GroupedQueryAttentionVarlenFwdOp where
    that computes exactly what the model's function computes.

    It stands where the transformers module was, holding its submodules (and parameters) under
    the same names, and calls that module, whose forward is rebound (see the module doc): the
    projections, rotation and cache update are the module's own.
    """

    kind = "attention"

    def __init__(self, hf_module: nn.Module, plan: Plan) -> None:
        super().__init__(hf_module)
        for name, child in hf_module.named_children():  # same objects, same state_dict keys
            self.add_module(name, child)
        for name, param in hf_module.named_parameters(recurse=False):
            self.register_parameter(name, param)
        for name, buffer in hf_module.named_buffers(recurse=False):
            self.register_buffer(name, buffer, persistent=name not in hf_module._non_persistent_buffers_set)
        self.plan = plan
        arch = architecture_of(type(hf_module), "attention")
        assert arch is not None
        modeling = modeling_module(arch)
        assert modeling is not None
        self._min_tokens = _MinTokens()
        rebind(hf_module, modeling, {INTERFACE: _interface(plan, vars(modeling)[INTERFACE], self._min_tokens)})

    @property  # type: ignore[override]
    def compiled_min_tokens(self) -> int:
        return self._min_tokens.value

    @compiled_min_tokens.setter
    def compiled_min_tokens(self, value: int) -> None:
        self._min_tokens.value = value

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf_module.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        windows = [w for w in self.plan.ops if w is not None]
        return f"implementation={self.plan.implementation}, scaling={self.plan.scaling:.6g}" + (
            f", sliding_window={windows}" if windows else "")


def restore(replacement: TileOpsAttention) -> None:
    """Undoes the rebinding: the module finds transformers' attention functions again."""
    arch = architecture_of(type(replacement.hf_module), "attention")
    assert arch is not None
    modeling = modeling_module(arch)
    assert modeling is not None
    unbind(replacement.hf_module, modeling, [INTERFACE])


__all__ = ["IMPLEMENTATIONS", "INTERFACE", "Plan", "TileOpsAttention", "plan", "restore"]
