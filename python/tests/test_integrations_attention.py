"""The attention kind of tileops.integrations.transformers: which calls of a patched model's
attention GroupedQueryAttentionVarlenFwdOp serves (sdpa's calls without a mask; decode steps on
the CPU only) and which run the model's own function, against the same models unpatched; the
served function against transformers' sdpa with the masks its mask function builds; locality,
what is reported, rebinding with the rope kind. The per-architecture logits, generate and
compile tests (test_integrations_transformers.py, _generate.py, _compile.py) count the attention
kind too.
"""

from __future__ import annotations

import copy
import re
import warnings
from typing import Any

import pytest
import torch

from conftest import requires_cuda

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from transformers_pairs import (  # noqa: E402
    assert_logits_close,
    cache_keyword,
    HostReads,
    patched_pair,
    random_ids,
    TileOpsCalls,
    TOLERANCE,
)
from tileops.integrations.transformers import (  # noqa: E402
    TileOpsAttention,
    TileOpsNotServedWarning,
    apply_tileops,
    remove_tileops,
    tileops_report,
)
from tileops.models import tiny_model  # noqa: E402


def _config_pair(arch: str, dtype: torch.dtype, **overrides: Any) -> tuple[Any, Any, dict[str, int]]:
    """(patched, unpatched, counts) of a tiny `arch` model from tiny_config with `overrides`."""
    from tileops.models import randomize, tiny_config

    model = transformers.AutoModelForCausalLM.from_config(tiny_config(arch, **overrides))
    model = randomize(model).to(dtype).eval()
    reference = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileOpsNotServedWarning)
        counts = apply_tileops(model)
    return model, reference, counts


def _step(model: Any, ids: torch.Tensor, **kw: Any) -> tuple[torch.Tensor, int]:
    """The logits of one forward and how many attention calls tileops served in it."""
    with torch.inference_mode(), TileOpsCalls() as calls:
        logits = model(ids, **kw).logits
    return logits, calls.calls["attention"]


