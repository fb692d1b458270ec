"""FP8 block-scaled experts as transformers loads them from an FP8 checkpoint (DeepSeek-V3's
format): e4m3 ``gate_up_proj`` / ``down_proj`` with float32 ``*_scale_inv`` per 128 x 128 block,
in transformers' own FP8Experts module. For tests and the bench: a random model's experts
quantized here stand for a checkpoint's."""

from __future__ import annotations

import torch
from torch import nn

BLOCK = 128
E4M3_MAX = float(torch.finfo(torch.float8_e4m3fn).max)


def quantize_blocks(w: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """[E, N, K] weights -> (e4m3 [E, N, K], float32 scale_inv [E, ceil(N/b), ceil(K/b)]) with
    w ~= q * scale_inv per block: scale_inv = amax(|block|) / 448 (1 for an all-zero block).
    A few experts at a time, so a DeepSeek-V3-sized layer needs no float32 copy of all of it."""
    e, n, k = w.shape
    nb, kb = -(-n // block), -(-k // block)
    q = torch.empty(e, n, k, dtype=torch.float8_e4m3fn, device=w.device)
    scale_inv = torch.empty(e, nb, kb, dtype=torch.float32, device=w.device)
    for lo in range(0, e, 16):
        hi = min(e, lo + 16)
        padded = torch.zeros(hi - lo, nb * block, kb * block, dtype=torch.float32, device=w.device)
        padded[:, :n, :k] = w[lo:hi].float()
        blocks = padded.view(hi - lo, nb, block, kb, block)
        amax = blocks.abs().amax(dim=(2, 4))
        s = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
        scaled = (blocks / s[:, :, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX)
        q[lo:hi] = scaled.view(hi - lo, nb * block, kb * block)[:, :n, :k].to(torch.float8_e4m3fn)
        scale_inv[lo:hi] = s
    return q, scale_inv


def dequantize_blocks(q: torch.Tensor, scale_inv: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """The float32 weights an e4m3 tensor and its block scales stand for."""
    n, k = q.shape[-2:]
    s = scale_inv.repeat_interleave(block, -2)[..., :n, :].repeat_interleave(block, -1)[..., :k]
    return q.float() * s


def fp8_experts(model: nn.Module) -> int:
    """Replaces every experts module of `model` (3-D gate_up_proj / down_proj) by transformers'
    FP8Experts holding those weights quantized with 128 x 128 block scales, as an FP8 checkpoint
    loads; returns how many it replaced."""
    from transformers.integrations.finegrained_fp8 import ALL_FP8_EXPERTS_FUNCTIONS, FP8Experts
    from transformers.integrations.moe import use_experts_implementation

    # As transformers' replace_with_fp8_linear builds the class for an experts module.
    cls = use_experts_implementation(experts_class=FP8Experts, experts_interface=ALL_FP8_EXPERTS_FUNCTIONS,
                                     has_bias=False, has_gate=True)
    count = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            w13 = getattr(child, "gate_up_proj", None)
            if name != "experts" or not isinstance(w13, torch.Tensor) or w13.dim() != 3:
                continue
            config = getattr(child, "config", None) or model.config
            with torch.device("meta"):  # every parameter is set below
                fp8 = cls(config=config, block_size=(BLOCK, BLOCK))
            with torch.no_grad():
                for proj in ("gate_up_proj", "down_proj"):
                    q, s = quantize_blocks(getattr(child, proj).detach())
                    setattr(fp8, proj, nn.Parameter(q, requires_grad=False))
                    setattr(fp8, f"{proj}_scale_inv", nn.Parameter(s, requires_grad=False))
            setattr(parent, name, fp8)
            count += 1
    return count


def dequantize_experts(model: nn.Module, dtype: torch.dtype = torch.bfloat16) -> int:
    """The inverse of fp8_experts: every FP8Experts module of `model` (under a MoE block of an
    architecture tileops.integrations.transformers lists) becomes that architecture's experts
    module holding the dequantized weights in `dtype`, as transformers loads an FP8 checkpoint
    with FineGrainedFP8Config(dequantize=True); returns how many it replaced."""
    from tileops.integrations.transformers._architectures import architecture_of, modeling_module

    count = 0
    for parent in list(model.modules()):
        arch = architecture_of(type(parent), "moe_block")
        fp8 = getattr(parent, "experts", None)
        if arch is None or arch.experts is None or fp8 is None or type(fp8).__name__ != "FP8Experts":
            continue
        cls = getattr(modeling_module(arch), arch.experts)
        with torch.device("meta"):  # every parameter is set below
            experts = cls(fp8.config)
        for proj in ("gate_up_proj", "down_proj"):
            w = dequantize_blocks(getattr(fp8, proj), getattr(fp8, f"{proj}_scale_inv")).to(dtype)
            setattr(experts, proj, nn.Parameter(w, requires_grad=False))
        parent.experts = experts
        count += 1
    return count
