"""Valid inputs for every boundary op: constructor parameters and call inputs, per case.

Integer inputs that must hold valid values (expert offsets, ids, inverse indices) are built
consistently here; floats are random with a fixed seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Case:
    op: str
    params: dict[str, Any]
    inputs: tuple[torch.Tensor | None, ...]
    label: str
    has_out: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    # A case the CUDA kernel refuses by design (the CPU runs it): a regex of the refusal that a
    # CUDA call raises as DispatchError.
    cuda_refusal: str | None = None


# Boundary ops with no CUDA kernel yet: a CUDA call raises OpNotAvailableError. The
# CUDA-parametrized tests check that error for them, or skip. Every op has one today.
NO_CUDA_KERNEL: frozenset[str] = frozenset()


def without_kernel(op: str, device: str) -> bool:
    return device != "cpu" and op in NO_CUDA_KERNEL


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=_gen(seed), dtype=torch.float32).to(dtype).to(device)


def rms_norm(device: str, dtype: torch.dtype, rows: tuple[int, ...], hidden: int) -> Case:
    x = _randn((*rows, hidden), dtype, device, 1)
    w = (1 + 0.1 * _randn((hidden,), torch.float32, "cpu", 2)).to(dtype).to(device)
    return Case("RMSNormFwdOp", {"normalized_shape": [hidden], "eps": 1e-6}, (x, w),
                f"{rows}x{hidden}-{dtype}")


def fused_add_rms_norm(device: str, dtype: torch.dtype, rows: int, hidden: int) -> Case:
    x = _randn((rows, hidden), dtype, device, 3)
    residual = _randn((rows, hidden), dtype, device, 4)
    w = (1 + 0.1 * _randn((hidden,), torch.float32, "cpu", 5)).to(dtype).to(device)
    return Case("FusedAddRMSNormFwdOp", {"normalized_shape": [hidden], "eps": 1e-5},
                (x, residual, w), f"{rows}x{hidden}-{dtype}")


def long_rope(device: str, dtype: torch.dtype, layout: str, positions: bool,
              s: int = 16, h: int = 4, r: int = 8, b: int = 2) -> Case:
    factors = 1 + torch.rand(r, generator=_gen(6))
    shape = (b, s, h, 2 * r) if layout == "bshd" else (s, 2 * r)
    x = _randn(shape, dtype, device, 7)
    pos = None
    if positions:
        pshape = (b, s) if layout == "bshd" else (s,)
        pos = torch.randint(0, 8192, pshape, generator=_gen(8)).to(device)
    params = {"rescale_factors": factors.to(device), "base": 10000.0,
              "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
              "attention_scaling": None, "layout": layout}
    return Case("LongRoPEFwdOp", params, (x, pos), f"{layout}-pos{int(positions)}-{dtype}")


def routing(device: str, dtype: torch.dtype, m: int, e: int, k: int, scoring: str,
            bias: bool, n_group: int = 1, topk_group: int = 1) -> Case:
    logits = _randn((m, e), dtype, device, 9)
    cb = (0.1 * _randn((e,), torch.float32, "cpu", 10)).to(device) if bias else None
    params = {"top_k": k, "scoring": scoring, "renormalize": True, "routed_scaling_factor": 2.5,
              "n_group": n_group, "topk_group": topk_group}
    return Case("MoETopKRoutingFwdOp", params, (logits, cb),
                f"{m}x{e}-k{k}-{scoring}-g{n_group}of{topk_group}-{dtype}", has_out=False)


def token_group_quant(device: str, dtype: torch.dtype, m: int, k: int, group: int) -> Case:
    x = _randn((m, k), dtype, device, 12)
    return Case("PerTokenGroupQuantFP8FwdOp", {"group_size": group, "eps": 1e-10}, (x,),
                f"{m}x{k}-g{group}-{dtype}", has_out=False)


def topk_ids(m: int, k: int, e: int, seed: int, device: str) -> torch.Tensor:
    scores = torch.rand(m, e, generator=_gen(seed))
    return scores.topk(k, dim=1).indices.to(torch.int32).to(device)


def pre_permute(device: str, dtype: torch.dtype, m: int, h: int, k: int, e: int,
                expert_map: bool) -> Case:
    x = _randn((m, h), dtype, device, 11)
    g = e * 2 if expert_map else e
    ids = topk_ids(m, k, g, 12, device)
    emap = None
    if expert_map:  # this rank holds the even global experts
        emap = torch.tensor([i // 2 if i % 2 == 0 else -1 for i in range(g)], dtype=torch.int32).to(device)
    return Case("MoEPrePermuteFwdOp", {"num_experts": e}, (x, ids, emap),
                f"{m}x{h}-k{k}-e{e}-map{int(expert_map)}-{dtype}", has_out=False)


def pre_permute_quant(device: str, dtype: torch.dtype, m: int, h: int, k: int, e: int,
                      expert_map: bool, group: int = 128) -> Case:
    case = pre_permute(device, dtype, m, h, k, e, expert_map)
    return Case("MoEPrePermuteQuantFP8FwdOp", {"num_experts": e, "group_size": group, "eps": 1e-10},
                case.inputs, f"{case.label}-g{group}", has_out=False)


def pre_permute_quant_masked(device: str, dtype: torch.dtype, m: int, h: int, k: int, e: int,
                             expert_map: bool, group: int = 128) -> Case:
    # Balanced ids: pair p goes to (global) expert p mod G, so each local expert gets exactly
    # max_m = m * k / G rows and no row of the layout is left unwritten (those rows are undefined,
    # and the bit-for-bit comparisons read every row).
    x = _randn((m, h), dtype, device, 11)
    g = e * 2 if expert_map else e
    assert k <= g and (m * k) % g == 0
    ids = (torch.arange(m * k) % g).to(torch.int32).reshape(m, k).to(device)
    emap = None
    if expert_map:  # this rank holds the even global experts
        emap = torch.tensor([i // 2 if i % 2 == 0 else -1 for i in range(g)], dtype=torch.int32).to(device)
    params = {"num_experts": e, "max_m": m * k // g, "group_size": group, "eps": 1e-10}
    return Case("MoEPrePermuteQuantFP8MaskedFwdOp", params, (x, ids, emap),
                f"{m}x{h}-k{k}-e{e}-map{int(expert_map)}-g{group}-{dtype}", has_out=False)


def offsets_for(m: int, e: int, seed: int) -> torch.Tensor:
    cuts = torch.sort(torch.randint(0, m + 1, (e - 1,), generator=_gen(seed))).values
    return torch.cat([torch.tensor([0]), cuts, torch.tensor([m])]).to(torch.int32)


def grouped_gemm(device: str, dtype: torch.dtype, m: int, e: int, n: int, k: int,
                 activation: str) -> Case:
    a = _randn((m, k), dtype, device, 13)
    b = (0.1 * _randn((e, n, k), torch.float32, "cpu", 14)).to(dtype).to(device)
    offs = offsets_for(m, e, 15).to(device)
    return Case("MoEGroupedGemmFwdOp", {"activation": activation}, (a, offs, b),
                f"{m}x{n}x{k}-e{e}-{activation}-{dtype}")


def grouped_gemm_fp8(device: str, m: int, e: int, n: int, k: int, activation: str,
                     block_n: int = 128, block_k: int = 128) -> Case:
    # e4m3 values of about unit size, scales near 1 (activations) and 1 / sqrt(K) (weights)
    a = _randn((m, k), torch.float32, "cpu", 19).to(torch.float8_e4m3fn).to(device)
    a_scales = (0.5 + torch.rand(m, k // block_k, generator=_gen(20))).to(device)
    b = _randn((e, n, k), torch.float32, "cpu", 21).to(torch.float8_e4m3fn).to(device)
    n_blocks = (n + block_n - 1) // block_n
    b_scales = ((0.5 + torch.rand(e, n_blocks, k // block_k, generator=_gen(22))) / k**0.5).to(device)
    offs = offsets_for(m, e, 23).to(device)
    params = {"activation": activation, "block_n": block_n, "block_k": block_k}
    return Case("MoEGroupedGemmFP8FwdOp", params, (a, a_scales, offs, b, b_scales),
                f"{m}x{n}x{k}-e{e}-{activation}-b{block_n}x{block_k}")


def grouped_gemm_fp8_masked(device: str, e: int, max_m: int, n: int, k: int, activation: str,
                            counts: list[int], block_n: int = 128, block_k: int = 128) -> Case:
    a = _randn((e, max_m, k), torch.float32, "cpu", 24).to(torch.float8_e4m3fn).to(device)
    a_scales = (0.5 + torch.rand(e, max_m, k // block_k, generator=_gen(25))).to(device)
    b = _randn((e, n, k), torch.float32, "cpu", 26).to(torch.float8_e4m3fn).to(device)
    n_blocks = (n + block_n - 1) // block_n
    b_scales = ((0.5 + torch.rand(e, n_blocks, k // block_k, generator=_gen(27))) / k**0.5).to(device)
    cnt = torch.tensor(counts, dtype=torch.int32).to(device)
    params = {"activation": activation, "block_n": block_n, "block_k": block_k}
    return Case("MoEGroupedGemmFP8MaskedFwdOp", params, (a, a_scales, cnt, b, b_scales),
                f"{e}x{max_m}x{n}x{k}-{activation}-b{block_n}x{block_k}")


def fp8_block_scaled_gemm(device: str, m: int, n: int, k: int, block_n: int = 128,
                          block_k: int = 128) -> Case:
    # values and scales as grouped_gemm_fp8's: one expert owning every row, b [N, K]
    a = _randn((m, k), torch.float32, "cpu", 28).to(torch.float8_e4m3fn).to(device)
    a_scales = (0.5 + torch.rand(m, k // block_k, generator=_gen(29))).to(device)
    b = _randn((n, k), torch.float32, "cpu", 30).to(torch.float8_e4m3fn).to(device)
    n_blocks = (n + block_n - 1) // block_n
    b_scales = ((0.5 + torch.rand(n_blocks, k // block_k, generator=_gen(31))) / k**0.5).to(device)
    params = {"block_n": block_n, "block_k": block_k}
    return Case("FP8BlockScaledGemmFwdOp", params, (a, a_scales, b, b_scales),
                f"{m}x{n}x{k}-b{block_n}x{block_k}")


def post_permute(device: str, dtype: torch.dtype, m: int, k: int, h: int) -> Case:
    r = m * k
    expert_out = _randn((r, h), dtype, device, 16)
    weights = torch.rand(m, k, generator=_gen(17)).to(device)
    inverse = torch.randperm(r, generator=_gen(18)).to(torch.int32).reshape(m, k)
    inverse[0, 0] = -1  # a pair served elsewhere
    return Case("MoEPostPermuteFwdOp", {"scale": 1.0}, (expert_out, weights, inverse.to(device)),
                f"{m}x{k}x{h}-{dtype}")


def offsets(lengths: list[int]) -> torch.Tensor:
    """cu_seqlens of the given sequence lengths: [0, l0, l0 + l1, ...] int32."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)