def _attention_function(attn: TileOpsAttention) -> Any:
    """The attention function the rebound forward of `attn`'s module finds for sdpa."""
    from tileops.integrations.transformers._rebind import overrides

    return overrides(attn.hf_module)["ALL_ATTENTION_FUNCTIONS"].get_interface("sdpa", None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_attention_serves_unmasked_prefill_and_cpu_decode(dtype: torch.dtype) -> None:
    from transformers import DynamicCache, StaticCache

    patched, reference, counts = patched_pair("llama", dtype)
    layers = counts["attention"]
    decodes = layers if dtype == torch.bfloat16 else 0  # CPU decode steps: half precision only
    tol = TOLERANCE[dtype]
    ids = random_ids(0, 2, 12, "cpu")
    # No cache, no mask (q, k, v packed as views): served.
    got, served = _step(patched, ids, use_cache=False)
    assert served == layers
    assert_logits_close(got, _step(reference, ids, use_cache=False)[0], tol)
    # Left padding: the model builds a mask, its own sdpa runs with it; the tokens match.
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    got, served = _step(patched, ids, attention_mask=mask)
    assert served == 0
    keep = mask.bool()
    assert_logits_close(got[keep], _step(reference, ids, attention_mask=mask)[0][keep], tol)
    # A DynamicCache: the prefill (k and v out of the cache) served, a decode step (one sequence
    # per row and KV head, the cache as it is) in bfloat16; a chunk of three tokens over the
    # cache (masked) is the model's own.
    key = cache_keyword(patched)
    ours, theirs = DynamicCache(config=patched.config), DynamicCache(config=reference.config)
    for chunk, expected in ((ids[:, :8], layers), (ids[:, 8:9], decodes), (ids[:, 9:12], 0),
                            (ids[:, 11:12], decodes)):  # a decode step after the chunk
        got, served = _step(patched, chunk, **{key: ours})
        assert served == expected
        assert_logits_close(got, _step(reference, chunk, **{key: theirs})[0], tol)
    # An empty StaticCache: sdpa's causal mask over its first Sq slots (top-left) is served; the
    # decode step is masked (a compileable cache) and the model's own.
    ours = StaticCache(config=patched.config, max_cache_len=20)
    theirs = StaticCache(config=reference.config, max_cache_len=20)
    for chunk, expected in ((ids[:, :8], layers), (ids[:, 8:9], 0)):
        got, served = _step(patched, chunk, **{key: ours})
        assert served == expected
        assert_logits_close(got, _step(reference, chunk, **{key: theirs})[0], tol)


@pytest.mark.parametrize("arch,overrides", [
    ("qwen2", {"use_sliding_window": True, "sliding_window": 6, "max_window_layers": 0}),
    ("phi3", {"sliding_window": 6}),
    ("mixtral", {"sliding_window": 6}),
], ids=["qwen2", "phi3", "mixtral"])
def test_sliding_window_served_where_the_model_has_no_mask(arch: str, overrides: dict[str, Any]) -> None:
    patched, reference, counts = _config_pair(arch, torch.float32, **overrides)
    tol = TOLERANCE[torch.float32]
    attn = patched.model.layers[0].self_attn
    assert isinstance(attn, TileOpsAttention) and set(attn.plan.ops) == {None, 6}
    short, long = random_ids(0, 1, 5, "cpu"), random_ids(0, 1, 12, "cpu")
    got, served = _step(patched, short)  # 5 keys < window 6: sdpa's mask is None
    assert served == counts["attention"] == 2
    assert attn.plan.ops[6].last_call.indices["Tq"] == "5"  # the windowed op ran
    assert_logits_close(got, _step(reference, short)[0], tol)
    got, served = _step(patched, long)  # the window binds: the model's mask and function
    assert served == 0
    assert_logits_close(got, _step(reference, long)[0], tol)


def test_served_function_computes_what_sdpa_computes_with_its_masks() -> None:
    # The semantics the kind maps, on random q, k, v, against transformers' sdpa with the mask
    # its mask function builds: a window (key j visible from i when i - w < j <= i), sdpa's
    # top-left causal mask over more keys than queries, GQA, the module's scaling.
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import sdpa_mask, sliding_window_causal_mask_function

    patched, _, _ = _config_pair("qwen2", torch.float32, use_sliding_window=True, sliding_window=3,
                                 max_window_layers=0)
    attn = patched.model.layers[0].self_attn
    module, fn, scaling = attn.hf_module, _attention_function(attn), attn.plan.scaling
    g = torch.Generator().manual_seed(5)

    def qkv(q_len: int, kv_len: int) -> tuple[torch.Tensor, ...]:
        return (torch.randn(2, 4, q_len, 64, generator=g), torch.randn(2, 2, kv_len, 64, generator=g),
                torch.randn(2, 2, kv_len, 64, generator=g))

    with torch.inference_mode():
        q, k, v = qkv(8, 8)
        mask = sdpa_mask(batch_size=2, q_length=8, kv_length=8, allow_is_causal_skip=False,
                         mask_function=sliding_window_causal_mask_function(3))
        want = sdpa_attention_forward(module, q, k, v, mask, scaling=scaling)[0]
        with TileOpsCalls() as calls:
            got = fn(module, q, k, v, None, dropout=0.0, scaling=scaling, sliding_window=3)[0]
        assert calls.calls["attention"] == 1 and got.shape == (2, 8, 4, 64)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        q, k, v = qkv(5, 9)
        want = sdpa_attention_forward(module, q, k, v, None, scaling=scaling)[0]
        with TileOpsCalls() as calls:
            got = fn(module, q, k, v, None, dropout=0.0, scaling=scaling)[0]
        assert calls.calls["attention"] == 1
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        # A decode step on the CPU in bfloat16: one query per row over all its keys, each KV
        # head's two query heads (GQA) as one sequence's heads; its output [B, 1, Hq, D], against
        # sdpa in float32 on the same bfloat16 values, within |got - want| <= 1.6e-2 (1 + |want|),
        # the op's bfloat16 bound (test_attention.py).
        q, k, v = (t.to(torch.bfloat16) for t in qkv(1, 9))
        want = sdpa_attention_forward(module, q.float(), k.float(), v.float(), None, scaling=scaling)[0]
        with TileOpsCalls() as calls:
            got = fn(module, q, k, v, None, dropout=0.0, scaling=scaling)[0]
        assert calls.calls["attention"] == 1 and got.shape == (2, 1, 4, 64)
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want, rtol=1.6e-2, atol=1.6e-2)
        # The model's function where the op would not compute exactly that (or is not served):
        # a float32 decode step (torch's sdpa is as fast there), a bfloat16 one over keys that are
        # not contiguous (serving them would copy the cache), and a prefill the op serves but for
        # one argument.
        strided = (q, k.transpose(2, 3).contiguous().transpose(2, 3), v)
        prefill = qkv(4, 4)
        with TileOpsCalls() as calls:
            fn(module, *prefill, None, dropout=0.0, scaling=scaling)
        assert calls.calls["attention"] == 1
        for kw, (q, k, v) in (({}, qkv(1, 9)), ({}, strided), ({"scaling": 0.5}, prefill),
                              ({"dropout": 0.1}, prefill),
                              ({"sliding_window": 4}, prefill), ({"is_causal": False}, prefill)):
            call = {"dropout": 0.0, "scaling": scaling, **kw}
            with TileOpsCalls() as calls:
                fn(module, q, k, v, None, **call)
            assert calls.calls["attention"] == 0, kw
        # A softcap, which sdpa does not apply: the function does what transformers' sdpa does
        # with one (5.25 refuses it, 5.17 leaves it out), as the unpatched model would.
        call = {"dropout": 0.0, "scaling": scaling, "softcap": 30.0}
        try:
            want = sdpa_attention_forward(module, *prefill, None, **call)[0]
        except ValueError as refusal:
            with pytest.raises(ValueError, match=re.escape(str(refusal))):
                fn(module, *prefill, None, **call)
        else:
            with TileOpsCalls() as calls:
                got = fn(module, *prefill, None, **call)[0]
            assert calls.calls["attention"] == 0
            torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_attention_patch_is_local_to_the_instance() -> None:
    from transformers import masking_utils, modeling_utils
    from transformers.models.llama import modeling_llama
    from tileops.models import randomize, tiny_config

    functions = dict(modeling_utils.AttentionInterface._global_mapping)
    masks = dict(masking_utils.AttentionMaskInterface._global_mapping)
    interface = modeling_llama.ALL_ATTENTION_FUNCTIONS
    local = dict(interface._local_mapping)
    config = tiny_config("llama")
    patched = randomize(transformers.AutoModelForCausalLM.from_config(config)).eval()
    other = randomize(transformers.AutoModelForCausalLM.from_config(config), seed=1).eval()
    assert patched.config is other.config  # one config object: nothing may be set on it
    assert apply_tileops(patched)["attention"] == 2
    assert config._attn_implementation == "sdpa"
    assert modeling_utils.AttentionInterface._global_mapping == functions  # nothing registered
    assert masking_utils.AttentionMaskInterface._global_mapping == masks
    assert modeling_llama.ALL_ATTENTION_FUNCTIONS is interface and interface._local_mapping == local
    ids = random_ids(0, 1, 8, "cpu")
    assert _step(other, ids)[1] == 0
    assert _step(patched, ids)[1] == 2


