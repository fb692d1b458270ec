#!/usr/bin/env python3
"""Short summary of an Nsight Compute raw page (`ncu --import R.ncu-rep --page raw --csv`).

Per profiled launch: the duration, the speed-of-light throughputs, the issue slots and the
achieved occupancy, the launch shape, the busiest pipes (% of their peak while the SM was
active) and the warps' top stall reasons (cycles per issued instruction spent in each), so that
"what limits this kernel" fits in a few lines (scripts/ncu-profile.sh).

Usage: python3 bench/ncu_summary.py RAW.csv [--title TEXT] [--top N]
"""
from __future__ import annotations

import argparse
import csv
import re
import sys

_HEADLINE = [
    ("duration", "gpu__time_duration.sum"),
    ("SM throughput %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("memory throughput %", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("DRAM throughput %", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("issue slots busy %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("warps active %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("registers", "launch__registers_per_thread"),
    ("grid", "launch__grid_size"),
    ("block", "launch__block_size"),
]
_PIPE = re.compile(r"^sm__(?:pipe_(.+)_cycles_active|inst_executed_pipe_(.+))"
                   r"\.avg\.pct_of_peak_sustained_active$")
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio$")


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def top(row: dict[str, str], pattern: re.Pattern[str], n: int) -> list[tuple[str, float]]:
    found: list[tuple[str, float]] = []
    for name, text in row.items():
        match = pattern.match(name)
        value = number(text) if match else None
        if match and value is not None:
            label = next(g for g in match.groups() if g)
            found.append((label, value))
    return sorted(found, key=lambda item: -item[1])[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", help="the raw page as CSV")
    ap.add_argument("--title", default="")
    ap.add_argument("--top", type=int, default=8, help="pipes and stall reasons shown")
    args = ap.parse_args()
    with open(args.raw, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header_at = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if header_at is None or len(rows) < header_at + 3:
        print(f"{args.title}: no profiled launch in {args.raw}")
        return 1
    header, units = rows[header_at], rows[header_at + 1]
    unit_of = dict(zip(header, units))
    for values in rows[header_at + 2:]:
        row = dict(zip(header, values))
        print(f"== {args.title}: {row.get('Kernel Name', '?').split('(')[0][:100]}")
        for label, metric in _HEADLINE:
            if metric in row:
                print(f"  {label:22s} {row[metric]} {unit_of.get(metric, '')}".rstrip())
        pipes = top(row, _PIPE, args.top)
        if pipes:
            print("  pipes (% of peak, SM active): " +
                  ", ".join(f"{name} {value:.1f}" for name, value in pipes))
        stalls = top(row, _STALL, args.top)
        if stalls:
            print("  stalls (cycles per issued instruction): " +
                  ", ".join(f"{name} {value:.2f}" for name, value in stalls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
