"""FusedMoEFwdOp with FP8 experts from Python: the weights' dtype selects the quantizing
pre-permute and the FP8 MLP (FP8 grouped GEMM, quantize, FP8 grouped GEMM), the result is its
stages run by hand bit for bit (and the bf16 pre-permute with the MLP quantizing its rows), each
stage matches a float64 reference fed the stage's own inputs, and compiles (fullgraph) to its stages' nodes; misuse raises the
composite's rule, from the C++ composite's signature check."""

from __future__ import annotations

import pytest
import torch

import samples
import tileops

H, F, E = 256, 128, 8


def _skip_without_kernel(device: str) -> None:
    if samples.without_kernel("MoEGroupedGemmFP8FwdOp", device):
        pytest.skip("no CUDA kernel yet (the error is checked in test_native_path)")


def _fp8_weight(e: int, n: int, k: int, seed: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(e, n, k, generator=g).to(torch.float8_e4m3fn)
    scales = (0.5 + torch.rand(e, (n + 127) // 128, (k + 127) // 128, generator=g)) / k**0.5
    return w.to(device), scales.to(device)


def _inputs(device: str, m: int = 6, h: int = H, f: int = F) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(m, h, generator=g).to(torch.bfloat16).to(device)
    logits = torch.randn(m, E, generator=g).to(device)
    bias = (0.1 * torch.rand(E, generator=g)).to(device)
    w13, s13 = _fp8_weight(E, 2 * f, h, 2, device)
    w2, s2 = _fp8_weight(E, h, f, 3, device)
    return x, logits, w13, w2, bias, s13, s2


def _routing_ref(logits: torch.Tensor, bias: torch.Tensor, k: int, n_group: int,
                 topk_group: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Sigmoid scores, bias-shifted choice, DeepSeek-V3's groups (a group scores the sum of its
    two largest choices; the best topk_group groups are kept), renormalized, scaled."""
    s = torch.sigmoid(logits.double().cpu())
    c = s + bias.double().cpu()
    m, e = c.shape
    group_score = c.view(m, n_group, e // n_group).topk(2, dim=-1).values.sum(-1)
    kept = torch.sort(-group_score, dim=-1, stable=True).indices[:, :topk_group]
    mask = torch.zeros(m, n_group, dtype=torch.bool).scatter_(1, kept, True)
    c = c.masked_fill(~mask.repeat_interleave(e // n_group, 1), -torch.inf)
    ids = torch.sort(-c, dim=-1, stable=True).indices[:, :k]
    w = s.gather(1, ids)
    return (w / w.sum(-1, keepdim=True) * scale).float().double(), ids


def _quantized(v: torch.Tensor) -> torch.Tensor:
    """1 x 128 groups as PerTokenGroupQuantFP8FwdOp defines them, dequantized in float64."""
    g = v.float().reshape(v.shape[0], -1, 128)
    scale = (g.abs().amax(-1, keepdim=True).double().clamp(min=1e-10) / 448).float()
    q = (g / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    return (q.double() * scale.double()).reshape(v.shape)


def _fp8_rows(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """e4m3 rows with their 1 x 128 group scales, dequantized in float64 on the CPU."""
    s = scales.double().cpu().repeat_interleave(128, 1)
    return q.double().cpu() * s[:, : q.shape[1]]


def _dequantized(w: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    s = scales.double().cpu().repeat_interleave(128, 1).repeat_interleave(128, 2)
    return w.double().cpu() * s[:, : w.shape[1], : w.shape[2]]


def test_fp8_weights_select_the_fp8_mlp_and_match_the_reference(device: str) -> None:
    _skip_without_kernel(device)
    x, logits, w13, w2, bias, s13, s2 = _inputs(device)
    op = tileops.FusedMoEFwdOp(top_k=4, scoring="sigmoid", renormalize=True,
                               routed_scaling_factor=2.5, n_group=4, topk_group=2)
    y = op(x, logits, w13, w2, bias, s13, s2)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape
    experts = op.held_delegates()[1]
    assert [type(d).__name__ for d in experts.held_delegates()] == [
        "MoEPrePermuteQuantFP8FwdOp", "MoEExpertMLPFwdOp", "MoEExpertMLPFP8FwdOp",
        "MoEExpertMLPFP8MaskedFwdOp", "MoEPostPermuteFwdOp"]

    weights, ids = _routing_ref(logits, bias, 4, 4, 2, 2.5)
    w13d, w2d = _dequantized(w13, s13), _dequantized(w2, s2)
    # Against float64 stage by stage, each stage fed the op's own inputs: a whole-layer reference
    # re-quantizes its own h, and where h lies within the GEMM's float32 error of an e4m3
    # rounding boundary the two quantizations differ by a step of up to 1/8 of the value, more
    # than bfloat16's tolerance (the interval bound that allows for it is tests/ops/
    # fp8_moe_bound.h, C++). One stage has one float32 accumulation and one rounding to
    # bfloat16, inside |got - ref| <= 1.6e-2 (1 + |ref|). The layer equals these stages bit for
    # bit (below), so together they check it.
    routing = tileops.MoETopKRoutingFwdOp(top_k=4, scoring="sigmoid", renormalize=True,
                                          routed_scaling_factor=2.5, n_group=4, topk_group=2)
    tw, tid = routing(logits, bias)
    assert torch.equal(tid.cpu().long(), ids)  # grouped routing reaches the Python composite
    torch.testing.assert_close(tw.double().cpu(), weights, rtol=1e-5, atol=1e-6)
    xq, xs, offsets_q, inverse_q = tileops.MoEPrePermuteQuantFP8FwdOp(num_experts=E)(x, tid, None)
    gate_up = tileops.MoEGroupedGemmFP8FwdOp(activation="silu_and_mul", block_n=128, block_k=128)
    down = tileops.MoEGroupedGemmFP8FwdOp(activation="none", block_n=128, block_k=128)
    h = gate_up(xq, xs, offsets_q, w13, s13)
    hq, hs = tileops.PerTokenGroupQuantFP8FwdOp(group_size=128)(h)
    d = down(hq, hs, offsets_q, w2, s2)
    assert torch.equal(y, tileops.MoEPostPermuteFwdOp()(d, tw, inverse_q))
    offs = offsets_q.cpu().tolist()
    rows = offs[-1]
    h_ref = torch.zeros(rows, F, dtype=torch.float64)
    d_ref = torch.zeros(rows, H, dtype=torch.float64)
    a = _fp8_rows(xq, xs)
    hd = _fp8_rows(hq, hs)
    for e in range(E):
        for r in range(offs[e], offs[e + 1]):
            acc = w13d[e] @ a[r]
            h_ref[r] = acc[:F] / (1 + torch.exp(-acc[:F])) * acc[F:]
            d_ref[r] = w2d[e] @ hd[r]
    torch.testing.assert_close(h[:rows].double().cpu(), h_ref, rtol=1.6e-2, atol=1.6e-2)
    torch.testing.assert_close(d[:rows].double().cpu(), d_ref, rtol=1.6e-2, atol=1.6e-2)
    inv = inverse_q.cpu().long()
    y_ref = (tw.double().cpu()[..., None] * d.double().cpu()[inv]).sum(1)
    torch.testing.assert_close(y.double().cpu(), y_ref, rtol=1.6e-2, atol=1.6e-2)

    # The stages by hand: the same tensors bit for bit.
    post = tileops.MoEPostPermuteFwdOp()
    mlp = tileops.MoEExpertMLPFP8FwdOp(activation="silu_and_mul")
    # As the layer runs: the rows quantized as they are gathered, the MLP from e4m3 rows ...
    xq, xs, offsets_q, inverse_q = tileops.MoEPrePermuteQuantFP8FwdOp(num_experts=E)(x, tid, None)
    assert xq.dtype == torch.float8_e4m3fn and xs.shape == (x.shape[0] * 4, H // 128)
    assert torch.equal(y, post(mlp(xq, offsets_q, w13, w2, s13, s2, xs), tw, inverse_q))
    assert {s: len(r) for s, r in mlp.last_call.stages.items()} == {
        "quantize_x": 0, "gate_up": 1, "quantize_h": 1, "down": 1}
    # ... and as it ran before: bf16 rows, quantized by the MLP. The same bits.
    xp, offsets, inverse = tileops.MoEPrePermuteFwdOp(num_experts=E)(x, tid, None)
    by_hand = post(mlp(xp, offsets, w13, w2, s13, s2), tw, inverse)
    assert torch.equal(y, by_hand)
    assert {s: len(r) for s, r in mlp.last_call.stages.items()} == {
        "quantize_x": 1, "gate_up": 1, "quantize_h": 1, "down": 1}
    stages = experts.last_call.stages
    assert len(stages["mlp_fp8"]) == 1 and stages["mlp"] == ()
    assert len(stages["pre_permute_quant"]) == 1 and stages["pre_permute"] == ()


def test_the_fp8_rules_are_signature_errors(device: str) -> None:
    x, logits, w13, w2, bias, s13, s2 = _inputs(device)
    op = tileops.FusedMoEFwdOp(top_k=2)
    with pytest.raises(tileops.SignatureError,
                       match=r"FusedMoEFwdOp: shape rule 'W != float8_e4m3fn or \(present\(w13_scales\) "
                             r"and present\(w2_scales\)\)' does not hold"):
        op(x, logits, w13, w2)
    w13_bf16 = torch.randn(E, 2 * F, H).to(torch.bfloat16).to(device)
    w2_bf16 = torch.randn(E, H, F).to(torch.bfloat16).to(device)
    with pytest.raises(tileops.SignatureError, match=r"shape rule 'W == float8_e4m3fn or not"):
        op(x, logits, w13_bf16, w2_bf16, None, s13, s2)
    with pytest.raises(tileops.SignatureError, match="w13_scales"):
        op(x, logits, w13, w2, None, s13[:, :1], s2)
    x192, logits192, w13_192, w2_192, _, s13_192, s2_192 = _inputs(device, h=192)
    with pytest.raises(tileops.SignatureError, match=r"\(H % 128 == 0 and F % 128 == 0\)' does not hold"):
        op(x192, logits192, w13_192, w2_192, None, s13_192, s2_192)
    with pytest.raises(tileops.DTypeError,
                       match=r"FusedMoEFwdOp: dtype combination \{T: float16, W: float8_e4m3fn\} is not allowed"):
        op(x.to(torch.float16), logits, w13, w2, None, s13, s2)
    # Rules the composite had before FP8: the C++ composite's own signature check.
    with pytest.raises(tileops.SignatureError, match=r"shape rule 'top_k <= E' does not hold"):
        tileops.FusedMoEFwdOp(top_k=9)(x, logits, w13_bf16, w2_bf16)


def test_fp8_layer_compiles_to_its_stages_nodes(device: str) -> None:
    _skip_without_kernel(device)
    from collections import Counter

    x, logits, w13, w2, bias, s13, s2 = _inputs(device)
    op = tileops.FusedMoEFwdOp(top_k=2, scoring="sigmoid", renormalize=True)
    want = op(x, logits, w13, w2, bias, s13, s2)  # eager first: holds the FP8 MLP
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: object) -> object:
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    got = torch.compile(lambda *a: op(*a), fullgraph=True, backend=backend)(
        x, logits, w13, w2, bias, s13, s2)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert len(graphs) == 1
    nodes = Counter(str(n.target).split(".")[1] for n in graphs[0].graph.nodes
                    if n.op == "call_function" and str(n.target).startswith("tileops."))
    assert nodes == Counter({"moe_top_k_routing_fwd": 1, "moe_pre_permute_quant_fp8_fwd": 1,
                             "quant_per_token_group_quant_fp8_fwd": 1,
                             "moe_grouped_gemm_fp8_fwd": 2, "moe_post_permute_fwd": 1})


def test_masked_decode_path_gives_the_contiguous_y_bit_for_bit(device: str) -> None:
    # masked_max_rows = 3 takes the masked stages for 6 tokens x top-4 over 8 experts (24 <= 24):
    # the same rows as the contiguous route, each stage computing them alike (C++ tests the same).
    _skip_without_kernel(device)
    x, logits, w13, w2, bias, s13, s2 = _inputs(device)
    contiguous = tileops.FusedMoEFwdOp(top_k=4, scoring="sigmoid", renormalize=True)
    masked = tileops.FusedMoEFwdOp(top_k=4, scoring="sigmoid", renormalize=True, masked_max_rows=3)
    want = contiguous(x, logits, w13, w2, bias, s13, s2)
    got = masked(x, logits, w13, w2, bias, s13, s2)
    if device == "cpu":
        assert torch.equal(got, want)
    else:  # other GEMM tile shapes on CUDA: the bf16 tolerance
        torch.testing.assert_close(got, want, rtol=1.6e-2, atol=1.6e-2)
    experts = masked.held_delegates()[1]
    assert [type(d).__name__ for d in experts.held_delegates()] == [
        "MoEPrePermuteQuantFP8MaskedFwdOp", "MoEExpertMLPFwdOp", "MoEExpertMLPFP8FwdOp",
        "MoEExpertMLPFP8MaskedFwdOp", "MoEPostPermuteFwdOp"]
    stages = experts.last_call.stages
    assert len(stages["pre_permute_quant_masked"]) == 1 and stages["pre_permute_quant"] == ()
    assert len(stages["mlp_fp8_masked"]) == 1 and stages["mlp_fp8"] == ()
    # The stages by hand, max_m = M: the masked MLP's rows are the contiguous MLP's.
    a, a_s, counts, inverse = tileops.MoEPrePermuteQuantFP8MaskedFwdOp(num_experts=E, max_m=6)(
        x, torch.tensor([[0, 1, 2, 3]] * 6, dtype=torch.int32, device=device), None)
    assert counts.cpu().tolist() == [6, 6, 6, 6, 0, 0, 0, 0]
    assert inverse.cpu().tolist()[1] == [1, 7, 13, 19]
    h = tileops.MoEExpertMLPFP8MaskedFwdOp()(a, a_s, counts, w13, w2, s13, s2)
    assert h.shape == (E, 6, H) and torch.equal(h[4:].float().cpu(), torch.zeros(4, 6, H))
    # A token count above masked_max_rows * E / K takes the contiguous route.
    big = tileops.FusedMoEFwdOp(top_k=4, scoring="sigmoid", renormalize=True, masked_max_rows=2)
    big(x, logits, w13, w2, bias, s13, s2)
    assert big.held_delegates()[1].last_call.stages["pre_permute_quant_masked"] == ()
