"""The "moe" kind: a sparse MoE block (router + routed experts, DeepSeek-V3's shared experts
kept as the model has them) served by FusedMoEFwdOp on the model's own expert weights.

transformers 5 stores the experts as two 3-D parameters, ``gate_up_proj [E, 2F, H]`` (gate rows
first) and ``down_proj [E, H, F]``: FusedMoEFwdOp's w13 and w2 layout, passed as they are. FP8
checkpoints (transformers' FP8Experts: e4m3 weights with ``*_scale_inv`` 128 x 128 block scales)
take the op's FP8 path with those tensors, unconverted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import tileops
from tileops.integrations.transformers._architectures import Architecture, architecture_of
from tileops.integrations.transformers._common import (
    Replacement,
    device_refusal,
    hooks_refusal,
    runs_transformers,
)

# config.hidden_act -> FusedMoEFwdOp activation (gelu_and_mul is the tanh approximation).
ACTIVATIONS = {
    "silu": "silu_and_mul",
    "swish": "silu_and_mul",
    "gelu_pytorch_tanh": "gelu_and_mul",
    "gelu_new": "gelu_and_mul",
}
HALF_DTYPES = (torch.float16, torch.bfloat16)
FP8_BLOCK = 128


@dataclass(frozen=True)
class Routing:
    """The router's rule as FusedMoEFwdOp's parameters, and how its logits are computed."""

    top_k: int
    scoring: str
    renormalize: bool
    routed_scaling_factor: float = 1.0
    n_group: int = 1
    topk_group: int = 1
    # DeepSeek-V3 computes its logits in float32 from a float32 router weight
    float32_logits: bool = False
    correction_bias: bool = False

    def params(self) -> dict[str, Any]:
        return {"top_k": self.top_k, "scoring": self.scoring, "renormalize": self.renormalize,
                "routed_scaling_factor": self.routed_scaling_factor, "n_group": self.n_group,
                "topk_group": self.topk_group}


def _routing(arch: Architecture, gate: nn.Module) -> Routing | str:
    if type(gate).__name__ != arch.router:
        return f"its router is {type(gate).__name__}, not {arch.router}"
    weight = getattr(gate, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or getattr(gate, "bias", None) is not None:
        return "the router is not a bias-free [E, H] linear"
    top_k = int(gate.top_k)
    if arch.routing == "softmax":
        # Mixtral always renormalizes; Qwen3-MoE when norm_topk_prob
        return Routing(top_k, "softmax", bool(getattr(gate, "norm_topk_prob", True)))
    bias = getattr(gate, "e_score_correction_bias", None)
    if not isinstance(bias, torch.Tensor) or bias.shape != (weight.shape[0],):
        return "the router has no e_score_correction_bias [E]"
    return Routing(top_k, "sigmoid", bool(gate.norm_topk_prob), float(gate.routed_scaling_factor),
                   int(gate.num_group), int(gate.topk_group), float32_logits=True, correction_bias=True)


def _experts_refusal(experts: nn.Module) -> str | None:
    w13, w2 = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
    if not isinstance(w13, torch.Tensor) or not isinstance(w2, torch.Tensor) or w13.dim() != 3:
        return "the experts have no 3-D gate_up_proj and down_proj"
    if not getattr(experts, "has_gate", True) or getattr(experts, "is_transposed", False):
        return "the experts are not gated [E, 2F, H] / [E, H, F] weights"
    if not getattr(experts, "is_concatenated", True):
        return "gate_up_proj interleaves gate and up rows (FusedMoEFwdOp takes the gate half first)"
    if getattr(experts, "has_bias", False) or getattr(experts, "gate_up_proj_bias", None) is not None:
        return "the experts have biases"
    if getattr(experts, "_is_expert_parallel", False):
        return "the experts are sharded for expert parallelism"
    for name in ("limit", "swiglu_limit", "swiglu_alpha", "gate_softcap", "up_softcap"):
        if getattr(experts, name, None) is not None:
            return f"the experts' activation has {name} (a clamped or soft-capped gate)"
    return device_refusal(w13, "gate_up_proj")


def _fp8_refusal(experts: nn.Module) -> str | None:
    """Why FP8 experts cannot take the op's FP8 path (None: they can)."""
    block = getattr(experts, "block_size", None)
    if block is None or tuple(block) != (FP8_BLOCK, FP8_BLOCK):
        return f"FP8 weights with block_size {block!r} (the FP8 path takes 128 x 128 blocks)"
    if getattr(experts, "activation_scheme", "dynamic") != "dynamic":
        return "FP8 experts with static activation scales (the FP8 path quantizes per 1 x 128 group)"
    for name in ("gate_up_proj_scale_inv", "down_proj_scale_inv"):
        scales = getattr(experts, name, None)
        if not isinstance(scales, torch.Tensor) or scales.dtype != torch.float32:
            return f"{name} is not a float32 tensor (e.g. UE8M0 scales)"
    return None


