#!/usr/bin/env python3
"""Launches torch.compile's kernels of the RMSNorm / fused add+RMSNorm workloads once each, for a
profiler: every case is compiled and warmed up first, then run once inside
cudaProfilerStart/Stop, so that `ncu --profile-from-start off` sees exactly one launch per case, in
the order printed. The expressions are bench/peers.py's own (imported from it). Used by
scripts/ncu-norm.sh."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import fused_add_rms_norm_eager, rms_norm_eager  # noqa: E402

# (label, fused, rows, cols, dtype): the workloads where the kernels are compared.
CASES = [
    ("rms bf16 1x4096", False, 1, 4096, torch.bfloat16),
    ("rms bf16 64x8192", False, 64, 8192, torch.bfloat16),
    ("rms bf16 2048x4096", False, 2048, 4096, torch.bfloat16),
    ("rms fp32 2048x4096", False, 2048, 4096, torch.float32),
    ("rms bf16 2048x8192", False, 2048, 8192, torch.bfloat16),
    ("rms bf16 2048x16384", False, 2048, 16384, torch.bfloat16),
    ("fused bf16 1x4096", True, 1, 4096, torch.bfloat16),
    ("fused bf16 2048x4096", True, 2048, 4096, torch.bfloat16),
    ("fused fp16 2048x4096", True, 2048, 4096, torch.float16),
    ("fused bf16 2048x8192", True, 2048, 8192, torch.bfloat16),
    ("fused bf16 2048x16384", True, 2048, 16384, torch.bfloat16),
]


def main():
    torch.manual_seed(0)
    calls = []
    for label, fused, rows, cols, dtype in CASES:
        # A compiled function per case: each one is specialized to its shape, as a model's would be.
        fn = torch.compile(fused_add_rms_norm_eager if fused else rms_norm_eager, dynamic=False)
        x = torch.randn(rows, cols, dtype=dtype, device="cuda")
        w = torch.randn(cols, dtype=dtype, device="cuda")
        if fused:
            r = torch.randn(rows, cols, dtype=dtype, device="cuda")
            call = (lambda fn=fn, x=x, r=r, w=w: fn(x, r, w))
        else:
            call = (lambda fn=fn, x=x, w=w: fn(x, w))
        for _ in range(3):
            call()
        calls.append((label, call))
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for label, call in calls:
        print(f"case {label}", flush=True)
        call()
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    sys.exit(main())
