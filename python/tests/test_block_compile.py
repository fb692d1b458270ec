"""torch.compile(fullgraph=True) of a small transformer block using RMSNorm, fused add+RMSNorm,
LongRoPE and the fused MoE layer: no graph break, each boundary op one node, the composite
traced through to its stages' nodes, results equal to eager, and one compilation for several
token counts with the token dimension marked dynamic."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch

import tileops

HIDDEN, HEADS, ROT, EXPERTS, FFN, TOP_K = 64, 2, 16, 8, 32, 2


class Block:
    """Norm -> rotary on a head view -> residual add + norm -> MoE, all tileops."""

    def __init__(self, device: str, dtype: torch.dtype) -> None:
        g = torch.Generator().manual_seed(0)
        self.norm = tileops.RMSNormFwdOp(normalized_shape=[HIDDEN], eps=1e-6)
        self.add_norm = tileops.FusedAddRMSNormFwdOp(normalized_shape=[HIDDEN], eps=1e-6)
        factors = 1 + torch.rand(ROT, generator=g)
        self.rope = tileops.LongRoPEFwdOp(rescale_factors=factors.to(device), layout="bshd")
        self.moe = tileops.FusedMoEFwdOp(top_k=TOP_K, scoring="softmax", renormalize=True)
        self.w1 = (1 + 0.1 * torch.randn(HIDDEN, generator=g)).to(dtype).to(device)
        self.w2 = (1 + 0.1 * torch.randn(HIDDEN, generator=g)).to(dtype).to(device)
        self.router = (0.2 * torch.randn(EXPERTS, HIDDEN, generator=g)).to(dtype).to(device)
        self.w13 = (0.1 * torch.randn(EXPERTS, 2 * FFN, HIDDEN, generator=g)).to(dtype).to(device)
        self.w_down = (0.1 * torch.randn(EXPERTS, HIDDEN, FFN, generator=g)).to(dtype).to(device)

    def __call__(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        tokens = x.shape[0]
        h = self.norm(x, self.w1)
        q = self.rope(h.view(1, tokens, HEADS, HIDDEN // HEADS))
        h2 = self.add_norm(q.view(tokens, HIDDEN), residual, self.w2)
        logits = h2 @ self.router.t()
        return self.moe(h2, logits, self.w13, self.w_down)


def _inputs(tokens: int, device: str, dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, HIDDEN, generator=g).to(dtype).to(device)
    r = torch.randn(tokens, HIDDEN, generator=g).to(dtype).to(device)
    return x, r


class Recorder:
    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        self.graphs.append(gm)
        return gm.forward

    def tileops_nodes(self) -> Counter[str]:
        return Counter(
            str(n.target).split(".")[1]
            for gm in self.graphs
            for n in gm.graph.nodes
            if n.op == "call_function" and str(n.target).startswith("tileops.")
        )


def _run(block: Block, fn: Any, tokens: int, device: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    x, r = _inputs(tokens, device, dtype)
    y = fn(x, r)
    return y, r


def test_block_fullgraph_nodes_and_eager_equality(device: str) -> None:
    dtype = torch.bfloat16
    torch._dynamo.reset()
    block = Block(device, dtype)
    want, want_r = _run(block, block, 12, device, dtype)  # eager; builds the held sub-ops
    rec = Recorder()
    got, got_r = _run(block, torch.compile(block, fullgraph=True, backend=rec), 12, device, dtype)
    assert len(rec.graphs) == 1  # fullgraph: no break
    assert rec.tileops_nodes() == Counter({
        "norm_rms_norm_fwd": 1,
        "rope_long_rope_fwd": 1,
        "norm_fused_add_rms_norm_fwd_writes_residual": 1,
        "moe_top_k_routing_fwd": 1,
        "moe_pre_permute_fwd": 1,
        "moe_grouped_gemm_fwd": 2,
        "moe_post_permute_fwd": 1,
    })
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(got_r, want_r, rtol=0, atol=0)


def test_block_inductor_equals_eager(device: str) -> None:
    dtype = torch.float16
    torch._dynamo.reset()
    block = Block(device, dtype)
    want, want_r = _run(block, block, 9, device, dtype)
    got, got_r = _run(block, torch.compile(block, fullgraph=True), 9, device, dtype)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(got_r, want_r, rtol=0, atol=0)


def test_block_dynamic_tokens_compile_once(device: str) -> None:
    dtype = torch.bfloat16
    torch._dynamo.reset()
    block = Block(device, dtype)
    block(*_inputs(5, device, dtype))
    rec = Recorder()
    compiled = torch.compile(block, fullgraph=True, backend=rec, dynamic=False)
    for tokens in (7, 11, 19, 33):
        x, r = _inputs(tokens, device, dtype, seed=tokens)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(r, 0)
        x2, r2 = x.clone(), r.clone()
        got = compiled(x, r)
        want = block(x2, r2)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(r, r2, rtol=0, atol=0)
    assert len(rec.graphs) == 1
