"""Cold torch.compile(op, fullgraph=True) of every boundary op, and the check that none lacks it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import samples
import tileops
from compile_contract import CONTRACTS, register_compile_contract


def _cold_compile(case: samples.Case, n_nodes: int = 1) -> None:
    torch._dynamo.reset()
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    op = samples.build(case)  # fresh instance: nothing built, no target selected yet
    compiled = torch.compile(op, fullgraph=True, backend=backend)
    got = compiled(*case.inputs)
    want = samples.build(case)(*case.inputs)
    assert len(graphs) == 1
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "tileops" in str(n.target)]
    assert len(calls) == n_nodes
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@register_compile_contract("RMSNormFwdOp")
def cold_rms_norm(device: str) -> None:
    _cold_compile(samples.rms_norm(device, torch.bfloat16, (3,), 64))


@register_compile_contract("FusedAddRMSNormFwdOp")
def cold_fused_add(device: str) -> None:
    # The op writes residual: compile and eager each get their own copy.
    case = samples.fused_add_rms_norm(device, torch.float16, 4, 64)
    torch._dynamo.reset()
    op = samples.build(case)
    x, residual, w = case.inputs
    r1, r2 = residual.clone(), residual.clone()
    got = torch.compile(op, fullgraph=True, backend="aot_eager")(x, r1, w)
    want = samples.build(case)(x, r2, w)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(r1, r2, rtol=0, atol=0)


@register_compile_contract("LongRoPEFwdOp")
def cold_long_rope(device: str) -> None:
    _cold_compile(samples.long_rope(device, torch.bfloat16, "bshd", True))


@register_compile_contract("MoETopKRoutingFwdOp")
def cold_routing(device: str) -> None:
    _cold_compile(samples.routing(device, torch.float32, 8, 16, 4, "softmax", True))


@register_compile_contract("MoEPrePermuteFwdOp")
def cold_pre_permute(device: str) -> None:
    _cold_compile(samples.pre_permute(device, torch.bfloat16, 6, 32, 2, 8, False))


@register_compile_contract("MoEPrePermuteQuantFP8FwdOp")
def cold_pre_permute_quant(device: str) -> None:
    _cold_compile(samples.pre_permute_quant(device, torch.bfloat16, 6, 256, 2, 8, True))


@register_compile_contract("MoEPrePermuteQuantFP8MaskedFwdOp")
def cold_pre_permute_quant_masked(device: str) -> None:
    _cold_compile(samples.pre_permute_quant_masked(device, torch.bfloat16, 6, 256, 2, 4, False))


@register_compile_contract("MoEGroupedGemmFwdOp")
def cold_grouped_gemm(device: str) -> None:
    _cold_compile(samples.grouped_gemm(device, torch.bfloat16, 16, 3, 64, 32, "silu_and_mul"))


@register_compile_contract("MoEGroupedGemmFP8FwdOp")
def cold_grouped_gemm_fp8(device: str) -> None:
    _cold_compile(samples.grouped_gemm_fp8(device, 20, 3, 256, 256, "silu_and_mul"))


@register_compile_contract("MoEGroupedGemmFP8MaskedFwdOp")
def cold_grouped_gemm_fp8_masked(device: str) -> None:
    _cold_compile(samples.grouped_gemm_fp8_masked(device, 3, 8, 256, 128, "silu_and_mul", [8, 0, 3]))


@register_compile_contract("FP8BlockScaledGemmFwdOp")
def cold_fp8_block_scaled_gemm(device: str) -> None:
    _cold_compile(samples.fp8_block_scaled_gemm(device, 13, 200, 256))


@register_compile_contract("MoEPostPermuteFwdOp")
def cold_post_permute(device: str) -> None:
    _cold_compile(samples.post_permute(device, torch.float32, 4, 2, 16))


@register_compile_contract("PerTokenGroupQuantFP8FwdOp")
def cold_token_group_quant(device: str) -> None:
    _cold_compile(samples.token_group_quant(device, torch.bfloat16, 4, 256, 128))


@register_compile_contract("GroupedQueryAttentionVarlenFwdOp")
def cold_attention_varlen(device: str) -> None:
    _cold_compile(samples.attention_varlen(device, torch.bfloat16, [5, 0, 3], [5, 2, 7]))


@register_compile_contract("GroupedQueryAttentionPagedFwdOp")
def cold_attention_paged(device: str) -> None:
    _cold_compile(samples.attention_paged(device, torch.bfloat16, [1, 4, 0], [30, 9, 2]))


@register_compile_contract("AttentionMergeStatesFwdOp")
def cold_attention_merge(device: str) -> None:
    _cold_compile(samples.attention_merge(device, torch.float16, 6, 3, 16))


@register_compile_contract("KVCacheWriteFwdOp")
def cold_kv_cache_write(device: str) -> None:
    # The op writes the caches and returns nothing: compile and eager each get their own copies.
    case = samples.kv_cache_write(device, torch.bfloat16, 7, 2, 16, 4, 4)
    torch._dynamo.reset()
    key, value, k_cache, v_cache, slots = case.inputs
    k1, v1, k2, v2 = k_cache.clone(), v_cache.clone(), k_cache.clone(), v_cache.clone()
    assert torch.compile(samples.build(case), fullgraph=True, backend="aot_eager")(
        key, value, k1, v1, slots) is None
    samples.build(case)(key, value, k2, v2, slots)
    torch.testing.assert_close(k1, k2, rtol=0, atol=0)
    torch.testing.assert_close(v1, v2, rtol=0, atol=0)
    assert not torch.equal(k1, k_cache)  # the compiled call wrote the caller's cache


def test_every_boundary_op_has_a_cold_compile_test() -> None:
    boundary = {name for name in tileops.ops.__all__ if getattr(tileops, name).compile_op_names}
    assert set(CONTRACTS) == boundary, (
        f"missing: {sorted(boundary - set(CONTRACTS))}, not boundary ops: "
        f"{sorted(set(CONTRACTS) - boundary)}"
    )


def test_composites_have_no_compile_op() -> None:
    for name in ("MoEExpertMLPFwdOp", "FusedMoEExpertsFwdOp", "FusedMoEFwdOp"):
        assert getattr(tileops, name).compile_op_names == ()


@pytest.mark.parametrize("op_name", sorted(CONTRACTS))
def test_cold_compile(op_name: str, device: str) -> None:
    if samples.without_kernel(op_name, device):
        pytest.skip("no CUDA kernel yet (the error is checked in test_native_path)")
    CONTRACTS[op_name](device)