def test_attention_not_served_is_reported() -> None:
    model = tiny_model("deepseek_v3", torch.float32)
    with pytest.warns(TileOpsNotServedWarning, match="multi-head latent attention"):
        assert apply_tileops(model)["attention"] == 0
    mla = [n for n in tileops_report(model).not_served if n.kind == "attention"]
    assert [n.path for n in mla] == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
    assert all(n.module == "DeepseekV3Attention" and "q and k have head dim 24, v 16" in n.reason for n in mla)
    # Another implementation: its masks are not sdpa's, so nothing of it is served.
    patched, reference, counts = _config_pair("llama", torch.float32, attn_implementation="eager")
    assert counts == {"rms_norm": 5, "rope": 2, "moe": 0, "attention": 0}
    reasons = {n.reason for n in tileops_report(patched).not_served}
    assert len(reasons) == 1 and "attention implementation 'eager'" in reasons.pop()
    ids = random_ids(0, 1, 8, "cpu")
    assert_logits_close(_step(patched, ids)[0], _step(reference, ids)[0], TOLERANCE[torch.float32])


def test_implementation_switched_after_apply_runs_that_one() -> None:
    patched, reference, _ = patched_pair("qwen3", torch.float32)
    ids = random_ids(0, 1, 8, "cpu")
    for model in (patched, reference):
        model.set_attn_implementation("eager")
    got, served = _step(patched, ids)
    assert served == 0
    assert_logits_close(got, _step(reference, ids)[0], TOLERANCE[torch.float32])
    patched.set_attn_implementation("sdpa")
    assert _step(patched, ids)[1] == 2


def test_attention_dropout_in_training_runs_the_models_function() -> None:
    patched, _, counts = _config_pair("llama", torch.float32, attention_dropout=0.5)
    assert counts["attention"] == 2
    patched.train()  # reaches the replaced modules, whose forward passes the dropout
    assert patched.model.layers[0].self_attn.hf_module.training
    with torch.no_grad(), TileOpsCalls() as calls:
        patched(random_ids(0, 1, 8, "cpu"))
    assert calls.calls["attention"] == 0 and calls.calls["rms_norm"] == counts["rms_norm"]
    patched.eval()
    assert _step(patched, random_ids(0, 1, 8, "cpu"))[1] == 2


def test_train_and_eval_reach_the_replaced_modules() -> None:
    from tileops.integrations.transformers import Replacement

    patched, _, _ = patched_pair("mixtral", torch.bfloat16)
    replacements = [m for m in patched.modules() if isinstance(m, Replacement)]
    assert {r.kind for r in replacements} == {"rms_norm", "rope", "moe", "attention"}
    patched.train()  # e.g. Mixtral's block applies its router jitter in its own forward
    assert all(r.hf_module.training for r in replacements)
    patched.eval()
    assert not any(r.hf_module.training for r in replacements)


