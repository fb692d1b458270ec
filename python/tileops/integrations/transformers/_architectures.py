"""The transformers architectures the integration serves, by the classes of their modeling files.

A module is served when its class is exactly one of these (a subclass may change what forward
computes); modules whose class name looks like one of the kinds but is not listed are reported
as not served, so that a user of another architecture sees why nothing changed.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Architecture:
    """The classes of one modeling file that the kinds replace or rebind."""

    name: str
    module: str
    rms_norm: str
    rotary: str
    attention: str
    # The functions of the modeling module that the attention forward calls to rotate q and k,
    # with the layout each expects ("neox": halves; "interleaved": DeepSeek's pairs).
    rope_functions: tuple[tuple[str, str], ...] = (("apply_rotary_pos_emb", "neox"),)
    moe_block: str | None = None
    router: str | None = None
    experts: str | None = None
    # "softmax": Qwen3-MoE's and Mixtral's top-k over a softmax; "deepseek_v3": sigmoid scores,
    # a correction bias, expert groups and a scaling factor.
    routing: str | None = None


ARCHITECTURES: tuple[Architecture, ...] = (
    Architecture("llama", "transformers.models.llama.modeling_llama", "LlamaRMSNorm",
                 "LlamaRotaryEmbedding", "LlamaAttention"),
    Architecture("qwen2", "transformers.models.qwen2.modeling_qwen2", "Qwen2RMSNorm",
                 "Qwen2RotaryEmbedding", "Qwen2Attention"),
    Architecture("qwen3", "transformers.models.qwen3.modeling_qwen3", "Qwen3RMSNorm",
                 "Qwen3RotaryEmbedding", "Qwen3Attention"),
    Architecture("qwen3_moe", "transformers.models.qwen3_moe.modeling_qwen3_moe", "Qwen3MoeRMSNorm",
                 "Qwen3MoeRotaryEmbedding", "Qwen3MoeAttention", moe_block="Qwen3MoeSparseMoeBlock",
                 router="Qwen3MoeTopKRouter", experts="Qwen3MoeExperts", routing="softmax"),
    Architecture("mixtral", "transformers.models.mixtral.modeling_mixtral", "MixtralRMSNorm",
                 "MixtralRotaryEmbedding", "MixtralAttention", moe_block="MixtralSparseMoeBlock",
                 router="MixtralTopKRouter", experts="MixtralExperts", routing="softmax"),
    Architecture("deepseek_v3", "transformers.models.deepseek_v3.modeling_deepseek_v3",
                 "DeepseekV3RMSNorm", "DeepseekV3RotaryEmbedding", "DeepseekV3Attention",
                 rope_functions=(("apply_rotary_pos_emb", "neox"),
                                 ("apply_rotary_pos_emb_interleave", "interleaved")),
                 moe_block="DeepseekV3MoE", router="DeepseekV3TopkRouter", experts="DeepseekV3Experts",
                 routing="deepseek_v3"),
    Architecture("phi3", "transformers.models.phi3.modeling_phi3", "Phi3RMSNorm",
                 "Phi3RotaryEmbedding", "Phi3Attention"),
)

# Class names that look like a kind's module (reported as not served when not listed above).
LOOKS_LIKE = {
    "rms_norm": re.compile(r"RMSNorm$"),
    "rope": re.compile(r"RotaryEmbedding$"),
    "moe": re.compile(r"(SparseMoeBlock|MoE|MoeBlock)$"),
    "attention": re.compile(r"Attention$"),
}


def modeling_module(arch: Architecture) -> ModuleType | None:
    """The modeling module of `arch`, or None when this transformers lacks it (sys.modules
    caches the import)."""
    try:
        return importlib.import_module(arch.module)
    except ImportError:
        return None


def architecture_of(cls: type, attribute: str) -> Architecture | None:
    """The architecture whose class `attribute` ("rms_norm", "rotary", ...) is exactly `cls`."""
    for arch in ARCHITECTURES:
        name = getattr(arch, attribute)
        if name is None or cls.__name__ != name:
            continue
        module = modeling_module(arch)
        if module is not None and getattr(module, name, None) is cls:
            return arch
    return None


def names() -> list[str]:
    """The architectures served, by transformers model type."""
    return [arch.name for arch in ARCHITECTURES]
