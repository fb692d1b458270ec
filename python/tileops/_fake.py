"""Registers the fake of every custom operator of the compile boundary, from the manifest.

No op has a hand-written fake: each one below is the same function over the op's generated
description (tileops._shapes infers the outputs from the manifest's declarations). Outputs are
built with ``torch.empty`` of the inferred shape and dtype (contiguous, as the real outputs are).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tileops._op import _MANIFEST, live_instance
from tileops._shapes import infer_outputs


def _make_fake(entry: dict[str, Any], out_branch: bool) -> Callable[..., Any]:
    n_inputs = len(entry["inputs"])
    buffer = next((i for i, o in enumerate(entry["outputs"]) if o["buffer_out"]), None)

    def fake(key: str, *args: Any) -> Any:
        meta, params = live_instance(key)
        inputs = args[:n_inputs]
        device = next(t.device for t in inputs if t is not None)
        outputs = infer_outputs(meta, params, inputs)
        results = [
            torch.empty(shape, dtype=dtype, device=device)
            for i, (shape, dtype) in enumerate(outputs)
            if not (out_branch and i == buffer)
        ]
        if not results:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    return fake


def register_all() -> list[str]:
    """Registers a fake for every custom operator; returns their names."""
    names = []
    for entry in _MANIFEST.values():
        for compile_op in entry["compile_ops"]:
            torch.library.register_fake(compile_op["name"])(_make_fake(entry, compile_op["out"]))
            names.append(compile_op["name"])
    return names