def _activation(experts: nn.Module, config: Any) -> str | None:
    act = getattr(getattr(experts, "config", None) or config, "hidden_act", None)
    return ACTIVATIONS.get(act) if isinstance(act, str) else None


@dataclass(frozen=True)
class Plan:
    """How a MoE block is served: its routing, activation, weights' path and the op, built and
    called once (see plan)."""

    routing: Routing
    activation: str
    fp8: bool
    op: Any


def _call(op: Any, routing: Routing, fp8: bool, experts: nn.Module, gate: nn.Module,
          x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    bias = gate.e_score_correction_bias.float() if routing.correction_bias else None
    if fp8:
        return op(x, logits, experts.gate_up_proj, experts.down_proj, bias,
                  experts.gate_up_proj_scale_inv, experts.down_proj_scale_inv)
    return op(x, logits, experts.gate_up_proj, experts.down_proj, bias)


def plan(block: nn.Module, config: Any) -> Plan | str:
    """How to serve a MoE block of a listed architecture, or why it cannot be served.

    The op is built and called once on a zero token with the block's own weights: the call
    checks every rule of the op's manifest signature (a refusal becomes the reason), and it
    builds the sub-ops that depend on the expert count, so that a cold
    torch.compile(fullgraph=True) constructs nothing while tracing."""
    arch = architecture_of(type(block), "moe_block")
    assert arch is not None
    gate, experts = getattr(block, "gate", None), getattr(block, "experts", None)
    if not isinstance(gate, nn.Module) or not isinstance(experts, nn.Module):
        return "no gate and experts submodules"
    routing = _routing(arch, gate)
    if isinstance(routing, str):
        return routing
    if (why := _experts_refusal(experts) or hooks_refusal(block)) is not None:
        return why
    activation = _activation(experts, config)
    if activation is None:
        return (f"hidden_act {getattr(config, 'hidden_act', None)!r} (FusedMoEFwdOp has "
                f"{', '.join(sorted(set(ACTIVATIONS.values())))})")
    w13 = experts.gate_up_proj
    fp8 = w13.dtype == torch.float8_e4m3fn
    if fp8:
        if (why := _fp8_refusal(experts)) is not None:
            return why
    elif w13.dtype not in HALF_DTYPES:
        return (f"expert weights of dtype {w13.dtype} (FusedMoEFwdOp runs float16 or bfloat16 "
                "experts, or float8_e4m3fn with 128 x 128 block scales)")
    x = torch.zeros(1, w13.shape[2], dtype=torch.bfloat16 if fp8 else w13.dtype, device=w13.device)
    logits = torch.zeros(1, w13.shape[0], dtype=torch.float32, device=w13.device)
    try:
        op = tileops.FusedMoEFwdOp(**routing.params(), activation=activation)
        with torch.no_grad():
            _call(op, routing, fp8, experts, gate, x, logits)
    except tileops.Error as exc:
        return str(exc)
    return Plan(routing, activation, fp8, op)


class TileOpsMoE(Replacement):
    """A sparse MoE block as one FusedMoEFwdOp call (plus the model's shared experts, if any).

    The router's logits are computed as transformers computes them (the same linear, in float32
    for DeepSeek-V3); routing, expert MLPs and the weighted sum are the op's. When something
    records the router's outputs (``output_router_logits``: transformers hooks the router
    module), the router module itself runs and its logits feed the op.
    """

    kind = "moe"

    def __init__(self, hf_module: nn.Module, plan: Plan) -> None:
        super().__init__(hf_module)
        for name, child in hf_module.named_children():  # same objects, same state_dict keys
            self.add_module(name, child)
        self.routing = plan.routing
        self.fp8 = plan.fp8
        self.jitter_noise = float(getattr(hf_module, "jitter_noise", 0.0) or 0.0)
        self.op = plan.op

    def _serves(self, x: torch.Tensor) -> bool:
        w13 = self.experts.gate_up_proj
        dtype_ok = x.dtype == torch.bfloat16 if self.fp8 else x.dtype == w13.dtype
        if not dtype_ok or (self.training and self.jitter_noise > 0):
            return False
        return not runs_transformers(x, w13, self.experts.down_proj, self.gate.weight)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if not self._serves(hidden_states):
            return self.hf_module.forward(hidden_states)
        x = hidden_states.reshape(-1, hidden_states.shape[-1])
        gate = self.gate
        if gate._forward_hooks or gate._forward_pre_hooks:
            logits = gate(x)[0]
        elif self.routing.float32_logits:
            logits = F.linear(x.float(), gate.weight.float())
        else:
            logits = F.linear(x, gate.weight)
        y = _call(self.op, self.routing, self.fp8, self.experts, gate, x, logits)
        y = y.reshape(hidden_states.shape)
        shared = getattr(self, "shared_experts", None)
        return y if shared is None else y + shared(hidden_states)

    def extra_repr(self) -> str:
        r = self.routing
        return (f"top_k={r.top_k}, scoring={r.scoring}, n_group={r.n_group}, "
                f"topk_group={r.topk_group}, fp8={self.fp8}")
