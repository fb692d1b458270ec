"""Hugging Face transformers modules as references, with random weights: Qwen3/Llama RMSNorm,
Phi-3's LongRoPE rotary embedding and the Qwen3-MoE sparse block.

Where the module is the less exact side it is compared through a float64 reference:
- Phi-3 computes its angles in float32, which drift by about 0.02 at positions near 10^5
  (tileops computes inv_freq in double); at long positions both are checked against float64 and
  tileops must be the closer one.
- Qwen3-MoE in bf16 rounds after every GEMM and accumulates in bf16; the block is run in
  float64 on the same (bf16-valued) weights instead, and tileops' bf16 result compared to it.
Top-k ties: tileops takes the lower expert index, torch.topk promises no order among equals;
router logits are computed in float32 from random weights, so no tie occurs at the boundary
(a bf16 router output can tie exactly; test_reference.py checks tileops' tie rule).
"""

from __future__ import annotations

import pytest
import torch

import tileops

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install transformers)"
)


@pytest.mark.parametrize("module_name", ["qwen3", "llama"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_matches_hf(device: str, module_name: str, dtype: torch.dtype) -> None:
    hidden, eps = 256, 1e-6
    if module_name == "qwen3":
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm as Norm
    else:
        from transformers.models.llama.modeling_llama import LlamaRMSNorm as Norm
    norm = Norm(hidden, eps=eps).to(device=device, dtype=dtype)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.1 * torch.randn(hidden, generator=torch.Generator().manual_seed(0)))
    x = torch.randn(3, 7, hidden, generator=torch.Generator().manual_seed(1)).to(dtype).to(device)
    got = tileops.RMSNormFwdOp(normalized_shape=[hidden], eps=eps)(x, norm.weight.detach())
    with torch.no_grad():
        want = norm(x)
    # HF rounds the normalized x to the dtype before the weight multiply (tileops rounds once):
    # in bf16 the two may differ by about one unit in the last place.
    tol = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def _phi3(head_dim: int, heads: int) -> tuple[object, object]:
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    g = torch.Generator().manual_seed(2)
    r = head_dim // 2
    short = (1 + torch.rand(r, generator=g)).tolist()
    long = (1 + 3 * torch.rand(r, generator=g)).tolist()
    config = Phi3Config(
        hidden_size=head_dim * heads, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=131072, original_max_position_embeddings=4096,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": short,
                         "long_factor": long},
    )
    return config, Phi3RotaryEmbedding(config)


def _hf_rotate(x_bshd: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    from transformers.models.phi3.modeling_phi3 import apply_rotary_pos_emb

    q = x_bshd.transpose(1, 2)  # HF layout [B, H, S, D]
    q_rot, _ = apply_rotary_pos_emb(q, q, cos, sin)
    return q_rot.transpose(1, 2)


@pytest.mark.parametrize("factors", ["short", "long"])
def test_long_rope_matches_phi3(device: str, factors: str) -> None:
    from test_reference import long_rope_ref

    head_dim, heads, b, s = 96, 4, 2, 24
    config, rotary = _phi3(head_dim, heads)
    rotary = rotary.to(device)
    rope = config.rope_parameters
    chosen = torch.tensor(rope[f"{factors}_factor"], dtype=torch.float32)
    # Phi-3 takes the long factors when the sequence is longer than the original context.
    base_pos = 0 if factors == "short" else 8000
    positions = (base_pos + torch.arange(s)).expand(b, s).contiguous().to(device)
    x = torch.randn(b, s, heads, head_dim, generator=torch.Generator().manual_seed(3)).to(device)
    with torch.no_grad():
        cos, sin = rotary(x, positions)
    want_hf = _hf_rotate(x, cos, sin)
    op = tileops.LongRoPEFwdOp(rescale_factors=chosen.to(device), base=10000.0,
                               max_position_embeddings=131072,
                               original_max_position_embeddings=4096, layout="bshd")
    got = op(x, positions)
    ref = long_rope_ref(x, positions, chosen, "bshd")
    torch.testing.assert_close(got.double().cpu(), ref, rtol=1e-5, atol=1e-5)
    # Phi-3's float32 angle p * inv_freq carries a relative error of about 2^-24, i.e. an
    # absolute one growing with p: exact near 0, about 1e-3 near p = 8000 (tileops: double).
    tol = 1e-4 if factors == "short" else 2e-3
    torch.testing.assert_close(got, want_hf, rtol=tol, atol=tol)


def test_long_rope_far_positions_float64_is_the_judge(device: str) -> None:
    from test_reference import long_rope_ref

    head_dim, heads, b, s = 96, 2, 1, 8
    config, rotary = _phi3(head_dim, heads)
    rotary = rotary.to(device)
    chosen = torch.tensor(config.rope_parameters["long_factor"], dtype=torch.float32)
    positions = (100_000 + 997 * torch.arange(s)).expand(b, s).contiguous().to(device)
    x = torch.randn(b, s, heads, head_dim, generator=torch.Generator().manual_seed(4)).to(device)
    with torch.no_grad():
        cos, sin = rotary(x, positions)
    hf_err = (_hf_rotate(x, cos, sin).double().cpu() - long_rope_ref(x, positions, chosen, "bshd")).abs().max()
    op = tileops.LongRoPEFwdOp(rescale_factors=chosen.to(device), layout="bshd")
    ours = op(x, positions)
    our_err = (ours.double().cpu() - long_rope_ref(x, positions, chosen, "bshd")).abs().max()
    assert our_err < 1e-4
    assert our_err <= hf_err


def test_qwen3_moe_block_matches_hf_in_float64(device: str) -> None:
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    hidden, ffn, experts, top_k, tokens = 64, 32, 8, 2, 24
    config = Qwen3MoeConfig(hidden_size=hidden, moe_intermediate_size=ffn, num_experts=experts,
                            num_experts_per_tok=top_k, norm_topk_prob=True, hidden_act="silu")
    block = Qwen3MoeSparseMoeBlock(config)
    g = torch.Generator().manual_seed(5)
    dtype = torch.bfloat16
    with torch.no_grad():
        block.gate.weight.copy_(0.3 * torch.randn(experts, hidden, generator=g))
        block.experts.gate_up_proj.copy_((0.2 * torch.randn(experts, 2 * ffn, hidden, generator=g)).to(dtype))
        block.experts.down_proj.copy_((0.2 * torch.randn(experts, hidden, ffn, generator=g)).to(dtype))
    x = torch.randn(1, tokens, hidden, generator=g).to(dtype)
    with torch.no_grad():
        want = block.double()(x.double()).reshape(tokens, hidden)
        logits = torch.nn.functional.linear(x.reshape(tokens, hidden).float(), block.gate.weight.float())
    op = tileops.FusedMoEFwdOp(top_k=top_k, scoring="softmax", renormalize=True)
    got = op(x.reshape(tokens, hidden).to(device), logits.to(device),
             block.experts.gate_up_proj.detach().to(dtype).to(device),
             block.experts.down_proj.detach().to(dtype).to(device))
    # tileops rounds h and each expert's output to bf16 (the float64 block rounds nothing).
    torch.testing.assert_close(got.double().cpu(), want, rtol=3e-2, atol=3e-2)
