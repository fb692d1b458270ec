"""Model configurations: tiny ones per architecture (tests, the bench's --quick), the shapes the
bench measures, and random weights that make a random model's logits well spread."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

# The architectures, by transformers model type (tileops.integrations.transformers serves them).
ARCHITECTURES = ("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "phi3")
# The kinds each architecture's tiny model has (MoE models also the moe kind; only in 16-bit
# dtypes: FusedMoEFwdOp runs float16/bfloat16 or FP8 experts). Attention: every architecture but
# DeepSeek-V3, whose multi-head latent attention has q/k and v head dims the op cannot take.
KINDS = {arch: ("rms_norm", "rope")
         + (("moe",) if arch in ("qwen3_moe", "mixtral", "deepseek_v3") else ())
         + (("attention",) if arch != "deepseek_v3" else ()) for arch in ARCHITECTURES}

# sdpa (the attention implementation the attention kind serves) and head dim 64 (one the CUDA
# attention kernel takes, so that the CUDA tests run it too).
_ATTENTION = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
              "vocab_size": 128, "num_hidden_layers": 2, "max_position_embeddings": 256,
              "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "attn_implementation": "sdpa"}


def _tiny_kwargs(arch: str, fp8: bool) -> dict[str, Any]:
    if arch == "llama":
        # Llama 3's rope type: frequencies rescaled per band (served through rescale factors)
        return {**_ATTENTION, "intermediate_size": 128, "rope_parameters": {
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}
    if arch == "qwen2":
        return {**_ATTENTION, "intermediate_size": 128}
    if arch == "qwen3":
        return {**_ATTENTION, "intermediate_size": 128}  # q/k norms over head_dim
    if arch == "qwen3_moe":
        return {**_ATTENTION, "intermediate_size": 128, "moe_intermediate_size": 32,
                "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True}
    if arch == "mixtral":
        return {**_ATTENTION, "intermediate_size": 32, "num_local_experts": 4, "num_experts_per_tok": 2}
    if arch == "deepseek_v3":
        # MLA with a q LoRA rank (its q_a/kv_a norms are RMSNorms too), interleaved YaRN rope,
        # 8 routed experts in 4 groups (2 kept), a shared expert, the first layer dense.
        hidden, ffn = (128, 128) if fp8 else (64, 32)  # the FP8 path takes 128-multiples
        mla = {k: v for k, v in _ATTENTION.items() if k != "head_dim"}  # its head dims are below
        return {**mla, "hidden_size": hidden, "num_key_value_heads": 4,
                "intermediate_size": 2 * hidden, "moe_intermediate_size": ffn,
                "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 4, "topk_group": 2,
                "n_shared_experts": 1, "first_k_dense_replace": 1, "routed_scaling_factor": 2.5,
                "q_lora_rank": 32, "kv_lora_rank": 32, "qk_rope_head_dim": 8,
                "qk_nope_head_dim": 16, "v_head_dim": 16, "rope_interleave": True,
                "max_position_embeddings": 128, "rope_parameters": {
                    "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                    "original_max_position_embeddings": 32, "beta_fast": 32, "beta_slow": 1,
                    "mscale": 1.0, "mscale_all_dim": 1.0}}
    if arch == "phi3":
        # LongRoPE: short factors up to position 32, long ones past it (generate crosses it);
        # one factor per rotated pair. Phi-3's config takes head dim = hidden / heads: 128 / 2.
        r = _ATTENTION["head_dim"] // 2
        g = torch.Generator().manual_seed(7)
        return {**_ATTENTION, "hidden_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
                "intermediate_size": 128,
                "max_position_embeddings": 128, "original_max_position_embeddings": 32,
                "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0,
                                    "short_factor": (1 + torch.rand(r, generator=g)).tolist(),
                                    "long_factor": (1 + 3 * torch.rand(r, generator=g)).tolist(),
                                    "original_max_position_embeddings": 32}}
    raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")


def _config_class(arch: str) -> type:
    import transformers

    return {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
            "qwen3": transformers.Qwen3Config, "qwen3_moe": transformers.Qwen3MoeConfig,
            "mixtral": transformers.MixtralConfig, "deepseek_v3": transformers.DeepseekV3Config,
            "phi3": transformers.Phi3Config}[arch]


def tiny_config(arch: str, *, fp8: bool = False, **overrides: Any) -> Any:
    """A config of `arch` small enough for CPU tests (2 layers, hidden 64 or 128)."""
    return _config_class(arch)(**{**_tiny_kwargs(arch, fp8), **overrides})


def config(arch: str, **kwargs: Any) -> Any:
    """A config of `arch` from explicit sizes (the bench's shapes)."""
    return _config_class(arch)(**kwargs)


@torch.no_grad()
def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random weights with a fixed seed, drawn in place on each parameter's device (a DeepSeek-V3
    layer's experts never pass through the host), scaled so that activations stay near unit size
    and the logits of a random model are spread (the default initializer's std of 0.02 leaves them
    nearly equal, so greedy decoding would compare near-ties): linear weights N(0, 1/fan_in),
    embeddings N(0, 1), norm weights 1 + N(0, 0.1^2), biases and DeepSeek-V3's correction bias
    N(0, 0.1^2)."""
    generators: dict[str, torch.Generator] = {}

    def gen(device: torch.device) -> torch.Generator:
        if str(device) not in generators:
            generators[str(device)] = torch.Generator(device=device).manual_seed(seed)
        return generators[str(device)]

    for name, p in model.named_parameters():
        if not p.is_floating_point() or p.dtype.itemsize < 2:
            continue
        if p.dim() == 1 and "norm" in name:
            p.normal_(1.0, 0.1, generator=gen(p.device))
        elif p.dim() == 1:
            p.normal_(0.0, 0.1, generator=gen(p.device))
        elif "embed" in name:
            p.normal_(0.0, 1.0, generator=gen(p.device))
        else:
            p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]), generator=gen(p.device))
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.normal_(0.0, 0.1, generator=gen(b.device))
    return model


def tiny_model(arch: str, dtype: torch.dtype = torch.float32, *, seed: int = 0,
               device: str = "cpu", fp8: bool = False) -> nn.Module:
    """A causal LM of `arch` built from tiny_config with random weights (no download), in eval
    mode; with ``fp8``, its experts quantized to FP8 (see fp8_experts)."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_config(tiny_config(arch, fp8=fp8))
    randomize(model, seed)
    model = model.to(device=device, dtype=dtype).eval()
    if fp8:
        from tileops.models._fp8 import fp8_experts

        fp8_experts(model)
    return model
