#!/usr/bin/env python3
"""Side-by-side table of one run: our medians (`tileops bench --json`) and the peers'
(bench/peers.py's CSV), one row per case, in µs; the last column names the fastest, "ours" only
where we are faster than every peer timed after the same kind of flush.

Columns are labelled by the flush before the timed call: "memset" (cudaMemsetAsync) or "kernel"
(our fill kernel; peers.py's fill_, a kernel too). Each "fastest" column compares ours with the
peers timed after the same kind of flush.

Usage: python3 bench/compare.py --ours bench-memset.json [--ours bench-kernel.json] --peers peers.csv
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


# peers.py's flush names against ours: its fill_ is a kernel.
OUR_FLUSH = {"fill": "kernel", "memset": "memset"}


def load_peers(path):
    """(op, case) -> {(peer, our flush name): median_us}. The CSV's header says which flushes
    peers.py ran ("flush=fill,memset"): plain peer names are after the first, "<peer>@<flush>"
    after the others (runs before that header line: fill)."""
    peers = {}
    first = "fill"
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        if line.startswith("#") and "flush=" in line:
            first = line.split("flush=")[1].split()[0].split(",")[0]
    for r in csv.DictReader(line for line in lines if not line.startswith("#")):
        name, _, flush = r["peer"].partition("@")
        peers.setdefault((r["op"], r["case"]), {})[(name, OUR_FLUSH[flush or first])] = float(
            r["median_us"])
    return peers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", action="append", required=True)
    ap.add_argument("--peers", required=True)
    args = ap.parse_args()
    ours = load_ours(args.ours)
    peers = load_peers(args.peers)
    flushes = sorted({f for v in ours.values() for f in v} | {f for v in peers.values() for _, f in v})
    names = []
    for v in peers.values():
        for name, _ in v:
            if name != "torch-eager" and name not in names:
                names.append(name)
    columns = [(n, f) for f in flushes for n in names]
    head = [f"ours ({f})" for f in flushes] + [f"{n} ({f})" for n, f in columns]
    head += [f"fastest ({f})" for f in flushes]
    print("| op | case | " + " | ".join(head) + " |")
    print("|" + "---|" * (len(head) + 2))
    for key in sorted(set(ours) | set(peers)):
        mine = ours.get(key, {})
        theirs = peers.get(key, {})
        cells = [f"{mine[f]:.2f}" if f in mine else "-" for f in flushes]
        cells += [f"{theirs[c]:.2f}" if c in theirs else "-" for c in columns]
        for f in flushes:
            group = {n: t for (n, g), t in theirs.items() if g == f and n != "torch-eager"}
            if f not in mine or not group:
                cells.append("-")
                continue
            best = min(group, key=group.get)
            cells.append("ours" if mine[f] < group[best] else best)
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
