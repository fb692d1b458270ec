"""Bad input from Python: each a typed tileops exception (also the matching built-in) whose
message names the broken rule, and the op stays usable afterwards."""

from __future__ import annotations

import pytest
import torch

import tileops
from conftest import requires_cuda


def _op_and_inputs(device: str) -> tuple[tileops.RMSNormFwdOp, torch.Tensor, torch.Tensor]:
    op = tileops.RMSNormFwdOp(normalized_shape=[8], eps=1e-6)
    x = torch.randn(3, 8, device=device)
    return op, x, torch.ones(8, device=device)


def _still_works(op: tileops.RMSNormFwdOp, x: torch.Tensor, w: torch.Tensor) -> None:
    y = op(x, w)
    want = torch.nn.functional.rms_norm(x.double(), [8], w.double(), 1e-6)
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-6)
    assert op.last_call.tensors["x"].shape == tuple(x.shape)


def test_mismatched_dtype(device: str) -> None:
    op, x, w = _op_and_inputs(device)
    with pytest.raises(tileops.DTypeError, match=r"input 'weight' declared dtype T") as info:
        op(x.to(torch.bfloat16), w)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    _still_works(op, x, w)


def test_unsupported_dtype(device: str) -> None:
    op, x, w = _op_and_inputs(device)
    with pytest.raises(tileops.DTypeError, match="float64|Double"):
        op(x.double(), w.double())
    _still_works(op, x, w)


def test_float8_e5m2_maps_and_is_refused(device: str) -> None:
    # torch.float8_e5m2 maps to the runtime's float8_e5m2 (the manifest's check names it), which
    # no op accepts yet.
    op, x, w = _op_and_inputs(device)
    with pytest.raises(tileops.DTypeError,
                       match=r"input 'x' declared dtype T: T must be one of .*, got float8_e5m2"):
        op(x.to(torch.float8_e5m2), w.to(torch.float8_e5m2))
    _still_works(op, x, w)


def test_wrong_shape_names_the_declaration(device: str) -> None:
    op, x, w = _op_and_inputs(device)
    with pytest.raises(tileops.SignatureError, match=r"declared \[\*normalized_shape\]") as info:
        op(x, torch.ones(7, device=device))
    assert isinstance(info.value, ValueError)
    _still_works(op, x, w)


def test_non_tensor_argument(device: str) -> None:
    op, x, w = _op_and_inputs(device)
    with pytest.raises(TypeError, match="input 'weight' must be a torch.Tensor"):
        op(x, 1.0)  # type: ignore[arg-type]
    with pytest.raises(tileops.ArgumentTypeError):
        op(x, w, out=[1, 2])  # type: ignore[arg-type]
    _still_works(op, x, w)


def test_bad_parameter_names_the_rule() -> None:
    with pytest.raises(tileops.SignatureError, match=r"shape rule 'eps >= 0'"):
        tileops.RMSNormFwdOp(normalized_shape=[8], eps=-1.0)
    with pytest.raises(tileops.SignatureError, match="must be one of 'softmax' | 'sigmoid'"):
        tileops.MoETopKRoutingFwdOp(top_k=2, scoring="cosine")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an int"):
        tileops.MoETopKRoutingFwdOp(top_k="2")  # type: ignore[arg-type]


def test_last_call_before_any_call_is_a_usage_error() -> None:
    op = tileops.RMSNormFwdOp(normalized_shape=[8])
    with pytest.raises(tileops.UsageError) as info:
        op.last_call
    assert isinstance(info.value, RuntimeError)


@requires_cuda
def test_cpu_tensor_to_a_cuda_call() -> None:
    op, x, w = _op_and_inputs("cuda")
    with pytest.raises(tileops.SignatureError, match="device|cpu"):
        op(x, w.cpu())
    _still_works(op, x, w)


@requires_cuda
def test_out_on_another_device() -> None:
    op, x, w = _op_and_inputs("cuda")
    with pytest.raises(tileops.SignatureError):
        op(x, w, out=torch.empty(3, 8))
    _still_works(op, x, w)
