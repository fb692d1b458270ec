#!/usr/bin/env python3
"""Before/after table of kernel durations that ncu measured at locked clocks (scripts/ncu-ab.sh).

Input: a folder of `ncu --csv --metrics gpu__time_duration.sum` logs named
`<case>-<side><round>.csv` (side `a` the base, `b` the change). Per case it prints each side's
median over every profiled launch of every round (and the range), the change of B against A,
and each side's spread ((max - min) / median). With clocks locked (`--clock-control base`) a
side's launches of a compute-bound kernel spread by about 0.3-2% on an H100, where `tileops
bench` rounds at the clocks as found spread by up to 12% (docs/perf/README.md, "A/B of two
trees").

Usage: python3 bench/ncu_ab.py FOLDER [--names base change]
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

# ncu writes a duration in whichever unit suits it.
_UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def durations_us(path: Path) -> list[float]:
    """The gpu__time_duration.sum values of one ncu CSV log, in µs (other lines are skipped)."""
    header: list[str] | None = None
    out: list[float] = []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if "Metric Name" in row:
                header = row
                continue
            if header is None or len(row) != len(header):
                continue
            if row[header.index("Metric Name")] != "gpu__time_duration.sum":
                continue
            unit = row[header.index("Metric Unit")]
            if unit not in _UNITS_US:
                raise ValueError(f"{path}: unknown duration unit {unit!r}")
            value = float(row[header.index("Metric Value")].replace(",", ""))
            out.append(value * _UNITS_US[unit])
    return out


def collect(folder: Path) -> dict[str, dict[str, list[float]]]:
    """case -> side ('a' or 'b') -> every launch's duration in µs."""
    out: dict[str, dict[str, list[float]]] = {}
    for path in sorted(folder.glob("*.csv")):
        case, _, tag = path.stem.rpartition("-")
        if not case or not tag or tag[0] not in "ab":
            continue
        out.setdefault(case, {}).setdefault(tag[0], []).extend(durations_us(path))
    return out


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--names", nargs=2, default=["A", "B"], help="labels of the two sides")
    args = ap.parse_args()
    table = collect(args.folder)
    if not table:
        print(f"no ncu logs in {args.folder}", file=sys.stderr)
        return 1
    a_name, b_name = args.names
    print(f"{'case':40s} {a_name + ' us':>22s} {b_name + ' us':>22s} {'change':>8s} "
          f"{'spread A / B':>13s}")
    missing = 0
    for case, sides in table.items():
        a, b = sides.get("a", []), sides.get("b", [])
        if not a or not b:
            print(f"{case:40s} no launches on side {'a' if not a else 'b'}")
            missing += 1
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{case:40s} {ma:10.1f} [{min(a):.1f}-{max(a):.1f}] "
              f"{mb:10.1f} [{min(b):.1f}-{max(b):.1f}] {(mb / ma - 1) * 100:+7.2f}% "
              f"{spread(a) * 100:5.1f}% / {spread(b) * 100:.1f}%")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
