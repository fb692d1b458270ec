"""The "rms_norm" kind: a transformers RMSNorm (weight * x / rms(x), Llama's formulation) served
by RMSNormFwdOp."""

from __future__ import annotations

import torch
from torch import nn

import tileops
from tileops.integrations.transformers._common import (
    Replacement,
    device_refusal,
    hooks_refusal,
    runs_transformers,
    traces_transformers,
)

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def refusal(module: nn.Module) -> str | None:
    """Why `module` (an RMSNorm of a listed architecture) cannot be served, or None."""
    weight = getattr(module, "weight", None)
    eps = getattr(module, "variance_epsilon", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1:
        return "no 1-D weight"
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or eps < 0:
        return f"variance_epsilon {eps!r} is not a float >= 0"
    if weight.dtype not in DTYPES:
        return f"weight dtype {weight.dtype} (RMSNormFwdOp takes float32, float16, bfloat16)"
    return device_refusal(weight, "the weight") or hooks_refusal(module)


class TileOpsRMSNorm(Replacement):
    """RMSNormFwdOp over the last dimension with the model's own weight.

    transformers rounds the normalized x to the input dtype before the weight multiply; tileops
    rounds once, at the end (within one unit in the last place of the result). Calls with an
    input dtype other than the weight's (transformers then promotes) run the replaced module.
    """

    kind = "rms_norm"

    def __init__(self, hf_module: nn.Module) -> None:
        super().__init__(hf_module)
        self.weight = hf_module.weight
        self.variance_epsilon = float(hf_module.variance_epsilon)
        self.op = tileops.RMSNormFwdOp(normalized_shape=[int(self.weight.shape[0])],
                                       eps=self.variance_epsilon)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # The compiled threshold first: a call it decides reads nothing else (fewer guards).
        tokens = hidden_states.numel() // max(int(self.weight.shape[0]), 1)
        if traces_transformers(tokens, self.compiled_min_tokens) \
                or hidden_states.dtype != self.weight.dtype or runs_transformers(hidden_states, self.weight):
            return self.hf_module.forward(hidden_states)
        return self.op(hidden_states, self.weight)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}"
