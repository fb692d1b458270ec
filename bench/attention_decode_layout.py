#!/usr/bin/env python3
"""What serving a transformers attention call with GroupedQueryAttentionVarlenFwdOp costs in
layout, beside the sdpa call transformers makes (the attention kind of
tileops.integrations.transformers; docs/design/integrations.md, "attention").

transformers hands the attention function q [B, Hq, Sq, D] and k, v [B, Hkv, Sk, D]; after a
DynamicCache update k and v are that layout, contiguous. The op takes packed tokens [T, H, D].
Per shape (Llama-3-8B's heads: 32 query, 8 KV, D 128; one sequence), the median time of:

  sdpa            transformers' sdpa_attention_forward (no mask; GQA as it dispatches it)
  copy k,v        k and v transposed to [Sk, Hkv, D] (the copy a token layout costs)
  op tokens       that copy, then the op over one sequence
  op per-head     the op with one sequence per (batch, KV head) over the cache as it is
                  ([B * Hkv * Sk, 1, D], no copy; q's group of heads as that sequence's heads)

for decode steps (Sq = 1 over Sk cached keys) and, for reference, prefill (Sq = Sk, k and v
fresh projections: the op packs them without a copy).

Usage: python3 bench/attention_decode_layout.py [--device cpu|cuda] [--dtype bfloat16|float32]
       [--contexts 512,2048,8192] [--iters N]     (PYTHONPATH: a build's python/ folder)
"""

from __future__ import annotations

import argparse

import torch

import tileops
from tileops.models._timing import median_ms
from transformers.integrations.sdpa_attention import sdpa_attention_forward

HQ, HKV, D = 32, 8, 128


class _Module(torch.nn.Module):
    """What sdpa_attention_forward reads of the attention module."""

    is_causal = True
    num_key_value_groups = HQ // HKV


def _offsets(n: int, step: int, device: str) -> torch.Tensor:
    return torch.arange(0, (n + 1) * step, step, dtype=torch.int32, device=device)


def decode_row(ctx: int, dtype: torch.dtype, device: str, iters: int) -> dict[str, float]:
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(1, 1, HQ, D, generator=g, device=device, dtype=dtype).transpose(1, 2)
    k = torch.randn(1, HKV, ctx, D, generator=g, device=device, dtype=dtype)
    v = torch.randn(1, HKV, ctx, D, generator=g, device=device, dtype=dtype)
    module = _Module()
    scale = D**-0.5
    op = tileops.GroupedQueryAttentionVarlenFwdOp(causal=True, softmax_scale=scale)
    cu_q1, cu_k1 = _offsets(1, 1, device), _offsets(1, ctx, device)
    cu_qh, cu_kh = _offsets(HKV, HQ // HKV, device), _offsets(HKV, ctx, device)
    open_op = tileops.GroupedQueryAttentionVarlenFwdOp(causal=False, softmax_scale=scale)

    def tokens() -> torch.Tensor:
        kt = k.transpose(1, 2).reshape(ctx, HKV, D)
        vt = v.transpose(1, 2).reshape(ctx, HKV, D)
        return op(q.reshape(1, HQ, D), kt, vt, cu_q1, cu_k1)[0]

    def per_head() -> torch.Tensor:
        # one sequence per KV head, its query heads as that sequence's queries (non-causal: a
        # single decode query sees every key)
        return open_op(q.reshape(HQ, 1, D), k.reshape(HKV * ctx, 1, D), v.reshape(HKV * ctx, 1, D),
                       cu_qh, cu_kh)[0]

    want = sdpa_attention_forward(module, q, k, v, None, scaling=scale)[0].reshape(HQ, D).float()
    for fn in (tokens, per_head):
        err = (fn().reshape(HQ, D).float() - want).abs().max().item()
        assert err < 5e-2, f"{fn.__name__}: max error {err}"
    return {
        "sdpa": median_ms(lambda: sdpa_attention_forward(module, q, k, v, None, scaling=scale), device, 3, iters),
        "copy k,v": median_ms(lambda: (k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()),
                              device, 3, iters),
        "op tokens": median_ms(tokens, device, 3, iters),
        "op per-head": median_ms(per_head, device, 3, iters),
    }


def prefill_row(s: int, dtype: torch.dtype, device: str, iters: int) -> dict[str, float]:
    g = torch.Generator(device=device).manual_seed(1)
    # the projections' [B, S, H, D] data viewed [B, H, S, D], as transformers hands them over
    q = torch.randn(1, s, HQ, D, generator=g, device=device, dtype=dtype).transpose(1, 2)
    k = torch.randn(1, s, HKV, D, generator=g, device=device, dtype=dtype).transpose(1, 2)
    v = torch.randn(1, s, HKV, D, generator=g, device=device, dtype=dtype).transpose(1, 2)
    module = _Module()
    scale = D**-0.5
    op = tileops.GroupedQueryAttentionVarlenFwdOp(causal=True, softmax_scale=scale)

    def tokens() -> torch.Tensor:
        cu = _offsets(1, s, device)
        return op(q.transpose(1, 2).reshape(s, HQ, D), k.transpose(1, 2).reshape(s, HKV, D),
                  v.transpose(1, 2).reshape(s, HKV, D), cu, cu)[0]

    return {
        "sdpa": median_ms(lambda: sdpa_attention_forward(module, q, k, v, None, scaling=scale), device, 3, iters),
        "op tokens": median_ms(tokens, device, 3, iters),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--contexts", default="512,2048,8192")
    parser.add_argument("--prefill", default="64,512")
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    cols = ("sdpa", "copy k,v", "op tokens", "op per-head")
    print(f"device {args.device}, {args.dtype}, Hq {HQ}, Hkv {HKV}, D {D}, batch 1; ms, median of {args.iters}")
    print("| call | " + " | ".join(cols) + " |")
    print("| --- |" + " ---: |" * len(cols))
    with torch.inference_mode():
        for ctx in (int(c) for c in args.contexts.split(",")):
            row = decode_row(ctx, dtype, args.device, args.iters)
            print(f"| decode, {ctx} keys | " + " | ".join(f"{row[c]:.4f}" if c in row else "" for c in cols) + " |")
        for s in (int(c) for c in args.prefill.split(",")):
            row = prefill_row(s, dtype, args.device, args.iters)
            print(f"| prefill, {s} tokens | " + " | ".join(f"{row[c]:.4f}" if c in row else "" for c in cols) + " |")


if __name__ == "__main__":
    main()
