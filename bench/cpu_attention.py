#!/usr/bin/env python3
"""The attention ops on the CPU beside torch's scaled_dot_product_attention on the same tensors.

Cases (Llama-3-8B heads, 32 query / 8 KV, D 128): causal prefill of one sequence (S tokens),
decode (B sequences of one query over S keys) through GroupedQueryAttentionVarlenFwdOp, and the
same decode through GroupedQueryAttentionPagedFwdOp over pages of 16 keys in shuffled order. SDPA
gets the packed tensors viewed [B, H, S, D] (enable_gqa=True; decode: is_causal=False, which for
one query over every key is the same mask). Timing: the best of --repeats calls after one warm-up
call, on the host clock, torch's threads as set (every core by default). Each case's output is
compared with SDPA's (max |difference|, printed). GFLOP/s = 4 D Hq (visible pairs) / time.

Usage: python3 bench/cpu_attention.py [--dtypes float32,bfloat16] [--prefill 256,1024]
       [--decode 8x4096] [--repeats 5]
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import tileops

HQ, HKV, D = 32, 8, 128


def best_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def prefill(s: int, dtype: torch.dtype, repeats: int) -> tuple[str, float, float, float, float]:
    q = torch.randn(s, HQ, D, dtype=dtype)
    k = torch.randn(s, HKV, D, dtype=dtype)
    v = torch.randn(s, HKV, D, dtype=dtype)
    cu = torch.tensor([0, s], dtype=torch.int32)
    op = tileops.GroupedQueryAttentionVarlenFwdOp(causal=True)
    views = [t.transpose(0, 1)[None] for t in (q, k, v)]
    ours = best_ms(lambda: op(q, k, v, cu, cu), repeats)
    sdpa = best_ms(lambda: F.scaled_dot_product_attention(*views, is_causal=True, enable_gqa=True), repeats)
    diff = (op(q, k, v, cu, cu)[0].float() - F.scaled_dot_product_attention(
        *views, is_causal=True, enable_gqa=True)[0].transpose(0, 1).float()).abs().max().item()
    pairs = s * (s + 1) // 2
    return f"prefill 1x{s} causal", ours, sdpa, 4 * D * HQ * pairs / 1e9, diff


def decode(b: int, s: int, dtype: torch.dtype, repeats: int, paged: bool) -> tuple[str, float, float, float, float]:
    q = torch.randn(b, HQ, D, dtype=dtype)
    k = torch.randn(b * s, HKV, D, dtype=dtype)
    v = torch.randn(b * s, HKV, D, dtype=dtype)
    cu_q = torch.arange(b + 1, dtype=torch.int32)
    if paged:
        page = 16
        pages = b * s // page
        order = torch.randperm(pages, generator=torch.Generator().manual_seed(0))
        k_cache = torch.empty(pages, page, HKV, D, dtype=dtype)
        v_cache = torch.empty_like(k_cache)
        k_cache[order] = k.view(pages, page, HKV, D)
        v_cache[order] = v.view(pages, page, HKV, D)
        table = order.view(b, s // page).to(torch.int32)
        seqused = torch.full((b,), s, dtype=torch.int32)
        op = tileops.GroupedQueryAttentionPagedFwdOp()
        run = lambda: op(q, k_cache, v_cache, cu_q, seqused, table)  # noqa: E731
    else:
        cu_k = torch.arange(0, (b + 1) * s, s, dtype=torch.int32)
        op = tileops.GroupedQueryAttentionVarlenFwdOp()
        run = lambda: op(q, k, v, cu_q, cu_k)  # noqa: E731
    qv = q.view(b, HQ, 1, D)
    kv = k.view(b, s, HKV, D).transpose(1, 2)
    vv = v.view(b, s, HKV, D).transpose(1, 2)
    sdpa_call = lambda: F.scaled_dot_product_attention(qv, kv, vv, enable_gqa=True)  # noqa: E731
    ours = best_ms(run, repeats)
    sdpa = best_ms(sdpa_call, repeats)
    diff = (run()[0].float() - sdpa_call().view(b, HQ, D).float()).abs().max().item()
    return f"decode {b}x{s}{' paged 16' if paged else ''}", ours, sdpa, 4 * D * HQ * b * s / 1e9, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--prefill", default="256,1024", help="sequence lengths of the causal prefill cases")
    parser.add_argument("--decode", default="8x4096", help="BxS cases of one query per sequence over S keys")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':28} {'dtype':9} {'tileops ms':>11} {'GFLOP/s':>8} {'sdpa ms':>9} {'GFLOP/s':>8} {'max diff':>9}")
    for name in args.dtypes.split(","):
        dtype = getattr(torch, name)
        rows = [prefill(int(s), dtype, args.repeats) for s in args.prefill.split(",") if s]
        for case in (c for c in args.decode.split(",") if c):
            b, s = (int(x) for x in case.split("x"))
            rows += [decode(b, s, dtype, args.repeats, paged) for paged in (False, True)]
        for label, ours, sdpa, gflop, diff in rows:
            print(f"{label:28} {name:9} {ours:11.2f} {gflop / ours * 1e3:8.1f} {sdpa:9.2f} "
                  f"{gflop / sdpa * 1e3:8.1f} {diff:9.2e}")


if __name__ == "__main__":
    main()
