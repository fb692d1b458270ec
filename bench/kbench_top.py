#!/usr/bin/env python3
"""The fastest configurations of each case of a bench_cuda_kernels run, from its CSV output
(--benchmark_format=csv, with or without --benchmark_report_aggregates_only): per case, the
default configuration's median and the N fastest rows (median real time, µs).

Usage: python3 bench/kbench_top.py RESULTS.csv [N]
"""
import csv
import re
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with open(path) as f:
        rows = [r for r in csv.reader(f) if r and r[0].endswith("_median")]
    cases = {}
    for r in rows:
        name = r[0][: -len("_median")]
        m = re.match(r"((?:fused_add_)?rms_norm/[^/]+/[^/]+|long_rope/[^/]+/[^/]+|copy/\d+)(/.*)?", name)
        if not m:
            continue
        cfg = m.group(2) or ""
        cfg = "default" if cfg.startswith("/iterations") or not cfg else cfg.lstrip("/")
        cfg = re.sub(r"/iterations:.*$", "", cfg)
        unit = r[4] if len(r) > 4 else "us"
        t = float(r[2])
        t = t / 1e3 if unit == "ns" else t * 1e3 if unit == "ms" else t
        cases.setdefault(m.group(1), []).append((t, cfg))
    for case, results in cases.items():
        results.sort()
        default = [t for t, c in results if c == "default"]
        print(f"{case}: default {default[0]:.2f} us" if default else f"{case}:")
        for t, c in results[:top]:
            short = c.replace("rows_per_block=", "rpb=").replace("vec_bytes=16,", "")
            short = short.replace("vecs_per_thread=", "nv=").replace("weight_in_registers=", "wreg=")
            short = short.replace("blocks_per_sm=", "bps=").replace("streaming_unroll=", "U=")
            print(f"  {t:8.2f}  {short}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
