"""The roofline chart draws `tileops bench --json` documents (skips without matplotlib)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib)")

from tileops import plot  # noqa: E402

DOC = {
    "tileops_version": "0.1.0",
    "device": "cuda:0",
    "profile": {"name": "test", "source": "test", "mem_bandwidth_bytes_per_s": 4.0e12,
                "flops_per_s": {"cuda_core.fp32": 6.0e13, "tensor_core.bf16": 7.9e14}},
    "results": [
        {"op": "RMSNormFwdOp", "case": "a", "median_s": 1e-5, "flops": 3.3e7, "bytes": 3.3e7},
        {"op": "MoEGroupedGemmFwdOp", "case": "b", "median_s": 1e-3, "flops": 5e11, "bytes": 2e9},
        {"op": "Broken", "case": "c", "median_s": None, "flops": 1, "bytes": 1},
    ],
}


def test_chart_is_written(tmp_path: Path) -> None:
    for suffix in ("svg", "png"):
        out = plot.roofline_chart(DOC, tmp_path / f"roofline.{suffix}")
        assert out.stat().st_size > 1000
    svg = (tmp_path / "roofline.svg").read_text()
    assert "RMSNormFwdOp" in svg and "MoEGroupedGemmFwdOp" in svg and "Broken" not in svg
