#!/usr/bin/env python3
"""Before/after table of `tileops bench --json` runs of two builds in one session.

Each side ran several rounds (A1, B1, A2, B2, ...: alternated, so drift hits both). Per case it
prints each side's best-of-rounds median in µs, the change of B against A, and the noise: the
largest spread between one side's own rounds. A change inside the noise is not a difference.

Usage: python3 bench/ab_compare.py --a a1.json a2.json --b b1.json b2.json [--names base change]
"""
from __future__ import annotations

import argparse
import json
import sys


def medians(paths: list[str]) -> dict[tuple[str, str], list[float]]:
    """(op, case) -> the median time of each round, in µs.

    Failed cases are left out; unchecked ones (timed with --no-check) are kept.
    """
    out: dict[tuple[str, str], list[float]] = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for r in doc["results"]:
            if r.get("median_s") is None or r.get("result") not in ("PASS", "UNCHECKED"):
                continue
            out.setdefault((r["op"], r["case"]), []).append(r["median_s"] * 1e6)
    return out


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / min(values) if len(values) > 1 else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", nargs="+", required=True, help="JSON files of side A's rounds")
    ap.add_argument("--b", nargs="+", required=True, help="JSON files of side B's rounds")
    ap.add_argument("--names", nargs=2, default=["A", "B"], help="labels of the two sides")
    args = ap.parse_args()
    a, b = medians(args.a), medians(args.b)
    cases = sorted(set(a) & set(b))
    missing = sorted(set(a) ^ set(b))
    na, nb = args.names
    header = f"{'op':<30} {'case':<34} {na + ' µs':>10} {nb + ' µs':>10} {'change':>8} {'noise':>7}"
    print(header)
    print("-" * len(header))
    worst = 0.0
    beyond = 0
    for op, case in cases:
        ta, tb = min(a[(op, case)]), min(b[(op, case)])
        change = tb / ta - 1.0
        noise = max(spread(a[(op, case)]), spread(b[(op, case)]))
        flag = " *" if change > noise and change > 0.02 else ""
        beyond += bool(flag)
        worst = max(worst, change)
        print(f"{op[:30]:<30} {case[:34]:<34} {ta:>10.2f} {tb:>10.2f} {change:>+8.1%} {noise:>7.1%}{flag}")
    print(f"{len(cases)} cases; slowest change {worst:+.1%}; {beyond} slower beyond both the noise "
          "and 2% (marked *)")
    for op, case in missing:
        print(f"only on one side: {op} {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
