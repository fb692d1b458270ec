"""tileops from PyTorch: the manifest's ops as Python classes over the C++ library.

``tileops.RMSNormFwdOp(normalized_shape=[4096], eps=1e-6)(x, weight)`` runs the C++ op on torch
tensors (no copies; torch's current CUDA stream; outputs from torch's allocator). Each op with a
compile boundary is one custom operator per effect branch in ``torch.ops.tileops`` with a fake
from the manifest, so under ``torch.compile(fullgraph=True)`` it is one node; composite ops trace
through to their stages' nodes.
"""

from __future__ import annotations

from pathlib import Path

import torch

torch.ops.load_library(str(Path(__file__).with_name("libtileops_torch.so")))

from tileops import _fake  # noqa: E402
from tileops._op import BoundaryOp, CompositeOp, LastCall, TensorInfo  # noqa: E402
from tileops.errors import (  # noqa: E402
    AmbiguousTargetError,
    ArgumentTypeError,
    BackendError,
    DeviceError,
    DispatchError,
    DTypeError,
    Error,
    ManifestError,
    OpNotAvailableError,
    SignatureError,
    UnknownTargetError,
    UsageError,
)
from tileops.ops import *  # noqa: E402,F403
from tileops.ops import __all__ as _op_names  # noqa: E402

COMPILE_OP_NAMES: tuple[str, ...] = tuple(_fake.register_all())

__all__ = [
    *_op_names,
    "COMPILE_OP_NAMES",
    "AmbiguousTargetError",
    "ArgumentTypeError",
    "BackendError",
    "BoundaryOp",
    "CompositeOp",
    "DTypeError",
    "DeviceError",
    "DispatchError",
    "Error",
    "LastCall",
    "ManifestError",
    "OpNotAvailableError",
    "SignatureError",
    "TensorInfo",
    "UnknownTargetError",
    "UsageError",
]
