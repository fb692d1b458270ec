"""Results against float64 references written from the manifest's formulas, per dtype
tolerances (outputs are rounded to the dtype once: about one unit in the last place)."""

from __future__ import annotations

import math

import pytest
import torch

import samples
import tileops

# rtol, atol per output dtype: one or two units of the dtype's last place, relative.
TOL = {
    torch.float32: (2e-5, 2e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> None:
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(got.double().cpu(), want.cpu(), rtol=rtol, atol=atol * scale)


def rms_norm_ref(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm(device: str, dtype: torch.dtype) -> None:
    case = samples.rms_norm(device, dtype, (2, 5), 256)
    x, w = case.inputs
    _close(samples.build(case)(x, w), rms_norm_ref(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_add_rms_norm(device: str, dtype: torch.dtype) -> None:
    case = samples.fused_add_rms_norm(device, dtype, 7, 192)
    x, residual, w = case.inputs
    summed = (x.float() + residual.float()).to(dtype)  # rounded to T, then normalized
    y = samples.build(case)(x, residual, w)
    torch.testing.assert_close(residual, summed, rtol=0, atol=0)
    _close(y, rms_norm_ref(summed, w, 1e-5), dtype)


def long_rope_ref(x: torch.Tensor, positions: torch.Tensor | None, factors: torch.Tensor,
                  layout: str, base: float = 10000.0, max_pos: int = 131072,
                  orig_max: int = 4096) -> torch.Tensor:
    d = x.shape[-1]
    r = d // 2
    i = torch.arange(r, dtype=torch.float64)
    inv_freq = 1.0 / (factors.double().cpu() * base ** (2 * i / d))
    s = x.shape[1] if layout == "bshd" else x.shape[0]
    p = positions.double().cpu() if positions is not None else torch.arange(s, dtype=torch.float64)
    if layout == "bshd" and positions is None:
        p = p.expand(x.shape[0], s)
    theta = p[..., None] * inv_freq  # [..., S, R]
    if layout == "bshd":
        theta = theta[:, :, None, :]  # broadcast over heads
    a = 1.0 if max_pos <= orig_max else math.sqrt(1 + math.log(max_pos / orig_max) / math.log(orig_max))
    x64 = x.double().cpu()
    x1, x2 = x64[..., :r], x64[..., r:]
    cos, sin = theta.cos(), theta.sin()
    return torch.cat([(x1 * cos - x2 * sin) * a, (x2 * cos + x1 * sin) * a], dim=-1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout,positions", [("bshd", False), ("bshd", True), ("sd", True)])
def test_long_rope(device: str, dtype: torch.dtype, layout: str, positions: bool) -> None:
    case = samples.long_rope(device, dtype, layout, positions)
    x, pos = case.inputs
    want = long_rope_ref(x, pos, case.params["rescale_factors"], layout)
    _close(samples.build(case)(x, pos), want, dtype, scale=2.0)


def routing_ref(logits: torch.Tensor, bias: torch.Tensor | None, k: int, scoring: str,
                renormalize: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    l64 = logits.double().cpu()
    s = torch.softmax(l64, -1) if scoring == "softmax" else torch.sigmoid(l64)
    c = s + bias.double().cpu() if bias is not None else s
    # Ties: the smaller expert id first (a stable sort on -c keeps index order among equals).
    ids = torch.sort(-c, dim=-1, stable=True).indices[:, :k]
    w = s.gather(1, ids)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return w * scale, ids


@pytest.mark.parametrize("scoring,bias", [("softmax", False), ("sigmoid", True)])
def test_routing(device: str, scoring: str, bias: bool) -> None:
    case = samples.routing(device, torch.float32, 33, 16, 4, scoring, bias)
    logits, cb = case.inputs
    w, ids = samples.build(case)(logits, cb)
    want_w, want_ids = routing_ref(logits, cb, 4, scoring, True, 2.5)
    assert torch.equal(ids.cpu().long(), want_ids)
    torch.testing.assert_close(w.double().cpu(), want_w, rtol=1e-6, atol=1e-6)


def test_routing_tie_takes_the_lower_expert(device: str) -> None:
    logits = torch.tensor([[0.5, 1.0, 1.0, 1.0, 0.0]], dtype=torch.bfloat16, device=device)
    op = tileops.MoETopKRoutingFwdOp(top_k=2)
    _, ids = op(logits, None)
    assert ids.cpu().tolist() == [[1, 2]]


@pytest.mark.parametrize("expert_map", [False, True])
def test_pre_permute(device: str, expert_map: bool) -> None:
    case = samples.pre_permute(device, torch.bfloat16, 9, 16, 2, 4, expert_map)
    x, ids, emap = case.inputs
    permuted, offsets, inverse = samples.build(case)(x, ids, emap)
    m, k = ids.shape
    local = emap.cpu().long()[ids.cpu().long()] if emap is not None else ids.cpu().long()
    pairs = sorted((int(local[t, j]), t * k + j) for t in range(m) for j in range(k) if 0 <= local[t, j] < 4)
    counts = [sum(1 for e, _ in pairs if e < n) for n in range(5)]
    assert offsets.cpu().tolist() == counts
    want_inverse = torch.full((m, k), -1, dtype=torch.int32)
    for rank, (_, p) in enumerate(pairs):
        want_inverse[p // k, p % k] = rank
        assert torch.equal(permuted[rank].cpu(), x[p // k].cpu())
    assert torch.equal(inverse.cpu(), want_inverse)
    assert not permuted[len(pairs):].cpu().any()


def _act(g: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "silu_and_mul":
        return g / (1 + torch.exp(-g))
    return 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))


def grouped_gemm_ref(a: torch.Tensor, offsets: torch.Tensor, b: torch.Tensor, activation: str) -> torch.Tensor:
    a64, b64, offs = a.double().cpu(), b.double().cpu(), offsets.cpu().tolist()
    n = b.shape[1]
    out = torch.zeros(a.shape[0], n if activation == "none" else n // 2, dtype=torch.float64)
    for e in range(b.shape[0]):
        acc = a64[offs[e] : offs[e + 1]] @ b64[e].t()
        out[offs[e] : offs[e + 1]] = acc if activation == "none" else _act(acc[:, : n // 2], activation) * acc[:, n // 2 :]
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("activation", ["none", "silu_and_mul", "gelu_and_mul"])
def test_grouped_gemm(device: str, dtype: torch.dtype, activation: str) -> None:
    case = samples.grouped_gemm(device, dtype, 20, 3, 32, 48, activation)
    a, offs, b = case.inputs
    _close(samples.build(case)(a, offs, b), grouped_gemm_ref(a, offs, b, activation), dtype)


def grouped_gemm_fp8_ref(a: torch.Tensor, a_scales: torch.Tensor, offsets: torch.Tensor, b: torch.Tensor,
                         b_scales: torch.Tensor, activation: str, block_n: int, block_k: int) -> torch.Tensor:
    """The dequantized operands in float64 (each e4m3 value times its block's scale)."""
    n = b.shape[1]
    a64 = a.double().cpu() * a_scales.double().cpu().repeat_interleave(block_k, 1)
    bs = b_scales.double().cpu().repeat_interleave(block_n, 1)[:, :n].repeat_interleave(block_k, 2)
    return grouped_gemm_ref(a64, offsets, b.double().cpu() * bs, activation)


@pytest.mark.parametrize("activation", ["none", "silu_and_mul", "gelu_and_mul"])
def test_grouped_gemm_fp8(device: str, activation: str) -> None:
    # CPU: N = 200, a partial last weight block, blocks of 64 x 64; CUDA: its 128 x 128 blocks
    n, blk = (200, 64) if device == "cpu" else (256, 128)
    case = samples.grouped_gemm_fp8(device, 20, 3, n, 256, activation, blk, blk)
    got = samples.build(case)(*case.inputs)
    assert got.dtype == torch.bfloat16
    _close(got, grouped_gemm_fp8_ref(*case.inputs, activation, blk, blk), torch.bfloat16)


@pytest.mark.parametrize("activation", ["none", "silu_and_mul"])
def test_grouped_gemm_fp8_masked(device: str, activation: str) -> None:
    blk = 64 if device == "cpu" else 128  # the CUDA kernel's blocks are 128 x 128
    case = samples.grouped_gemm_fp8_masked(device, 3, 6, 128, 256, activation, [6, 0, 4], blk, blk)
    a, a_scales, counts, b, b_scales = case.inputs
    got = samples.build(case)(*case.inputs)
    want = torch.zeros(got.shape, dtype=torch.float64)  # rows past the counts are 0
    for e, c in enumerate(counts.tolist()):
        one = torch.tensor([0, c], dtype=torch.int32)
        want[e, :c] = grouped_gemm_fp8_ref(a[e, :c], a_scales[e, :c], one, b[e : e + 1],
                                           b_scales[e : e + 1], activation, blk, blk)
    _close(got, want, torch.bfloat16)


@pytest.mark.parametrize("m", [1, 13])
def test_fp8_block_scaled_gemm(device: str, m: int) -> None:
    # CPU: N = 200 (a partial last weight block), blocks of 64 x 64; CUDA: its 128 x 128 blocks
    blk = 64 if device == "cpu" else 128
    case = samples.fp8_block_scaled_gemm(device, m, 200, 256, blk, blk)
    a, a_scales, b, b_scales = case.inputs
    got = samples.build(case)(*case.inputs)
    assert got.dtype == torch.bfloat16 and got.shape == (m, 200)
    one = torch.tensor([0, m], dtype=torch.int32)
    _close(got, grouped_gemm_fp8_ref(a, a_scales, one, b[None], b_scales[None], "none", blk, blk),
           torch.bfloat16)
    # DeepGEMM's transposed, TMA-aligned activation scales: the same values, the same result
    aligned = (m + 3) // 4 * 4
    storage = torch.zeros(a_scales.shape[1], aligned, device=a_scales.device)
    storage[:, :m] = a_scales.t()
    transposed = storage[:, :m].t()
    assert not transposed.is_contiguous()
    assert torch.equal(samples.build(case)(a, transposed, b, b_scales), got)


@pytest.mark.parametrize("dtype", DTYPES)
def test_post_permute(device: str, dtype: torch.dtype) -> None:
    case = samples.post_permute(device, dtype, 6, 2, 32)
    expert_out, weights, inverse = case.inputs
    y = samples.build(case)(expert_out, weights, inverse)
    e64, w64, inv = expert_out.double().cpu(), weights.double().cpu(), inverse.cpu().long()
    want = torch.zeros(6, 32, dtype=torch.float64)
    for t in range(6):
        for j in range(2):
            if inv[t, j] >= 0:
                want[t] += w64[t, j] * e64[inv[t, j]]
    _close(y, want, dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_moe(device: str, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(3)
    m, h, e, f, k = 10, 32, 4, 16, 2
    x = torch.randn(m, h, generator=g).to(dtype).to(device)
    logits = torch.randn(m, e, generator=g).to(device)
    w13 = (0.2 * torch.randn(e, 2 * f, h, generator=g)).to(dtype).to(device)
    w2 = (0.2 * torch.randn(e, h, f, generator=g)).to(dtype).to(device)
    op = tileops.FusedMoEFwdOp(top_k=k, renormalize=True)
    y = op(x, logits, w13, w2)
    weights, ids = routing_ref(logits, None, k, "softmax", True, 1.0)
    want = torch.zeros(m, h, dtype=torch.float64)
    for t in range(m):
        for j in range(k):
            ex = int(ids[t, j])
            acc = w13[ex].double().cpu() @ x[t].double().cpu()
            hidden = (_act(acc[:f], "silu_and_mul") * acc[f:]).to(dtype).double()  # h rounded to T
            down = (w2[ex].double().cpu() @ hidden).to(dtype).double()  # expert output rounded to T
            want[t] += weights[t, j] * down
    _close(y, want, dtype, scale=2.0)
    assert set(op.last_call.stages) == {"routing", "experts"}
