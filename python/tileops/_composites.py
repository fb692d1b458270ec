"""The wiring of the composite ops, the same as the C++ classes' forwards
(src/ops/moe/moe_composites.cpp; python/tests/test_composite_rules.py checks that both give the
same bits and the same stage records).

The stages are the C++ composite's held sub-ops (CompositeOp.delegate_for asks the C++ instance),
so that the class and holding rules, the records and the undo are the C++ base class's. Traced,
each stage's custom operator is a node. Sub-ops settled by the parameters are held at
construction (before any tracing, so a cold ``fullgraph=True`` compile never builds one), the
FP8 MLPs of FusedMoEExpertsFwdOp included; its pre-permute depends on the call's expert count
(and, on the masked decode path, its token count) and is held at the first call with that count
(call eagerly once before compiling).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tileops.errors import UsageError

# The FP8 MLP's blocks: 1 x 128 activation groups, 128 x 128 weight blocks (manifest/moe.yaml).
_FP8_BLOCK = 128


def _construct_mlp(op: Any) -> None:
    op._gate_up = op.delegate_for("gate_up", None, activation=op._params["activation"])
    op._down = op.delegate_for("down", None, activation="none")


def _forward_mlp(op: Any, x: torch.Tensor, offsets: torch.Tensor, w13: torch.Tensor,
                 w2: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    h = op._gate_up(x, offsets, w13)
    return op._down(h, offsets, w2, out=out)


def _construct_mlp_fp8(op: Any) -> None:
    act = op._params["activation"]
    op._quantize_x = op.delegate_for("quantize_x", None, group_size=_FP8_BLOCK)
    op._gate_up = op.delegate_for("gate_up", None, activation=act, block_n=_FP8_BLOCK,
                                  block_k=_FP8_BLOCK)
    op._quantize_h = op.delegate_for("quantize_h", None, group_size=_FP8_BLOCK)
    op._down = op.delegate_for("down", None, activation="none", block_n=_FP8_BLOCK,
                               block_k=_FP8_BLOCK)


def _forward_mlp_fp8(op: Any, x: torch.Tensor, offsets: torch.Tensor, w13: torch.Tensor,
                     w2: torch.Tensor, w13_scales: torch.Tensor, w2_scales: torch.Tensor,
                     x_scales: torch.Tensor | None, out: torch.Tensor | None) -> torch.Tensor:
    # e4m3 x arrives quantized with its scales (the signature tied them to its dtype).
    xq, xs = (x, x_scales) if x.dtype == torch.float8_e4m3fn else op._quantize_x(x)
    h = op._gate_up(xq, xs, offsets, w13, w13_scales)
    hq, hs = op._quantize_h(h)
    return op._down(hq, hs, offsets, w2, w2_scales, out=out)


def _construct_mlp_fp8_masked(op: Any) -> None:
    act = op._params["activation"]
    op._gate_up = op.delegate_for("gate_up", None, activation=act, block_n=_FP8_BLOCK,
                                  block_k=_FP8_BLOCK)
    op._quantize_h = op.delegate_for("quantize_h", None, group_size=_FP8_BLOCK)
    op._down = op.delegate_for("down", None, activation="none", block_n=_FP8_BLOCK,
                               block_k=_FP8_BLOCK)


def _forward_mlp_fp8_masked(op: Any, x: torch.Tensor, x_scales: torch.Tensor, counts: torch.Tensor,
                            w13: torch.Tensor, w2: torch.Tensor, w13_scales: torch.Tensor,
                            w2_scales: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    experts, max_m = int(x.shape[0]), int(x.shape[1])
    h = op._gate_up(x, x_scales, counts, w13, w13_scales)
    f = int(h.shape[2])
    # Every row of h is quantized, the zeros past the counts included (as in C++).
    hq, hs = op._quantize_h(h.reshape(experts * max_m, f))
    return op._down(hq.reshape(experts, max_m, f), hs.reshape(experts, max_m, -1), counts, w2,
                    w2_scales, out=out)


def _construct_experts(op: Any) -> None:
    act = op._params["activation"]
    op._mlp = op.delegate_for("mlp", None, activation=act)
    # The FP8 MLPs' arguments are settled here too, so they are held at construction (issue 27,
    # item 7): a bf16 model holds two sub-ops it never calls, and nothing is built before a call.
    op._mlp_fp8 = op.delegate_for("mlp_fp8", None, activation=act)
    op._mlp_fp8_masked = op.delegate_for("mlp_fp8_masked", None, activation=act)
    op._post = op.delegate_for("post_permute", None)


def _forward_experts(op: Any, x: torch.Tensor, topk_weights: torch.Tensor,
                     topk_ids: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
                     expert_map: torch.Tensor | None, w13_scales: torch.Tensor | None,
                     w2_scales: torch.Tensor | None, out: torch.Tensor | None) -> torch.Tensor:
    # The expert count is known only now: one pre-permute sub-op per count (identity "E=<n>").
    experts = int(w13.shape[0])
    tokens = int(x.shape[0])
    rows = int(op._params["masked_max_rows"])
    if w13.dtype == torch.float8_e4m3fn and rows > 0 and tokens * int(topk_ids.shape[1]) <= rows * experts:
        # The masked decode path, by shape only (a CUDA graph replays one route); max_m = M:
        # ids distinct per token give no expert more rows.
        max_m = max(1, tokens)
        pre_masked = op.delegate_for("pre_permute_quant_masked", f"E={experts},max_m={max_m}",
                                     num_experts=experts, max_m=max_m, group_size=_FP8_BLOCK)
        a, a_scales, counts, inverse = pre_masked(x, topk_ids, expert_map)
        h = op._mlp_fp8_masked(a, a_scales, counts, w13, w2, w13_scales, w2_scales)
        return op._post(h.reshape(experts * max_m, -1), topk_weights, inverse, out=out)
    if w13.dtype == torch.float8_e4m3fn:
        # The weights' dtype selects the MLP. The rows are quantized as they are gathered (no
        # bf16 copy of the M*K rows).
        pre_quant = op.delegate_for("pre_permute_quant", f"E={experts}", num_experts=experts,
                                    group_size=_FP8_BLOCK)
        xq, xs, offsets, inverse = pre_quant(x, topk_ids, expert_map)
        h = op._mlp_fp8(xq, offsets, w13, w2, w13_scales, w2_scales, xs)
        return op._post(h, topk_weights, inverse, out=out)
    pre = op.delegate_for("pre_permute", f"E={experts}", num_experts=experts)
    permuted, offsets, inverse = pre(x, topk_ids, expert_map)
    h = op._mlp(permuted, offsets, w13, w2)
    return op._post(h, topk_weights, inverse, out=out)


def _construct_fused(op: Any) -> None:
    p = op._params  # as the C++ constructor settled them (activation None -> silu_and_mul)
    op._routing = op.delegate_for(
        "routing", None, top_k=p["top_k"], scoring=p["scoring"], renormalize=p["renormalize"],
        routed_scaling_factor=p["routed_scaling_factor"], n_group=p["n_group"],
        topk_group=p["topk_group"],
    )
    op._experts = op.delegate_for("experts", None, activation=p["activation"],
                                  masked_max_rows=p["masked_max_rows"])


def _forward_fused(op: Any, x: torch.Tensor, router_logits: torch.Tensor, w13: torch.Tensor,
                   w2: torch.Tensor, correction_bias: torch.Tensor | None,
                   w13_scales: torch.Tensor | None, w2_scales: torch.Tensor | None,
                   out: torch.Tensor | None) -> torch.Tensor:
    topk_weights, topk_ids = op._routing(router_logits, correction_bias)
    # The single-device prepare/finalize passes the tokens through; the experts write `out`.
    return op._experts(x, topk_weights, topk_ids, w13, w2, None, w13_scales, w2_scales, out=out)


_COMPOSITES: dict[str, tuple[Callable[[Any], None], Callable[..., torch.Tensor]]] = {
    "MoEExpertMLPFwdOp": (_construct_mlp, _forward_mlp),
    "MoEExpertMLPFP8FwdOp": (_construct_mlp_fp8, _forward_mlp_fp8),
    "MoEExpertMLPFP8MaskedFwdOp": (_construct_mlp_fp8_masked, _forward_mlp_fp8_masked),
    "FusedMoEExpertsFwdOp": (_construct_experts, _forward_experts),
    "FusedMoEFwdOp": (_construct_fused, _forward_fused),
}


def _entry(op: Any) -> tuple[Callable[[Any], None], Callable[..., torch.Tensor]]:
    name = type(op).__name__
    if name not in _COMPOSITES:
        raise UsageError(f"tileops: composite {name} has no Python wiring")
    return _COMPOSITES[name]


def construct(op: Any) -> None:
    """Holds the sub-ops the parameters settle."""
    _entry(op)[0](op)


def forward(op: Any, inputs: tuple[Any, ...], out: torch.Tensor | None) -> torch.Tensor:
    """Runs the composite's stages."""
    return _entry(op)[1](op, *inputs, out)


def names() -> list[str]:
    """The composites with a Python wiring."""
    return sorted(_COMPOSITES)
