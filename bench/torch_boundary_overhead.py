"""Host cost of an eager call from Python through the compile boundary, against
torch.nn.functional.rms_norm, on the tiny RMSNorm of bench_op_overhead.cpp ([1, 4096] bf16).

Beside them, the same two schemas with nothing behind them (torch.ops.tileops._overhead_floor and
_overhead_floor_out: the dispatcher's own cost of such a call from Python, what any custom
operator pays), so that what tileops adds on top is read off one run.

Method (the same as bench_op_overhead.cpp's CUDA benchmarks): batches of 200 calls are enqueued
and timed on the host clock, the device is synchronised outside the timed region (the queue
never fills, so the time is the host's); the median over the batches, per call, is printed. The
rows take turns batch by batch (one batch of each row, then the next round).

    python bench/torch_boundary_overhead.py [--batches 200] [--device cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import tileops

BATCH = 200


def host_us_per_call(
    rows: dict[str, Callable[[], object]], batches: int, sync: Callable[[], None]
) -> dict[str, float]:
    """Median host µs per call of each row. The rows take turns batch by batch, so that a drift
    of the host (clock, other load) during the run weighs on every row alike."""
    for fn in rows.values():
        for _ in range(BATCH):
            fn()
    sync()
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(batches):
        for name, fn in rows.items():
            start = time.perf_counter()
            for _ in range(BATCH):
                fn()
            times[name].append((time.perf_counter() - start) / BATCH)
            sync()
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--json", default=None)
    parser.add_argument("--device", default="cuda", help="cuda (the figures) or cpu (a smoke run)")
    args = parser.parse_args()
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    x = torch.randn(1, 4096, device=dev, dtype=torch.bfloat16)
    w = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    op = tileops.RMSNormFwdOp(normalized_shape=[4096], eps=1e-6)
    key = op.instance_key
    alloc = torch.ops.tileops.norm_rms_norm_fwd.default
    into = torch.ops.tileops.norm_rms_norm_fwd_out.default
    floor = torch.ops.tileops._overhead_floor.default
    floor_out = torch.ops.tileops._overhead_floor_out.default
    rows = {
        "tileops op(x, w) (Python class, allocating)": lambda: op(x, w),
        "tileops op(x, w, out=y) (Python class)": lambda: op(x, w, out=out),
        "torch.ops.tileops.norm_rms_norm_fwd (allocating)": lambda: alloc(key, x, w),
        "torch.ops.tileops.norm_rms_norm_fwd_out": lambda: into(key, x, w, out),
        "floor: same schema, nothing behind (allocating)": lambda: floor(key, x, w),
        "floor: same schema, nothing behind (out)": lambda: floor_out(key, x, w, out),
        "torch.nn.functional.rms_norm": lambda: F.rms_norm(x, [4096], w, 1e-6),
        "torch.empty_like (a torch op doing nothing on the GPU)": lambda: torch.empty_like(x),
    }
    results = host_us_per_call(rows, args.batches, sync)
    where = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    print(f"host time per call, [1, 4096] bf16, {where}, torch {torch.__version__}")
    print(f"{'call':58s} {'us/call':>9s}")
    for name, us in results.items():
        print(f"{name:58s} {us:9.2f}")
    over_floor = {
        "allocating": results["torch.ops.tileops.norm_rms_norm_fwd (allocating)"]
        - results["floor: same schema, nothing behind (allocating)"],
        "out": results["torch.ops.tileops.norm_rms_norm_fwd_out"]
        - results["floor: same schema, nothing behind (out)"],
    }
    for branch, us in over_floor.items():
        print(f"{'tileops over the floor (' + branch + ')':58s} {us:9.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
