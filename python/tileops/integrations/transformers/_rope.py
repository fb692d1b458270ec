"""The "rope" kind: rotary position embedding served by LongRoPEFwdOp.

transformers splits rotary embedding in two: the model's rotary module computes cos and sin once
per forward, and each attention forward rotates q and k with a function of its modeling module
(``apply_rotary_pos_emb``) that it looks up as a global. LongRoPEFwdOp takes positions, not cos
and sin, so both halves are served together, for one model instance only:

- the rotary module is replaced by :class:`TileOpsRotaryEmbedding`, whose output (what the model
  hands every layer as ``position_embeddings``) is ``(positions, use_long)``: the positions
  ``[B, S]`` and, for LongRoPE, whether this call takes the long factors;
- each attention module of the model gets an instance-level ``forward``: the class's own forward
  (and the decorators around it) rebuilt over a copy of the modeling module's globals in which
  the rotation functions are this model's tileops ones (_rebind.py, which the attention kind
  shares). The class, the modeling module and every other model are untouched (no global
  monkeypatch).

The two go together or not at all: a rotary module is replaced only when every attention module
that reads its output can be rebound, so no transformers code ever receives the positions as cos.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

import tileops
from tileops.integrations.transformers._architectures import Architecture, architecture_of, modeling_module
from tileops.integrations.transformers._common import (
    Replacement,
    device_refusal,
    hooks_refusal,
    runs_transformers,
    traces_transformers,
    unwrapped,
)
from tileops.integrations.transformers._rebind import foreign_forward, forward_globals, rebind, unbind

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# rope types whose frequencies are fixed at construction (the op's rescale_factors are a
# construction-time tensor); LongRoPE's two sets are two ops. "dynamic" recomputes its
# frequencies from the sequence length.
STATIC_TYPES = ("default", "linear", "llama3", "yarn")


def _rope_parameters(rotary: nn.Module) -> dict[str, Any]:
    config = getattr(rotary, "config", None)
    params = getattr(config, "rope_parameters", None)
    params = dict(params) if isinstance(params, dict) else {}
    if params.get("original_max_position_embeddings") is None:  # Phi-3 keeps it on the config
        params["original_max_position_embeddings"] = getattr(config, "original_max_position_embeddings", None)
    return params


def _consumers(root: nn.Module, arch: Architecture) -> list[tuple[str, nn.Module]]:
    """The attention modules under `root` (the rotary module's parent: its model), also those
    the attention kind stands in for."""
    modules = ((name, unwrapped(m)) for name, m in root.named_modules())
    return [(name, m) for name, m in modules if type(m).__name__ == arch.attention]


def refusal(rotary: nn.Module, parent: nn.Module) -> str | None:
    """Why the rotary module `rotary` (child of `parent`) cannot be served, or None."""
    arch = architecture_of(type(rotary), "rotary")
    assert arch is not None
    rope_type = getattr(rotary, "rope_type", None)
    if not isinstance(rope_type, str):
        return f"rope_type {rope_type!r}: per-layer rope parameters are not served"
    if rope_type not in (*STATIC_TYPES, "longrope"):
        return (f"rope_type '{rope_type}' is not served (its frequencies change with the sequence "
                f"length, or the type is unknown); served: {', '.join((*STATIC_TYPES, 'longrope'))}")
    inv_freq = getattr(rotary, "inv_freq", None)
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.dim() != 1:
        return "no 1-D inv_freq buffer"
    if (why := device_refusal(inv_freq, "inv_freq")) is not None:
        return why
    if rope_type == "longrope":
        params = _rope_parameters(rotary)
        for key in ("short_factor", "long_factor"):
            if len(params.get(key) or ()) != inv_freq.numel():
                return f"rope_parameters['{key}'] does not have {inv_freq.numel()} entries"
        if not isinstance(params.get("original_max_position_embeddings"), int):
            return "rope_parameters has no original_max_position_embeddings"
    if (why := hooks_refusal(rotary)) is not None:
        return why
    module = modeling_module(arch)
    missing = [name for name, _ in arch.rope_functions if not callable(getattr(module, name, None))]
    if missing:
        return f"{arch.module} has no {', '.join(missing)} (a transformers version not served)"
    consumers = _consumers(parent, arch)
    if not consumers:
        return f"no {arch.attention} module reads its output"
    for name, attn in consumers:
        if foreign_forward(attn):
            return (f"{name}: the attention forward is already patched on the instance (accelerate "
                    "hooks?), so its rotation cannot be rebound")
        if type(attn).__name__ != arch.attention or architecture_of(type(attn), "attention") is not arch:
            return f"{name}: {type(attn).__name__} is not {arch.module}.{arch.attention}"
    return None


def _factors(inv_freq: torch.Tensor, base: float) -> torch.Tensor:
    """rescale_factors giving LongRoPEFwdOp's inv_freq[i] = 1 / (f[i] * base^(2i/D)) = inv_freq."""
    inv = inv_freq.detach().double().cpu()
    d = 2 * inv.numel()
    exponent = torch.arange(0, d, 2, dtype=torch.float64) / d
    return (1.0 / (inv * base**exponent)).float()


class TileOpsRotaryEmbedding(Replacement):
    """The model's rotary module, computing nothing but the positions its rotations take.

    ``forward(x, position_ids)`` returns ``(positions [B, S], use_long)`` in place of (cos, sin);
    ``use_long`` is a 0-d bool tensor for LongRoPE (the long factors when the call's largest
    position + 1 exceeds original_max_position_embeddings, as transformers decides, without a
    host synchronisation) and None otherwise. :meth:`rotate` serves the attention modules. A
    compiled call below ``compiled_min_tokens`` returns transformers' (cos, sin) instead, computed
    once for every layer as the unpatched model does; the rotations then run transformers' code.
    """

    kind = "rope"

    def __init__(self, hf_module: nn.Module) -> None:
        super().__init__(hf_module)
        params = _rope_parameters(hf_module)
        theta = params.get("rope_theta")
        base = float(theta) if isinstance(theta, (int, float)) and theta > 0 else 10000.0
        scaling = float(hf_module.attention_scaling)
        self.rope_type: str = hf_module.rope_type
        self.rotary_dim = 2 * int(hf_module.inv_freq.numel())

        def op(factors: torch.Tensor) -> Any:
            return tileops.LongRoPEFwdOp(rescale_factors=factors, base=base, attention_scaling=scaling,
                                         layout="bshd")

        self.long: Any = None
        self.original_max_position_embeddings = 0
        if self.rope_type == "longrope":
            self.short = op(torch.tensor(params["short_factor"], dtype=torch.float32))
            self.long = op(torch.tensor(params["long_factor"], dtype=torch.float32))
            self.original_max_position_embeddings = int(params["original_max_position_embeddings"])
        else:
            self.short = op(_factors(hf_module.inv_freq, base))

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor | None = None,
                *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        if position_ids is None:
            raise tileops.UsageError("tileops: the rotary embedding needs position_ids")
        if traces_transformers(x.shape[0] * position_ids.shape[-1], self.compiled_min_tokens):
            # transformers' cos and sin, once for every layer as in the unpatched model (the
            # rotations see float cos and run transformers' code with it)
            return self.hf_module.forward(x, position_ids, *args, **kwargs)
        positions = position_ids.expand(x.shape[0], position_ids.shape[-1]).contiguous()
        use_long = None
        if self.long is not None:
            use_long = positions.amax() + 1 > self.original_max_position_embeddings
        return positions, use_long

    def rotate(self, x: torch.Tensor, positions: torch.Tensor, use_long: torch.Tensor | None,
               heads_dim: int, interleaved: bool) -> torch.Tensor:
        """x rotated: [B, H, S, D] (heads_dim 1) or [B, S, H, D] (heads_dim 2); the first
        rotary_dim channels rotate (interleaved pairs: DeepSeek's layout, returned in halves as
        transformers returns it), the rest pass."""
        bshd = x.transpose(1, 2) if heads_dim == 1 else x
        rot = bshd if bshd.shape[-1] == self.rotary_dim else bshd[..., : self.rotary_dim]
        if interleaved:
            rot = torch.cat((rot[..., 0::2], rot[..., 1::2]), dim=-1)
        y = self.short(rot, positions)
        if self.long is not None:
            y = torch.where(use_long, self.long(rot, positions), y)
        if bshd.shape[-1] != self.rotary_dim:
            y = torch.cat((y, bshd[..., self.rotary_dim :]), dim=-1)
        return y.transpose(1, 2) if heads_dim == 1 else y

    def extra_repr(self) -> str:
        return f"rope_type={self.rope_type}, rotary_dim={self.rotary_dim}"


def _heads_dim_reader(fn: Callable[..., Any]) -> Callable[[tuple[Any, ...], dict[str, Any]], int]:
    """Reads the unsqueeze_dim (the heads dimension of q and k) of a call of rotation function
    `fn` from the arguments after (q, k, cos, sin); read from the signature once, here."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names = [p.name for p in parameters]
    at = names.index("unsqueeze_dim") - 4 if "unsqueeze_dim" in names else -1
    default = parameters[at + 4].default if at >= 0 else 1
    default = 1 if default is inspect.Parameter.empty else int(default)

    def read(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        if "unsqueeze_dim" in kwargs:
            return int(kwargs["unsqueeze_dim"])
        return int(args[at]) if 0 <= at < len(args) else default

    return read


def _rotation(rope: TileOpsRotaryEmbedding, original: Callable[..., Any], layout: str) -> Callable[..., Any]:
    """What the rebound attention forward calls in place of `original` (same arguments)."""
    interleaved = layout == "interleaved"
    heads_dim_of = _heads_dim_reader(original)

    def rotate_q_k(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor | None,
                   *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if cos.is_floating_point():  # the rotary module traced transformers' code (cos, not positions)
            return original(q, k, cos, sin, *args, **kwargs)
        positions, use_long = cos, sin
        heads_dim = heads_dim_of(args, kwargs)
        tokens = q.shape[0] * q.shape[2 if heads_dim == 1 else 1]  # rotate()'s layouts
        if traces_transformers(tokens, rope.compiled_min_tokens) \
                or q.dtype not in DTYPES or k.dtype not in DTYPES or runs_transformers(q, k):
            # transformers' own rotation, from its rotary module's cos and sin
            cos, sin = rope.hf_module.forward(q, positions)
            return original(q, k, cos, sin, *args, **kwargs)
        return (rope.rotate(q, positions, use_long, heads_dim, interleaved),
                rope.rotate(k, positions, use_long, heads_dim, interleaved))

    return rotate_q_k


def replace(rotary: nn.Module, parent: nn.Module) -> tuple[TileOpsRotaryEmbedding, int]:
    """The replacement of `rotary`, with every attention module under `parent` rebound to it;
    returns it and the number of attention modules rebound."""
    arch = architecture_of(type(rotary), "rotary")
    assert arch is not None
    module = modeling_module(arch)
    assert module is not None
    rope = TileOpsRotaryEmbedding(rotary)
    rotations = {name: _rotation(rope, vars(module)[name], layout) for name, layout in arch.rope_functions}
    consumers = _consumers(parent, arch)
    for _, attn in consumers:
        rebind(attn, module, rotations)
    return rope, len(consumers)


def restore(rope: TileOpsRotaryEmbedding, parent: nn.Module) -> None:
    """Undoes replace(): the attention modules under `parent` rotate as their class does (and get
    their class's forward back when no other kind serves them)."""
    arch = architecture_of(type(rope.hf_module), "rotary")
    assert arch is not None
    module = modeling_module(arch)
    assert module is not None
    for _, attn in _consumers(parent, arch):
        unbind(attn, module, [name for name, _ in arch.rope_functions])


def rotary_functions(attn: nn.Module) -> Iterator[tuple[dict[str, Any], str]]:
    """(globals, name) of the rotation functions an attention module's forward calls: the
    modeling module's, or this integration's copy when rebound (the bench wraps them to time
    the rotation)."""
    arch = architecture_of(type(attn), "attention")
    if arch is None:
        return
    namespace = forward_globals(attn)
    for name, _ in arch.rope_functions:
        if name in namespace:
            yield namespace, name


__all__ = ["TileOpsRotaryEmbedding", "refusal", "replace", "restore", "rotary_functions"]
