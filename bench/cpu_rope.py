"""LongRoPEFwdOp on the CPU beside transformers' rotation (given its cos and sin) on the same input.

The op takes positions and computes cos and sin itself; transformers' `apply_rotary_pos_emb`
half-rotation gets them precomputed (its rotary module makes them once per forward), so its row
is the rotation alone. [1, T, H, 64] tensors, positions arange(T); mean of --calls calls after 20
warm-up calls, on the host clock.

    PYTHONPATH=build/python python bench/cpu_rope.py [--calls 200]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

import tileops


def mean_us(fn: Callable[[], object], calls: int) -> float:
    for _ in range(20):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    op = tileops.LongRoPEFwdOp(rescale_factors=torch.ones(32), base=10000.0, attention_scaling=1.0,
                               layout="bshd")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| dtype | T | H | tileops us | transformers' rotation us |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for dtype in (torch.float32, torch.bfloat16):
        for tokens, heads in ((1, 16), (64, 16), (256, 16), (256, 4), (1024, 16)):
            x = torch.randn(1, tokens, heads, 64, dtype=dtype)
            positions = torch.arange(tokens)[None]
            cos = torch.randn(1, tokens, 1, 64, dtype=dtype)
            sin = torch.randn(1, tokens, 1, 64, dtype=dtype)

            def rotate_half() -> torch.Tensor:
                return x * cos + torch.cat((-x[..., 32:], x[..., :32]), dim=-1) * sin

            ours = mean_us(lambda: op(x, positions), args.calls)
            theirs = mean_us(rotate_half, args.calls)
            print(f"| {str(dtype).removeprefix('torch.')} | {tokens} | {heads} | {ours:.1f} | {theirs:.1f} |")


if __name__ == "__main__":
    main()