def test_attention_replacement_keeps_the_state_dict() -> None:
    model = tiny_model("phi3", torch.float32)
    keys = {k: v.data_ptr() for k, v in model.state_dict().items()}
    assert apply_tileops(model)["attention"] == 2
    after = model.state_dict()
    assert set(after) == set(keys) and all(after[k].data_ptr() == p for k, p in keys.items())
    attn = model.model.layers[1].self_attn
    assert attn.qkv_proj is attn.hf_module.qkv_proj and attn.o_proj is attn.hf_module.o_proj


def test_attention_and_rope_apply_in_either_order_and_come_off() -> None:
    from tileops.integrations.transformers._rebind import overrides

    model = tiny_model("qwen3", torch.float32)
    reference = copy.deepcopy(model)
    ids = random_ids(0, 1, 8, "cpu")
    want = _step(reference, ids)[0]
    assert apply_tileops(model, kinds=["attention"]) == {"attention": 2}
    hf = model.model.layers[0].self_attn.hf_module
    assert set(overrides(hf)) == {"ALL_ATTENTION_FUNCTIONS"}
    assert_logits_close(_step(model, ids)[0], want, TOLERANCE[torch.float32])
    assert apply_tileops(model, kinds=["rope"]) == {"rope": 2}  # rebinds under the replacement
    assert set(overrides(hf)) == {"ALL_ATTENTION_FUNCTIONS", "apply_rotary_pos_emb"}
    with torch.inference_mode(), TileOpsCalls() as calls:
        got = model(ids).logits
    assert calls.calls["attention"] == 2 and calls.calls["rope"] == 4
    assert_logits_close(got, want, TOLERANCE[torch.float32])
    # A deep copy unpatched leaves the original patched (each module records its own rebinding).
    twin = copy.deepcopy(model)
    assert remove_tileops(twin) == {"rms_norm": 0, "rope": 1, "moe": 0, "attention": 2}
    assert all("forward" not in vars(m) for m in twin.modules())
    torch.testing.assert_close(_step(twin, ids)[0], want, rtol=0, atol=0)
    got, served = _step(model, ids)
    assert served == 2
    assert_logits_close(got, want, TOLERANCE[torch.float32])


def test_served_prefill_reads_nothing_back() -> None:
    # The served call reads nothing back (the offsets are built on the device); the model reads
    # back what the unpatched model reads (transformers' check for packed sequences).
    patched, reference, counts = patched_pair("qwen3", torch.bfloat16)
    attn = patched.model.layers[0].self_attn
    fn, scaling = _attention_function(attn), attn.plan.scaling
    q, k = torch.randn(2, 4, 8, 64).bfloat16(), torch.randn(2, 2, 8, 64).bfloat16()
    ids = random_ids(0, 2, 8, "cpu")
    with torch.inference_mode():
        with HostReads() as host, TileOpsCalls() as calls:
            fn(attn.hf_module, q, k, k, None, dropout=0.0, scaling=scaling)
        assert host.reads == [] and calls.calls["attention"] == 1
        with HostReads() as unpatched:
            reference(ids, use_cache=False)
        with HostReads() as host, TileOpsCalls() as calls:
            patched(ids, use_cache=False)
    assert host.reads == unpatched.reads and calls.calls["attention"] == counts["attention"]


@requires_cuda
def test_cuda_graph_prefill_replays_eager() -> None:
    # A served call captured in a CUDA graph: a decoder layer with its rotary module and no mask,
    # as the bench times it (a whole model's forward without a cache cannot be captured:
    # transformers reads position_ids back to look for packed sequences, and while capturing it
    # builds a mask instead).
    from tileops.models._bench import LayerUnderTest

    patched, reference, _ = patched_pair("llama", torch.bfloat16, "cuda")
    ours = LayerUnderTest(patched.model.rotary_emb, patched.model.layers[0])
    theirs = LayerUnderTest(reference.model.rotary_emb, reference.model.layers[0])
    h = torch.randn(2, 64, 64, generator=torch.Generator().manual_seed(2)).to("cuda", torch.bfloat16)
    pos = torch.arange(64, device="cuda")[None].expand(2, 64)
    with torch.inference_mode():
        with TileOpsCalls() as calls:
            eager = ours(h, pos)
        assert calls.calls["attention"] == 1
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                ours(h, pos)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = ours(h, pos)
        graph.replay()
        torch.testing.assert_close(out, eager, rtol=0, atol=0)
        assert_logits_close(eager, theirs(h, pos), TOLERANCE[torch.bfloat16])
