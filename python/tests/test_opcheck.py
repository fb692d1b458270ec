"""torch.library.opcheck on every custom operator of the compile boundary: schema, fake
(against the real kernel), and aot_dispatch_dynamic, over several shapes and dtypes."""

from __future__ import annotations

import pytest
import torch

import tileops
from samples import build, cases, without_kernel

CASES = cases("cpu")

# torch's test_schema (SchemaCheckMode) compares every input before and after the call with
# torch.allclose, which has no CPU kernel for float8 (torch 2.15): for calls reading float8
# tensors it is replaced by a bitwise comparison of the inputs (the schemas mutate none).
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_WITHOUT_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.dtype in _FP8 else t


def _opcheck(fn, args: tuple, written: int = 0) -> None:
    """opcheck of fn(*args), whose last `written` arguments are its out buffers."""
    read = [a for a in args[: len(args) - written] if isinstance(a, torch.Tensor)]
    if not any(t.dtype in _FP8 for t in read):
        torch.library.opcheck(fn, args)
        return
    before = [_bits(t).clone() for t in read]
    fn(*args)
    for t, b in zip(read, before):
        assert torch.equal(_bits(t), b), "an input was mutated"
    torch.library.opcheck(fn, args, test_utils=_WITHOUT_SCHEMA)


def _ids(c: object) -> str:
    return f"{c.op}-{c.label}"  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_opcheck_allocating_branch(case, device: str) -> None:
    if without_kernel(case.op, device):
        pytest.skip("no CUDA kernel yet (the error is checked in test_native_path)")
    if device != "cpu" and case.cuda_refusal is not None:
        pytest.skip("the CUDA kernel refuses this case (the error is checked in test_native_path)")
    if device != "cpu":
        case = _on(case, device)
    op = build(case)
    _opcheck(op._alloc_op, (op.instance_key, *case.inputs))


@pytest.mark.parametrize("case", [c for c in CASES if c.has_out], ids=_ids)
def test_opcheck_out_branch(case, device: str) -> None:
    if without_kernel(case.op, device):
        pytest.skip("no CUDA kernel yet (the error is checked in test_native_path)")
    if device != "cpu" and case.cuda_refusal is not None:
        pytest.skip("the CUDA kernel refuses this case (the error is checked in test_native_path)")
    if device != "cpu":
        case = _on(case, device)
    op = build(case)
    expected = op(*case.inputs)
    if isinstance(expected, tuple):  # several outputs: the one `buffer: out` names
        expected = expected[next(i for i, o in enumerate(op._meta["outputs"]) if o["buffer_out"])]
    out = torch.empty_like(expected)
    _opcheck(op._out_op, (op.instance_key, *case.inputs, out), written=1)


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