def attention_varlen(device: str, dtype: torch.dtype, q_lengths: list[int], k_lengths: list[int],
                     hq: int = 4, hkv: int = 2, d: int = 64, causal: bool = True,
                     softmax_scale: float | None = None, window_left: int = -1,
                     softcap: float = 0.0) -> Case:
    q = _randn((sum(q_lengths), hq, d), dtype, device, 30)
    k = _randn((sum(k_lengths), hkv, d), dtype, device, 31)
    v = _randn((sum(k_lengths), hkv, d), dtype, device, 32)
    params = {"causal": causal, "softmax_scale": softmax_scale, "window_left": window_left,
              "softcap": softcap}
    label = (f"q{q_lengths}-k{k_lengths}-h{hq}/{hkv}-d{d}-causal{int(causal)}-w{window_left}"
             f"-cap{softcap}-{dtype}")
    return Case("GroupedQueryAttentionVarlenFwdOp", params,
                (q, k, v, offsets(q_lengths).to(device), offsets(k_lengths).to(device)), label)


def to_pages(k: torch.Tensor, v: torch.Tensor, k_lengths: list[int], page: int, seed: int,
             spare_blocks: int = 2, spare_entries: int = 1
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The packed keys and values k, v [Tk, Hkv, D] (sequence b: k_lengths[b] rows) laid into a
    paged cache: (k_cache, v_cache [num_blocks, page, Hkv, D], seqused_k [B], block_table [B, W])
    int32, on k's device. Pages a shuffled choice of the blocks (`spare_blocks` more than needed,
    random values in the rows no sequence uses), last pages partial where page does not divide a
    length, table entries past a sequence's pages -1 (never read)."""
    pages = [(n + page - 1) // page for n in k_lengths]
    blocks = sum(pages) + spare_blocks
    width = max(pages, default=0) + spare_entries
    hkv, d = k.shape[1], k.shape[2]
    g = _gen(seed)
    k_cache = torch.randn(blocks, page, hkv, d, generator=g).to(k.dtype)
    v_cache = torch.randn(blocks, page, hkv, d, generator=g).to(k.dtype)
    order = torch.randperm(blocks, generator=g).tolist()
    table = torch.full((len(k_lengths), width), -1, dtype=torch.int32)
    start = 0
    for b, n in enumerate(k_lengths):
        for p in range(pages[b]):
            block = order.pop()
            table[b, p] = block
            rows = slice(start + p * page, start + min(n, (p + 1) * page))
            used = rows.stop - rows.start
            k_cache[block, :used] = k[rows].cpu()
            v_cache[block, :used] = v[rows].cpu()
        start += n
    device = k.device
    return (k_cache.to(device), v_cache.to(device),
            torch.tensor(k_lengths, dtype=torch.int32, device=device), table.to(device))


def attention_paged(device: str, dtype: torch.dtype, q_lengths: list[int], k_lengths: list[int],
                    hq: int = 4, hkv: int = 2, d: int = 64, page: int = 16, causal: bool = True,
                    softmax_scale: float | None = None, window_left: int = -1,
                    softcap: float = 0.0) -> Case:
    """The keys and queries of attention_varlen(...) with the keys in pages of `page`; the packed
    keys (k, v, cu_seqlens_k) are in extra["packed"]."""
    varlen = attention_varlen(device, dtype, q_lengths, k_lengths, hq, hkv, d, causal,
                              softmax_scale, window_left, softcap)
    q, k, v, cu_q, cu_k = varlen.inputs
    k_cache, v_cache, seqused_k, block_table = to_pages(k, v, k_lengths, page, 42)
    return Case("GroupedQueryAttentionPagedFwdOp", varlen.params,
                (q, k_cache, v_cache, cu_q, seqused_k, block_table),
                varlen.label.replace("-causal", f"-page{page}-causal"),
                extra={"packed": (k, v, cu_k)})


def kv_cache_write(device: str, dtype: torch.dtype, tokens: int, hkv: int, d: int, blocks: int,
                   page: int) -> Case:
    key = _randn((tokens, hkv, d), dtype, device, 33)
    value = _randn((tokens, hkv, d), dtype, device, 34)
    k_cache = _randn((blocks, page, hkv, d), dtype, device, 35)
    v_cache = _randn((blocks, page, hkv, d), dtype, device, 36)
    # distinct slots in a random order, every third token padding (-1)
    slots = torch.randperm(blocks * page, generator=_gen(37))[:tokens].to(torch.int64)
    slots[::3] = -1
    return Case("KVCacheWriteFwdOp", {}, (key, value, k_cache, v_cache, slots.to(device)),
                f"{tokens}x{hkv}x{d}-{blocks}x{page}-{dtype}", has_out=False)


def attention_merge(device: str, dtype: torch.dtype, t: int, h: int, d: int) -> Case:
    out_a = _randn((t, h, d), dtype, device, 38)
    out_b = _randn((t, h, d), dtype, device, 39)
    lse_a = 4 + 2 * _randn((h, t), torch.float32, "cpu", 40)
    lse_b = 4 + 2 * _randn((h, t), torch.float32, "cpu", 41)
    lse_a.view(-1)[::5] = float("-inf")  # a side that saw no key; entry 0 on both sides
    lse_b.view(-1)[::3] = float("-inf")
    return Case("AttentionMergeStatesFwdOp", {},
                (out_a, lse_a.to(device), out_b, lse_b.to(device)), f"{t}x{h}x{d}-{dtype}")


def _cuda_refuses(case: Case, refusal: str) -> Case:
    case.cuda_refusal = refusal
    return case


def cases(device: str) -> list[Case]:
    """Several shapes and dtypes per boundary op."""
    out: list[Case] = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        out.append(rms_norm(device, dtype, (4,), 64))
        out.append(rms_norm(device, dtype, (2, 3), 128))
        out.append(fused_add_rms_norm(device, dtype, 5, 96))
        out.append(long_rope(device, dtype, "bshd", False))
        out.append(long_rope(device, dtype, "sd", True))
        out.append(routing(device, dtype, 6, 16, 4, "softmax", False))
        out.append(pre_permute(device, dtype, 6, 32, 2, 8, False))
        out.append(post_permute(device, dtype, 6, 2, 32))
    out.append(long_rope(device, torch.bfloat16, "bshd", True))
    out.append(routing(device, torch.float32, 7, 32, 8, "sigmoid", True))
    out.append(routing(device, torch.float32, 5, 64, 6, "sigmoid", True, 8, 4))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        out.append(token_group_quant(device, dtype, 6, 256, 128))
    out.append(token_group_quant(device, torch.bfloat16, 3, 96, 32))
    out.append(pre_permute(device, torch.bfloat16, 5, 16, 2, 4, True))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        out.append(pre_permute_quant(device, dtype, 6, 256, 2, 8, False))
    out.append(pre_permute_quant(device, torch.bfloat16, 5, 96, 2, 4, True, 32))
    out.append(pre_permute_quant(device, torch.float16, 4, 48, 3, 4, False, 24))  # unfused on CUDA
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        out.append(pre_permute_quant_masked(device, dtype, 6, 256, 2, 4, False))
    out.append(pre_permute_quant_masked(device, torch.bfloat16, 4, 128, 2, 2, True))
    for dtype in (torch.bfloat16, torch.float16):
        out.append(grouped_gemm(device, dtype, 24, 4, 32, 48, "none"))
        out.append(grouped_gemm(device, dtype, 16, 3, 64, 32, "silu_and_mul"))
    out.append(grouped_gemm(device, torch.bfloat16, 16, 3, 64, 32, "gelu_and_mul"))
    out.append(grouped_gemm_fp8(device, 24, 4, 256, 256, "none"))
    out.append(grouped_gemm_fp8(device, 20, 3, 256, 128, "silu_and_mul"))
    out.append(grouped_gemm_fp8(device, 12, 2, 128, 256, "gelu_and_mul"))
    out.append(grouped_gemm_fp8_masked(device, 3, 8, 256, 128, "none", [8, 0, 3]))
    out.append(grouped_gemm_fp8_masked(device, 2, 5, 128, 256, "silu_and_mul", [2, 5]))
    # The CUDA kernel takes 128 x 128 weight blocks and, gated, N / 2 % 64 == 0: these run on
    # the CPU only.
    gated_n = "N / 2 to be a multiple of 64"
    blocks = "takes 128 x 128 weight blocks"
    out.append(_cuda_refuses(grouped_gemm_fp8(device, 20, 3, 200, 128, "silu_and_mul"), gated_n))
    out.append(_cuda_refuses(grouped_gemm_fp8(device, 12, 2, 64, 192, "gelu_and_mul", 32, 64),
                             blocks))
    out.append(_cuda_refuses(
        grouped_gemm_fp8_masked(device, 2, 5, 64, 192, "silu_and_mul", [2, 5], 32, 64), blocks))
    out.append(fp8_block_scaled_gemm(device, 13, 200, 256))  # odd M, a partial weight block
    out.append(fp8_block_scaled_gemm(device, 1, 128, 128))
    out.append(_cuda_refuses(fp8_block_scaled_gemm(device, 5, 96, 192, 32, 64), blocks))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        varlen = attention_varlen(device, dtype, [5, 3, 0, 2], [5, 7, 0, 1])
        # The Hopper kernel takes float16 and bfloat16, head dims 64, 128 and 256.
        out.append(_cuda_refuses(varlen, "float32") if dtype == torch.float32 else varlen)
        out.append(kv_cache_write(device, dtype, 7, 2, 16, 4, 4))
        out.append(attention_merge(device, dtype, 6, 3, 16))
    out.append(attention_varlen(device, torch.bfloat16, [4, 6], [9, 6], causal=False,
                                softmax_scale=0.3, window_left=2, softcap=5.0))
    out.append(attention_varlen(device, torch.float16, [3], [8], hq=6, hkv=1, d=128,
                                window_left=1))
    out.append(_cuda_refuses(attention_varlen(device, torch.bfloat16, [2, 3], [4, 3], d=40),
                             "head_dim 40"))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        # decoding queries beside a prefill chunk, a partial last page, an empty sequence
        paged = attention_paged(device, dtype, [1, 5, 0, 1], [37, 20, 0, 16])
        out.append(_cuda_refuses(paged, "float32") if dtype == torch.float32 else paged)
    out.append(attention_paged(device, torch.bfloat16, [1, 1, 1], [100, 64, 3], hq=8, d=128,
                               page=64, window_left=30, softcap=20.0))
    # The CUDA kernels take page sizes 16, 32, 64 and 128.
    out.append(_cuda_refuses(attention_paged(device, torch.bfloat16, [1, 2], [9, 7], page=5),
                             "page_size 5"))
    return out


def build(case: Case) -> Any:
    import tileops

    return getattr(tileops, case.op)(**case.params)


SAMPLE_BUILDERS: dict[str, Callable[..., Case]] = {
    "RMSNormFwdOp": rms_norm,
    "FusedAddRMSNormFwdOp": fused_add_rms_norm,
    "LongRoPEFwdOp": long_rope,
    "MoETopKRoutingFwdOp": routing,
    "MoEPrePermuteFwdOp": pre_permute,
    "MoEPrePermuteQuantFP8FwdOp": pre_permute_quant,
    "MoEPrePermuteQuantFP8MaskedFwdOp": pre_permute_quant_masked,
    "MoEGroupedGemmFwdOp": grouped_gemm,
    "MoEGroupedGemmFP8FwdOp": grouped_gemm_fp8,
    "MoEGroupedGemmFP8MaskedFwdOp": grouped_gemm_fp8_masked,
    "MoEPostPermuteFwdOp": post_permute,
    "FP8BlockScaledGemmFwdOp": fp8_block_scaled_gemm,
    "PerTokenGroupQuantFP8FwdOp": token_group_quant,
    "GroupedQueryAttentionVarlenFwdOp": attention_varlen,
    "GroupedQueryAttentionPagedFwdOp": attention_paged,
    "KVCacheWriteFwdOp": kv_cache_write,
    "AttentionMergeStatesFwdOp": attention_merge,
}
