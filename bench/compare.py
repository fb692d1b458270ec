#!/usr/bin/env python3
"""Side-by-side table of one run: our medians (`tileops bench --json`) and the peers'
(bench/peers.py's CSV), one row per case, in µs; the last column names the fastest, "ours" only
where we are faster than every peer timed after the same kind of flush.

Our runs are labelled by their flush ("memset" or "kernel"); peers.py's "fill" flush is a kernel
and its "@memset" columns were timed after cudaMemsetAsync, so "ours (kernel)" is compared with
the plain peer columns and "ours (memset)" with the "@memset" ones.

Usage: python3 bench/compare.py --ours bench.json [--ours bench-kernel.json] --peers peers.csv
"""
import argparse
import csv
import json
import sys


def load_ours(paths):
    ours = {}  # (op, case) -> {flush: median_us}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        flush = doc.get("flush", "memset")
        for r in doc["results"]:
            if r.get("median_s") is None or r.get("result") not in ("PASS", "UNCHECKED"):
                continue
            ours.setdefault((r["op"], r["case"]), {})[flush] = r["median_s"] * 1e6
    return ours


def load_peers(path):
    peers = {}  # (op, case) -> {peer: median_us}
    with open(path) as f:
        rows = [line for line in f if not line.startswith("#")]
    for r in csv.DictReader(rows):
        peers.setdefault((r["op"], r["case"]), {})[r["peer"]] = float(r["median_us"])
    return peers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", action="append", required=True)
    ap.add_argument("--peers", required=True)
    args = ap.parse_args()
    ours = load_ours(args.ours)
    peers = load_peers(args.peers)
    flushes = sorted({f for v in ours.values() for f in v})
    names = []
    for v in peers.values():
        for p in v:
            if p != "torch-eager" and p not in names:
                names.append(p)
    head = [f"ours ({f})" for f in flushes] + names + ["fastest (kernel flush)", "fastest (memset)"]
    print("| op | case | " + " | ".join(head) + " |")
    print("|" + "---|" * (len(head) + 2))
    for key in sorted(set(ours) | set(peers)):
        mine = ours.get(key, {})
        theirs = peers.get(key, {})
        cells = [f"{mine[f]:.2f}" if f in mine else "-" for f in flushes]
        cells += [f"{theirs[p]:.2f}" if p in theirs else "-" for p in names]

        def fastest(our_flush, suffix):
            group = {p: t for p, t in theirs.items()
                     if p != "torch-eager" and (p.endswith(suffix) if suffix else "@" not in p)}
            if our_flush not in mine or not group:
                return "-"
            best = min(group, key=group.get)
            return "ours" if mine[our_flush] < group[best] else best

        cells += [fastest("kernel", ""), fastest("memset", "@memset")]
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
