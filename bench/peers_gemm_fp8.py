#!/usr/bin/env python3
"""PyTorch peers of FP8BlockScaledGemmFwdOp, timed the way `tileops bench --device cuda --flush
kernel` times ours (bench/peers.py's L2 flush by fill_ and its median over CUDA events).

On the op's manifest workloads (manifest/gemm.yaml; M, N, K), per shape:
  torch.matmul bf16   a [M, K] bf16 @ w.t(), w [N, K] bf16 (the issue's goal: ours >= 1.6x this
                      at M >= 1024)
  torch._scaled_mm    e4m3 a [M, K] @ w.t() with row-wise float32 scales (one per row of a and
                      one per weight row, over the whole K), out bf16: the same data movement and
                      MMA work as ours with a simpler epilogue, not the same arithmetic (ours
                      scales per 128-element K block); skipped where this PyTorch lacks it
TFLOP/s = 2 M N K / time. Writes a table (stdout) and a CSV ($OUT/peers_gemm_fp8.csv, or --csv).

Usage: python3 bench/peers_gemm_fp8.py [--iters N] [--csv PATH]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import time_median_us  # noqa: E402  (the L2 flush and median of the other peers)

SHAPES = [  # (label, M, N, K): FP8BlockScaledGemmFwdOp's workloads
    ("dsv3-qkv-a-m4096", 4096, 2112, 7168),
    ("dsv3-q-b-m4096", 4096, 24576, 1536),
    ("dsv3-kv-b-m4096", 4096, 32768, 512),
    ("dsv3-o-m4096", 4096, 7168, 16384),
    ("dsv3-gate-up-m4096", 4096, 4096, 7168),
    ("dsv3-down-m4096", 4096, 7168, 2048),
    ("dsv3-qkv-a-m64", 64, 2112, 7168),
    ("dsv3-o-m64", 64, 7168, 16384),
    ("dsv3-gate-up-m64", 64, 4096, 7168),
    ("dsv3-q-b-m1024", 1024, 24576, 1536),
    ("dsv3-o-m1024", 1024, 7168, 16384),
    ("dsv3-q-b-m8192", 8192, 24576, 1536),
    ("dsv3-o-m8192", 8192, 7168, 16384),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=31)
    ap.add_argument("--csv", default=os.path.join(os.environ.get("OUT", "."), "peers_gemm_fp8.csv"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("peers_gemm_fp8.py: no CUDA device visible to PyTorch; nothing to measure")
        return 0
    torch.manual_seed(0)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, median of {args.iters}, "
          "L2 flushed (fill_) before each call")
    rows = []
    for label, m, n, k in SHAPES:
        flops = 2.0 * m * n * k
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        w = (torch.randn(n, k, device="cuda") / k**0.5).to(torch.bfloat16)
        peers = [("torch.matmul bf16", lambda: torch.matmul(a, w.t()))]
        if hasattr(torch, "_scaled_mm"):
            a8 = a.to(torch.float8_e4m3fn)
            w8 = (w * k**0.5).to(torch.float8_e4m3fn)
            sa = torch.ones(m, 1, device="cuda")
            sb = torch.full((1, n), k**-0.5, device="cuda")
            peers.append(("torch._scaled_mm fp8 rowwise",
                          lambda: torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sb,
                                                   out_dtype=torch.bfloat16)))
        for peer, fn in peers:
            try:
                us = time_median_us(fn, args.iters)
            except RuntimeError as e:  # a peer this PyTorch or GPU does not serve
                print(f"{label:22s} {peer:30s} unavailable: {str(e).splitlines()[0]}")
                continue
            tflops = flops / (us * 1e-6) / 1e12
            rows.append((label, m, n, k, peer, us, tflops))
            print(f"{label:22s} {peer:30s} {us:12.2f} us {tflops:8.1f} TFLOP/s", flush=True)
        del a, w
        torch.cuda.empty_cache()
    with open(args.csv, "w") as f:
        f.write("case,M,N,K,peer,us,tflops\n")
        for r in rows:
            f.write(",".join(str(x) for x in r[:5]) + f",{r[5]:.3f},{r[6]:.2f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
