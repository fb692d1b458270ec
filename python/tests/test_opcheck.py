"""torch.library.opcheck on every custom operator of the compile boundary: schema, fake
(against the real kernel), and aot_dispatch_dynamic, over several shapes and dtypes."""

from __future__ import annotations

import pytest
import torch

import tileops
from samples import cases, build

CASES = cases("cpu")


def _ids(c: object) -> str:
    return f"{c.op}-{c.label}"  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_opcheck_allocating_branch(case, device: str) -> None:
    if device != "cpu":
        case = _on(case, device)
    op = build(case)
    torch.library.opcheck(op._alloc_op, (op.instance_key, *case.inputs))


@pytest.mark.parametrize("case", [c for c in CASES if c.has_out], ids=_ids)
def test_opcheck_out_branch(case, device: str) -> None:
    if device != "cpu":
        case = _on(case, device)
    op = build(case)
    expected = op(*case.inputs)
    out = torch.empty_like(expected)
    torch.library.opcheck(op._out_op, (op.instance_key, *case.inputs, out))


def _on(case, device: str):
    import dataclasses

    moved = tuple(t.to(device) if t is not None else None for t in case.inputs)
    params = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in case.params.items()}
    return dataclasses.replace(case, inputs=moved, params=params)


def test_every_boundary_op_has_opcheck_cases() -> None:
    covered = {c.op for c in CASES}
    boundary = {name for name in tileops.ops.__all__ if getattr(tileops, name).compile_op_names}
    assert covered == boundary


def test_out_branch_writes_the_buffer() -> None:
    case = cases("cpu")[0]
    op = build(case)
    out = torch.empty_like(case.inputs[0])
    result = op(*case.inputs, out=out)
    assert result is out
    torch.testing.assert_close(out, op(*case.inputs), rtol=0, atol=0)
