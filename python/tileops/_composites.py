"""The forwards of the composite ops, mirroring the C++ classes (src/ops/moe/moe_composites.cpp).

A composite has no custom operator: its forward calls its stages' ops, so that traced, the
stages' nodes appear in the graph. Sub-ops settled by the parameters are built at construction
(held before any tracing, so a cold ``fullgraph=True`` compile never constructs); the
pre-permute of FusedMoEExpertsFwdOp depends on the call's expert count (and, on the masked
decode path, its token count) and is built at the first call with that count (call eagerly once
before compiling).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tileops.errors import UsageError


def _ops() -> Any:
    from tileops import ops

    return ops


def _construct_mlp(op: Any) -> None:
    ops = _ops()
    op._gate_up = op.delegate_for("gate_up", None, ops.MoEGroupedGemmFwdOp, activation=op._params["activation"])
    op._down = op.delegate_for("down", None, ops.MoEGroupedGemmFwdOp, activation="none")


def _forward_mlp(op: Any, x: torch.Tensor, offsets: torch.Tensor, w13: torch.Tensor,
                 w2: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    h = op._gate_up(x, offsets, w13)
    return op._down(h, offsets, w2, out=out)


# The FP8 MLP's blocks: 1 x 128 activation groups, 128 x 128 weight blocks (manifest/moe.yaml).
_FP8_BLOCK = 128


def _construct_mlp_fp8(op: Any) -> None:
    ops = _ops()
    act = op._params["activation"]
    op._quantize_x = op.delegate_for("quantize_x", None, ops.PerTokenGroupQuantFP8FwdOp, group_size=_FP8_BLOCK)
    op._gate_up = op.delegate_for("gate_up", None, ops.MoEGroupedGemmFP8FwdOp, activation=act,
                                  block_n=_FP8_BLOCK, block_k=_FP8_BLOCK)
    op._quantize_h = op.delegate_for("quantize_h", None, ops.PerTokenGroupQuantFP8FwdOp, group_size=_FP8_BLOCK)
    op._down = op.delegate_for("down", None, ops.MoEGroupedGemmFP8FwdOp, activation="none",
                               block_n=_FP8_BLOCK, block_k=_FP8_BLOCK)


def _forward_mlp_fp8(op: Any, x: torch.Tensor, offsets: torch.Tensor, w13: torch.Tensor,
                     w2: torch.Tensor, w13_scales: torch.Tensor, w2_scales: torch.Tensor,
                     x_scales: torch.Tensor | None, out: torch.Tensor | None) -> torch.Tensor:
    # e4m3 x arrives quantized with its scales (the signature tied them to its dtype).
    xq, xs = (x, x_scales) if x.dtype == torch.float8_e4m3fn else op._quantize_x(x)
    h = op._gate_up(xq, xs, offsets, w13, w13_scales)
    hq, hs = op._quantize_h(h)
    return op._down(hq, hs, offsets, w2, w2_scales, out=out)


def _construct_mlp_fp8_masked(op: Any) -> None:
    ops = _ops()
    act = op._params["activation"]
    op._gate_up = op.delegate_for("gate_up", None, ops.MoEGroupedGemmFP8MaskedFwdOp, activation=act,
                                  block_n=_FP8_BLOCK, block_k=_FP8_BLOCK)
    op._quantize_h = op.delegate_for("quantize_h", None, ops.PerTokenGroupQuantFP8FwdOp, group_size=_FP8_BLOCK)
    op._down = op.delegate_for("down", None, ops.MoEGroupedGemmFP8MaskedFwdOp, activation="none",
                               block_n=_FP8_BLOCK, block_k=_FP8_BLOCK)


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
    ops = _ops()
    op._mlp = op.delegate_for("mlp", None, ops.MoEExpertMLPFwdOp, activation=op._params["activation"])
    op._post = op.delegate_for("post_permute", None, ops.MoEPostPermuteFwdOp)


def _forward_experts(op: Any, x: torch.Tensor, topk_weights: torch.Tensor,
                     topk_ids: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
                     expert_map: torch.Tensor | None, w13_scales: torch.Tensor | None,
                     w2_scales: torch.Tensor | None, out: torch.Tensor | None) -> torch.Tensor:
    experts = int(w13.shape[0])
    tokens = int(x.shape[0])
    rows = int(op._params.get("masked_max_rows", 0))
    if w13.dtype == torch.float8_e4m3fn and rows > 0 and tokens * int(topk_ids.shape[1]) <= rows * experts:
        # The masked decode path, by shape only (a CUDA graph replays one route); max_m = M:
        # ids distinct per token give no expert more rows.
        max_m = max(1, tokens)
        pre_masked = op.delegate_for("pre_permute_quant_masked", f"E={experts},max_m={max_m}",
                                     _ops().MoEPrePermuteQuantFP8MaskedFwdOp, num_experts=experts,
                                     max_m=max_m, group_size=_FP8_BLOCK)
        a, a_scales, counts, inverse = pre_masked(x, topk_ids, expert_map)
        mlp = op.delegate_for("mlp_fp8_masked", None, _ops().MoEExpertMLPFP8MaskedFwdOp,
                              activation=op._params["activation"])
        h = mlp(a, a_scales, counts, w13, w2, w13_scales, w2_scales)
        return op._post(h.reshape(experts * max_m, -1), topk_weights, inverse, out=out)
    if w13.dtype == torch.float8_e4m3fn:
        # The weights' dtype selects the MLP; the FP8 path's sub-ops are held at the first FP8
        # call. The rows are quantized as they are gathered (no bf16 copy of the M*K rows).
        pre_quant = op.delegate_for("pre_permute_quant", f"E={experts}",
                                    _ops().MoEPrePermuteQuantFP8FwdOp, num_experts=experts,
                                    group_size=_FP8_BLOCK)
        xq, xs, offsets, inverse = pre_quant(x, topk_ids, expert_map)
        mlp = op.delegate_for("mlp_fp8", None, _ops().MoEExpertMLPFP8FwdOp,
                              activation=op._params["activation"])
        h = mlp(xq, offsets, w13, w2, w13_scales, w2_scales, xs)
        return op._post(h, topk_weights, inverse, out=out)
    pre = op.delegate_for("pre_permute", f"E={experts}", _ops().MoEPrePermuteFwdOp, num_experts=experts)
    permuted, offsets, inverse = pre(x, topk_ids, expert_map)
    h = op._mlp(permuted, offsets, w13, w2)
    return op._post(h, topk_weights, inverse, out=out)


def _construct_fused(op: Any) -> None:
    ops = _ops()
    p = op._params
    if p.get("activation") is None:
        p["activation"] = "silu_and_mul"
    op._routing = op.delegate_for(
        "routing", None, ops.MoETopKRoutingFwdOp, top_k=p["top_k"], scoring=p["scoring"],
        renormalize=p["renormalize"], routed_scaling_factor=p["routed_scaling_factor"],
        n_group=p["n_group"], topk_group=p["topk_group"],
    )
    op._experts = op.delegate_for("experts", None, ops.FusedMoEExpertsFwdOp, activation=p["activation"],
                                  masked_max_rows=p.get("masked_max_rows", 0))


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
        raise UsageError(f"tileops: composite {name} has no Python forward")
    return _COMPOSITES[name]


def construct(op: Any) -> None:
    """Builds the sub-ops the parameters settle."""
    _entry(op)[0](op)


def forward(op: Any, inputs: tuple[Any, ...], out: torch.Tensor | None) -> torch.Tensor:
    """Runs the composite's stages."""
    return _entry(op)[1](op, *inputs, out)


def names() -> list[str]:
    """The composites with a Python forward."""
    return sorted(_COMPOSITES)
