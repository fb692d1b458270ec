"""Roofline charts of ``tileops bench --json`` results (matplotlib).

Each benchmarked case is a point at its arithmetic intensity (manifest flops over manifest bytes)
and its achieved rate (flops over the median time); the roof is the device's measured memory
bandwidth times the intensity, capped by the peak of the compute unit the case is priced on
(``roof_key``), both from the hardware profile in the same JSON document.

    tileops bench --all --device cuda --json bench.json
    python -m tileops.plot bench.json -o roofline.svg
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def load(path: str | Path) -> dict[str, Any]:
    """The JSON document `tileops bench --json` wrote."""
    return json.loads(Path(path).read_text())


def roofline_chart(doc: dict[str, Any], out: str | Path, title: str | None = None) -> Path:
    """Draws the cases of `doc` against their roofs into `out` (.png or .svg); returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profile = doc["profile"]
    bandwidth = float(profile["mem_bandwidth_bytes_per_s"])
    peaks: dict[str, float] = {k: float(v) for k, v in profile["flops_per_s"].items()}
    rows = [r for r in doc["results"] if r.get("median_s") and r.get("bytes") and r.get("flops")]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    if rows:
        intensities = [r["flops"] / r["bytes"] for r in rows]
        lo, hi = min(intensities) / 4, max(intensities) * 4
    else:
        lo, hi = 0.1, 1000.0
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for key, peak in sorted(peaks.items()):
        ax.plot(xs, [min(peak, bandwidth * x) / 1e12 for x in xs], linewidth=1.2,
                label=f"roof: {key} {peak / 1e12:.3g} TFLOP/s, {bandwidth / 1e9:.0f} GB/s")
    ops = sorted({r["op"] for r in rows})
    markers = "osD^v<>ph*"
    for i, op in enumerate(ops):
        mine = [r for r in rows if r["op"] == op]
        ax.scatter([r["flops"] / r["bytes"] for r in mine],
                   [r["flops"] / r["median_s"] / 1e12 for r in mine],
                   marker=markers[i % len(markers)], label=op, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, manifest roofline)")
    ax.set_ylabel("achieved TFLOP/s (manifest flops / median time)")
    ax.set_title(title or f"tileops {doc.get('tileops_version', '')} on {doc.get('device', '')}: {profile['name']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    out = Path(out)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Roofline chart of `tileops bench --json` results")
    parser.add_argument("json", help="the file `tileops bench --json FILE` wrote")
    parser.add_argument("-o", "--out", default="roofline.svg", help="output image (.svg or .png)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    print(roofline_chart(load(args.json), args.out, args.title))


if __name__ == "__main__":
    main()
