"""What every replacement shares: when a call must run transformers' own forward, and the
replacement's link back to the module it replaced."""

from __future__ import annotations

import torch
from torch import nn

# The devices tileops has kernels for.
DEVICES = ("cpu", "cuda")


def runs_transformers(x: torch.Tensor, *params: torch.Tensor) -> bool:
    """True when a call must run the replaced module's forward: autograd needs a backward the
    tileops ops do not have (inference operators), or the input is on a device tileops lacks."""
    if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
        return True
    return x.device.type not in DEVICES


def traces_transformers(tokens: int, min_tokens: int) -> bool:
    """True when a call traced by torch.compile has fewer than `min_tokens` tokens (apply_tileops's
    ``compiled_min_tokens``): it then traces the replaced module's code, which inductor fuses with
    its neighbours. A compiled layer that small is bound by the host's launches, and a custom
    operator call costs more host time than a fused kernel (docs/design/integrations.md)."""
    return min_tokens > 0 and torch.compiler.is_compiling() and tokens < min_tokens


def device_refusal(tensor: torch.Tensor, what: str) -> str | None:
    if tensor.device.type not in DEVICES:
        return f"{what} is on {tensor.device} (tileops runs on {' and '.join(DEVICES)})"
    return None


def hooks_refusal(module: nn.Module) -> str | None:
    """Why a module cannot be swapped for another object: hooks or a patched forward (accelerate's
    offloading, another patcher) would be lost."""
    if module._forward_hooks or module._forward_pre_hooks:
        return "the module carries forward hooks, which a replacement would drop"
    if "forward" in vars(module):
        return "the module's forward is already patched on the instance (accelerate hooks?)"
    return None


class Replacement(nn.Module):
    """A tileops-backed module standing where a transformers module was.

    The replaced module is kept unregistered (``hf_module``: its parameters are the
    replacement's own, registered under the same names, so state_dict keys do not change): calls
    tileops cannot serve run its ``forward`` (directly: no hook can be registered on a module
    outside the tree, and ``Module.__call__`` would add guards to every compiled call), and
    remove_tileops puts it back.
    """

    kind: str = ""
    # Under torch.compile, calls of fewer tokens run the replaced module's code (apply_tileops
    # sets it; the moe kind serves every call).
    compiled_min_tokens: int = 0

    def __init__(self, hf_module: nn.Module) -> None:
        super().__init__()
        object.__setattr__(self, "hf_module", hf_module)

    hf_module: nn.Module

    def train(self, mode: bool = True) -> Replacement:
        # The replaced module's forward (calls tileops does not serve; the attention kind's
        # rebound forward) reads its own `training`.
        super().train(mode)
        self.hf_module.train(mode)
        return self

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        # model.to(...) reaches the unregistered module too (its buffers are not shared).
        super()._apply(fn, recurse)
        self.hf_module._apply(fn, recurse)
        return self


def unwrapped(module: nn.Module) -> nn.Module:
    """The transformers attention module an attention replacement stands in for, else `module`
    (the rope kind rebinds the attention modules under a replacement too)."""
    if isinstance(module, Replacement) and module.kind == "attention":
        return module.hf_module
    return module
