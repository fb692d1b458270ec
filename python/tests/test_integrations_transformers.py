"""tileops.integrations.transformers: tiny random-weight transformers models of every served
architecture, patched with apply_tileops, against the same models unpatched: logits, the model's
own weights, FP8 experts, what is not served, locality, removal and versions. The pairs,
tolerances and near-tie rules of transformers_pairs.py; generation in test_integrations_generate.py,
torch.compile in test_integrations_compile.py."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections import Counter

import pytest
import torch

import tileops

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from tileops.integrations.transformers import (  # noqa: E402
    SUPPORTED_TRANSFORMERS,
    TileOpsAttention,
    TileOpsMoE,
    TileOpsNotServedWarning,
    TileOpsRMSNorm,
    TileOpsRotaryEmbedding,
    apply_tileops,
    remove_tileops,
    tileops_report,
)
from tileops.integrations.transformers import _version  # noqa: E402
from tileops.integrations.transformers._moe import plan as moe_plan  # noqa: E402
from tileops.models import ARCHITECTURES, dequantize_experts, tiny_model  # noqa: E402
from transformers_pairs import (  # noqa: E402
    assert_logits_close,
    compare_logits,
    DTYPES,
    expected_kinds,
    FP8_TOLERANCE,
    patched_pair,
    random_ids,
    TileOpsCalls,
    TOLERANCE,
)


# ---- logits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_logits_match_transformers(device: str, arch: str, dtype: torch.dtype) -> None:
    patched, reference, counts = patched_pair(arch, dtype, device)
    expected = expected_kinds(arch, dtype, device)
    assert {k for k, n in counts.items() if n > 0} == set(expected)
    with torch.inference_mode(), TileOpsCalls() as calls:
        patched(random_ids(0, 1, 8, device))
    # Each replaced site really ran tileops (no silent fallback to transformers' code).
    assert calls.calls["rms_norm"] == counts["rms_norm"]
    rotations = 2 * counts["rope"] * (2 if arch == "phi3" else 1)  # q and k; LongRoPE: both sets
    assert calls.calls["rope"] == rotations
    assert (calls.calls["moe"] > 0) == ("moe" in expected)
    assert calls.calls["attention"] == counts["attention"]  # one call per layer
    compare_logits(patched, reference, dtype, device, TOLERANCE[dtype])


def test_float32_moe_blocks_are_reported_not_served() -> None:
    model = tiny_model("qwen3_moe", torch.float32)
    with pytest.warns(TileOpsNotServedWarning, match="mlp"):
        counts = apply_tileops(model)
    assert counts["moe"] == 0
    report = tileops_report(model)
    assert report.replaced == counts
    moe = [n for n in report.not_served if n.kind == "moe"]
    assert [n.path for n in moe] == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert all("torch.float32" in n.reason and n.module == "Qwen3MoeSparseMoeBlock" for n in moe)


# ---- the model's own weights; FP8 experts ---------------------------------------------------------


def test_replacements_hold_the_models_own_tensors() -> None:
    model = tiny_model("deepseek_v3", torch.bfloat16)
    keys = {k: v.data_ptr() for k, v in model.state_dict().items()}
    apply_tileops(model)
    after = model.state_dict()
    assert set(after) == set(keys)  # state_dict keys (and so checkpoints) unchanged
    assert all(after[k].data_ptr() == p for k, p in keys.items())  # nothing copied
    block = model.model.layers[1].mlp
    assert isinstance(block, TileOpsMoE)
    assert block.experts is block.hf_module.experts
    # DeepSeek-V3's shared expert is the model's own module, and it runs.
    assert block.shared_experts is block.hf_module.shared_experts
    ran = []
    block.shared_experts.register_forward_hook(lambda *a: ran.append(1))
    with torch.inference_mode(), TileOpsCalls() as calls:
        model(random_ids(0, 1, 6, "cpu"))
    assert ran == [1]
    for w in (block.experts.gate_up_proj, block.experts.down_proj, model.model.norm.weight):
        assert w.data_ptr() in calls.pointers  # the op received the parameter itself


def test_fp8_experts_take_the_fp8_path_on_their_own_tensors(device: str) -> None:
    model = tiny_model("deepseek_v3", torch.bfloat16, device=device, fp8=True)
    reference = copy.deepcopy(model)
    dequantize_experts(reference)  # the checkpoint as transformers loads it with dequantize=True
    experts = model.model.layers[1].mlp.experts
    assert type(experts).__name__ == "FP8Experts" and experts.gate_up_proj.dtype == torch.float8_e4m3fn
    counts = apply_tileops(model)
    assert counts == {"rms_norm": 9, "rope": 2, "moe": 1, "attention": 0}  # MLA: not served
    block = model.model.layers[1].mlp
    assert block.fp8
    with torch.inference_mode(), TileOpsCalls() as calls:
        model(random_ids(0, 1, 6, device))
    for w in (experts.gate_up_proj, experts.gate_up_proj_scale_inv, experts.down_proj,
              experts.down_proj_scale_inv):
        assert w.data_ptr() in calls.pointers  # e4m3 weights and weight_scale_inv, unconverted
    fused_experts = block.op.held_delegates()[1]
    assert "MoEExpertMLPFP8FwdOp" in [type(d).__name__ for d in fused_experts.held_delegates()]
    compare_logits(model, reference, torch.bfloat16, device, FP8_TOLERANCE, batch=1, length=12)


def test_fp8_experts_with_other_blocks_are_reported() -> None:
    model = tiny_model("deepseek_v3", torch.bfloat16, fp8=True)
    model.model.layers[1].mlp.experts.block_size = (64, 64)
    with pytest.warns(TileOpsNotServedWarning):
        counts = apply_tileops(model)
    assert counts["moe"] == 0
    (item,) = [n for n in tileops_report(model).not_served if n.kind == "moe"]
    assert "block_size (64, 64)" in item.reason


# ---- what is not served, runs transformers' code --------------------------------------------------


def test_routing_the_op_refuses_is_reported() -> None:
    model = tiny_model("deepseek_v3", torch.bfloat16)
    model.model.layers[1].mlp.gate.topk_group = 5  # more groups kept than the 4 there are
    with pytest.warns(TileOpsNotServedWarning, match="topk_group"):
        counts = apply_tileops(model)
    assert counts == {"rms_norm": 9, "rope": 2, "moe": 0, "attention": 0}
    (item,) = [n for n in tileops_report(model).not_served if n.kind == "moe"]
    assert item.path == "model.layers.1.mlp" and "topk_group <= n_group" in item.reason


def test_dynamic_rope_is_reported_and_the_rest_served() -> None:
    from tileops.models import tiny_config

    config = tiny_config("llama", rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0})
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    reference = copy.deepcopy(model)
    with pytest.warns(TileOpsNotServedWarning, match="dynamic"):
        counts = apply_tileops(model)
    assert counts == {"rms_norm": 5, "rope": 0, "moe": 0, "attention": 2}  # attention without rope
    assert not isinstance(model.model.rotary_emb, TileOpsRotaryEmbedding)
    compare_logits(model, reference, torch.float32, "cpu", TOLERANCE[torch.float32])


def test_unknown_architecture_modules_are_reported() -> None:
    config = transformers.GemmaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=1, head_dim=16)
    model = transformers.AutoModelForCausalLM.from_config(config)
    with pytest.warns(TileOpsNotServedWarning, match="GemmaRMSNorm"):
        counts = apply_tileops(model)
    assert counts == {"rms_norm": 0, "rope": 0, "moe": 0, "attention": 0}
    kinds = Counter(n.kind for n in tileops_report(model).not_served)
    assert kinds == {"rms_norm": 3, "rope": 1, "attention": 1}


def test_strict_raises_before_changing_anything() -> None:
    model = tiny_model("mixtral", torch.float32)
    with pytest.raises(tileops.UsageError, match="MixtralSparseMoeBlock"):
        apply_tileops(model, strict=True)
    assert not any(isinstance(m, (TileOpsRMSNorm, TileOpsRotaryEmbedding)) for m in model.modules())
    assert "forward" not in vars(model.model.layers[0].self_attn)


def test_kinds_select_and_unknown_kind_is_an_error() -> None:
    model = tiny_model("qwen3_moe", torch.bfloat16)
    assert apply_tileops(model, kinds=["moe"]) == {"moe": 2}
    assert apply_tileops(model) == {"rms_norm": 9, "rope": 2, "moe": 0, "attention": 2}  # the rest
    assert apply_tileops(model) == {"rms_norm": 0, "rope": 0, "moe": 0, "attention": 0}  # idempotent
    with pytest.raises(tileops.UsageError, match="unknown kind"):
        apply_tileops(model, kinds=["flash_attention"])


def test_autograd_runs_transformers_forward() -> None:
    patched, reference, _ = patched_pair("qwen3_moe", torch.bfloat16)
    ids = random_ids(0, 1, 8, "cpu")
    with TileOpsCalls() as calls:
        loss = patched(ids, labels=ids).loss
    assert sum(calls.calls.values()) == 0  # tileops has no backward: transformers' code ran
    torch.testing.assert_close(loss, reference(ids, labels=ids).loss, rtol=0, atol=0)
    loss.backward()
    assert patched.model.norm.weight.grad is not None
    assert patched.model.layers[0].mlp.experts.gate_up_proj.grad is not None


def test_rms_norm_input_dtype_other_than_weight_runs_transformers() -> None:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    hf = LlamaRMSNorm(32).to(torch.bfloat16)
    ours = TileOpsRMSNorm(hf)
    x = torch.randn(3, 32)
    with torch.inference_mode(), TileOpsCalls() as calls:
        got = ours(x)
    assert sum(calls.calls.values()) == 0
    assert got.dtype == torch.float32  # transformers promotes
    torch.testing.assert_close(got, hf(x), rtol=0, atol=0)


def test_router_logits_are_recorded() -> None:
    patched, reference, _ = patched_pair("qwen3_moe", torch.bfloat16)
    ids = random_ids(2, 1, 8, "cpu")
    with torch.inference_mode():
        want = reference(ids, output_router_logits=True).router_logits
        got = patched(ids, output_router_logits=True).router_logits
    assert len(got) == len(want) == 2
    # Layer 0's router input went through a norm and attention, rounded differently (layer 1's
    # also through layer 0's routing, which may differ at a near tie).
    assert_logits_close(got[0], want[0], TOLERANCE[torch.bfloat16])


@pytest.mark.parametrize("arch", ["qwen3_moe", "mixtral", "deepseek_v3"])
def test_moe_block_matches_transformers_on_the_same_input(arch: str) -> None:
    model = tiny_model(arch, torch.bfloat16)
    hf = model.model.layers[-1].mlp
    plan = moe_plan(hf, model.config)
    assert not isinstance(plan, str)
    ours = TileOpsMoE(hf, plan)
    x = torch.randn(1, 24, hf.experts.gate_up_proj.shape[2], generator=torch.Generator().manual_seed(3))
    x = x.to(torch.bfloat16)
    with torch.inference_mode():
        want = hf(x)
        got = ours(x)
    # tileops rounds h and each expert's output to bf16 as transformers does, but sums in float32
    assert_logits_close(got, want, TOLERANCE[torch.bfloat16])


# ---- locality, removal, versions --------------------------------------------------------------------


def test_patching_one_model_leaves_others_and_the_modeling_module_alone() -> None:
    from transformers.models.phi3 import modeling_phi3

    rotate = modeling_phi3.apply_rotary_pos_emb
    patched, reference, _ = patched_pair("phi3", torch.float32)
    other = tiny_model("phi3", torch.float32, seed=1)
    assert modeling_phi3.apply_rotary_pos_emb is rotate
    assert type(patched.model.layers[0].self_attn.hf_module) is type(other.model.layers[0].self_attn)
    ids = random_ids(0, 1, 8, "cpu")
    with torch.inference_mode(), TileOpsCalls() as calls:
        other(ids)
    assert sum(calls.calls.values()) == 0
    counts = remove_tileops(patched)
    assert counts == {"rms_norm": 5, "rope": 1, "moe": 0, "attention": 2}
    assert not any(isinstance(m, (TileOpsRMSNorm, TileOpsRotaryEmbedding, TileOpsAttention))
                   for m in patched.modules())
    assert all("forward" not in vars(m) for m in patched.modules())
    with torch.inference_mode():
        torch.testing.assert_close(patched(ids).logits, reference(ids).logits, rtol=0, atol=0)


def test_rebound_forwards_globals_are_not_taken_for_the_modeling_modules() -> None:
    # TorchDynamo 2.11 finds an inlined function's globals as sys.modules[globals["__name__"]]:
    # were that the modeling module, it would guard on the module's values, not the forward's
    # (test_compile_fullgraph failed so on torch 2.11; 2.15 checks the dictionary's identity).
    from transformers.models.phi3 import modeling_phi3
    from tileops.integrations.transformers._rebind import overrides

    patched, _, _ = patched_pair("phi3", torch.float32)
    attn = patched.model.layers[0].self_attn.hf_module
    chain = [vars(attn)["forward"].__func__]  # the forward and the decorators around it
    while hasattr(chain[-1], "__wrapped__"):
        chain.append(chain[-1].__wrapped__)
    for fn in chain:
        named = sys.modules.get(fn.__globals__.get("__name__", ""))
        assert named is None or vars(named) is fn.__globals__, fn
    forward, original = chain[-1], type(attn).forward
    while hasattr(original, "__wrapped__"):
        original = original.__wrapped__
    assert forward.__code__ is original.__code__ and forward.__module__ == modeling_phi3.__name__
    replaced = overrides(attn)
    assert "ALL_ATTENTION_FUNCTIONS" in replaced and len(replaced) > 1  # and the rotation
    for name, value in replaced.items():
        assert forward.__globals__[name] is value is not vars(modeling_phi3)[name]


def test_deepcopy_of_a_patched_model() -> None:
    import gc
    import weakref

    patched, reference, _ = patched_pair("qwen3_moe", torch.bfloat16)
    twin = copy.deepcopy(patched)
    assert twin.model.norm.op is patched.model.norm.op  # ops are shared, not copied
    assert twin.model.norm.weight is not patched.model.norm.weight
    attention = patched.model.layers[0].self_attn
    assert isinstance(attention, TileOpsAttention)
    original_attention = weakref.ref(attention)
    ids = random_ids(0, 1, 8, "cpu")
    with torch.inference_mode():
        want = patched(ids).logits
        del patched, attention
        gc.collect()
        torch.testing.assert_close(twin(ids).logits, want, rtol=0, atol=0)
    # The copy's rebound functions (shared with the original's) keep no module of the original.
    assert original_attention() is None


def test_to_dtype_after_apply() -> None:
    patched, reference, _ = patched_pair("llama", torch.float32)
    patched.to(torch.bfloat16)
    reference.to(torch.bfloat16)
    compare_logits(patched, reference, torch.bfloat16, "cpu", TOLERANCE[torch.bfloat16])


def test_version_range() -> None:
    assert SUPPORTED_TRANSFORMERS == ">=5.17,<6"
    _version.check(transformers.__version__)  # the installed one is in range (the import checked)
    for ok in ("5.17.0", "5.25.0", "5.99.1.dev0"):
        _version.check(ok)
    for bad in ("4.57.1", "5.16.1", "6.0.0"):
        with pytest.raises(ImportError, match=r"transformers>=5.17,<6"):
            _version.check(bad)


def test_missing_transformers_is_a_clear_import_error() -> None:
    code = ("import sys; sys.modules['transformers'] = None\n"
            "try:\n    import tileops.integrations.transformers\n"
            "except ImportError as e:\n    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "ImportError: tileops.integrations.transformers needs Hugging Face transformers" in out.stdout
    assert "pip install 'transformers>=5.17,<6'" in out.stdout
