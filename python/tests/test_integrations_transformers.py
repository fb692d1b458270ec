"""tileops.integrations.transformers: tiny random-weight transformers models of every served
architecture, patched with apply_tileops, against the same models unpatched.

Tolerances are relative to the largest reference logit: float32 2^-16 (the patched model
differs by rounding: tileops computes rotary angles in double and rounds RMSNorm once), bfloat16
2^-5 (8 units of bf16's 2^-8 roundoff: each of the two layers and the head rounds differently
than transformers does, about 1% measured), FP8 experts against the same checkpoint dequantized
2^-4 (e4m3's own roundoff: the FP8 path quantizes the activations per 1 x 128 group).

MoE routing is discontinuous: where two experts' router scores are nearly equal, the rounding
differences between the two models may pick different experts for a token (and bf16 router
logits tie exactly now and then, where tileops takes the lower expert id and torch.topk either).
Such an input cannot be compared; the tests check that every routing difference is such a near tie (a relative gap
below NEAR_TIE in the reference), and take the next input seed when one occurs (a real
difference, e.g. a wrong routing rule, fails). Greedy generation likewise may take another token
only where the reference's top two logits are within twice the tolerance, or after such a
routing near tie.
"""

from __future__ import annotations

import copy
import inspect
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import tileops
from conftest import requires_cuda

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from tileops.integrations.transformers import (  # noqa: E402
    KINDS,
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
from tileops.models import ARCHITECTURES, KINDS as MODEL_KINDS, dequantize_experts, tiny_model  # noqa: E402

TOLERANCE = {torch.float32: 2.0**-16, torch.bfloat16: 2.0**-5}
FP8_TOLERANCE = 2.0**-4
NEAR_TIE = 2.0**-4
DTYPES = [torch.float32, torch.bfloat16]
SEEDS = 8


def _ids(seed: int, batch: int, length: int, device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randint(3, 128, (batch, length), generator=g).to(device)


def _pair(arch: str, dtype: torch.dtype, device: str = "cpu", compiled_min_tokens: int | None = None,
          **kw: Any) -> tuple[Any, Any, dict[str, int]]:
    """(patched, unpatched, counts): one tiny model and its copy before apply_tileops (with its
    default compiled_min_tokens unless given)."""
    model = tiny_model(arch, dtype, device=device, **kw)
    reference = copy.deepcopy(model)
    options = {} if compiled_min_tokens is None else {"compiled_min_tokens": compiled_min_tokens}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileOpsNotServedWarning)
        counts = apply_tileops(model, **options)
    return model, reference, counts


def _expected_kinds(arch: str, dtype: torch.dtype, device: str = "cpu") -> tuple[str, ...]:
    # FusedMoEFwdOp runs 16-bit (or FP8) experts: a float32 model's MoE blocks are not served;
    # the CUDA attention kernel takes float16 and bfloat16.
    unserved = {"moe", "attention"} if device != "cpu" else {"moe"}
    return tuple(k for k in MODEL_KINDS[arch] if dtype != torch.float32 or k not in unserved)


class TileOpsCalls(TorchDispatchMode):
    """Counts the torch.ops.tileops operators run, per kind, and the tensors they received."""

    def __init__(self) -> None:
        super().__init__()
        self.kind_of = {op: kind.name for kind in KINDS for op in kind.operators()}
        self.calls: Counter[str] = Counter()
        self.pointers: set[int] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        namespace, _, name = func.name().partition("::")
        if namespace == "tileops":
            self.calls[self.kind_of.get(name.split(".")[0], name)] += 1
            self.pointers.update(a.data_ptr() for a in args if isinstance(a, torch.Tensor))
        return func(*args, **(kwargs or {}))


# ---- routing near ties --------------------------------------------------------------------------


@dataclass
class RouterCall:
    module: Any
    logits: torch.Tensor
    ids: torch.Tensor


def _routers(model: Any) -> list[Any]:
    return [m for m in model.modules() if type(m).__name__.endswith(("TopKRouter", "TopkRouter"))]


@contextmanager
def _routing_log(model: Any) -> Iterator[list[RouterCall]]:
    """Records every router call (a tileops MoE runs the router module when it is hooked)."""
    log: list[RouterCall] = []

    def hook(module: Any, args: Any, out: Any) -> None:
        log.append(RouterCall(module, out[0].detach().double().cpu(), out[2].detach().cpu()))

    handles = [r.register_forward_hook(hook) for r in _routers(model)]
    try:
        yield log
    finally:
        for h in handles:
            h.remove()


def _margins(call: RouterCall) -> torch.Tensor:
    """Per token: the relative gap at the selection boundaries (the k-th against the (k+1)-th
    expert; for DeepSeek-V3 also the groups kept against the first dropped)."""
    gate, logits = call.module, call.logits
    k = int(gate.top_k)
    if not hasattr(gate, "e_score_correction_bias"):
        s = logits.sort(-1, descending=True).values
        return (s[:, k - 1] - s[:, k]) / s.abs().amax(-1)
    c = torch.sigmoid(logits) + gate.e_score_correction_bias.double().cpu()
    m, e = c.shape
    groups, kept = int(gate.num_group), int(gate.topk_group)
    group_scores = c.view(m, groups, e // groups).topk(2, dim=-1).values.sum(-1)
    gs = group_scores.sort(-1, descending=True)
    gap = torch.full((m,), float("inf"), dtype=torch.float64)
    if kept < groups:
        gap = (gs.values[:, kept - 1] - gs.values[:, kept]) / gs.values.abs().amax(-1)
    mask = torch.zeros(m, groups, dtype=torch.bool).scatter_(1, gs.indices[:, :kept], True)
    candidates = c.masked_fill(~mask.repeat_interleave(e // groups, 1), -torch.inf)
    s = candidates.sort(-1, descending=True).values
    return torch.minimum(gap, (s[:, k - 1] - s[:, k]) / c.abs().amax(-1))


def _first_routing_difference(reference: list[RouterCall], patched: list[RouterCall]) -> tuple[int, list[float]] | None:
    """The first router call (in execution order) where the two runs may route differently, with
    the reference margins of the tokens whose chosen experts differ and a 0 for each exact tie in
    the patched run's router scores (there the recorded choice is torch.topk's, the op's may be
    the other expert: tileops takes the lower id); None when they route alike. Later calls see
    inputs that this difference changed, so only the first one must be a near tie."""
    assert len(reference) == len(patched)
    for i, (r, p) in enumerate(zip(reference, patched)):
        differ = (r.ids.sort(-1).values != p.ids.sort(-1).values).any(-1)
        flips = _margins(r)[differ].tolist() + [0.0] * int((_margins(p) == 0).sum())
        if flips:
            return i, flips
    return None


def _assert_near_ties(difference: tuple[int, list[float]] | None) -> None:
    if difference is not None:
        assert all(m < NEAR_TIE for m in difference[1]), (
            f"router call {difference[0]} routes differently where it is no near tie: {difference[1]}")


def _assert_close(got: torch.Tensor, want: torch.Tensor, tolerance: float) -> None:
    scale = want.abs().max().item()
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=tolerance * scale)


def _compare_logits(patched: Any, reference: Any, dtype: torch.dtype, device: str, tolerance: float,
                    batch: int = 2, length: int = 16) -> None:
    """Patched against reference logits on the first input seed without a routing near tie."""
    for seed in range(SEEDS):
        ids = _ids(seed, batch, length, device)
        with torch.inference_mode(), _routing_log(reference) as ref_log, _routing_log(patched) as our_log:
            want = reference(ids).logits
            got = patched(ids).logits
        difference = _first_routing_difference(ref_log, our_log)
        _assert_near_ties(difference)
        if difference is None:
            _assert_close(got, want, tolerance)
            return
    pytest.fail(f"every one of {SEEDS} inputs had a routing near tie")


# ---- logits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_logits_match_transformers(device: str, arch: str, dtype: torch.dtype) -> None:
    patched, reference, counts = _pair(arch, dtype, device)
    expected = _expected_kinds(arch, dtype, device)
    assert {k for k, n in counts.items() if n > 0} == set(expected)
    with torch.inference_mode(), TileOpsCalls() as calls:
        patched(_ids(0, 1, 8, device))
    # Each replaced site really ran tileops (no silent fallback to transformers' code).
    assert calls.calls["rms_norm"] == counts["rms_norm"]
    rotations = 2 * counts["rope"] * (2 if arch == "phi3" else 1)  # q and k; LongRoPE: both sets
    assert calls.calls["rope"] == rotations
    assert (calls.calls["moe"] > 0) == ("moe" in expected)
    assert calls.calls["attention"] == counts["attention"]  # one call per layer
    _compare_logits(patched, reference, dtype, device, TOLERANCE[dtype])


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


# ---- generation with the KV cache ---------------------------------------------------------------


def _first_difference(a: torch.Tensor, b: torch.Tensor) -> int | None:
    differ = (a != b).nonzero()
    return None if differ.numel() == 0 else int(differ[0, -1])


@contextmanager
def _forwards_from_an_empty_cache(model: Any) -> Iterator[list[int]]:
    """Per forward of `model` that starts from no cache or an empty one, the step (its index
    among the model's forwards) it is; the first is the prefill."""
    found: list[int] = []
    forwards = 0
    keyword = _cache_keyword(model)

    def hook(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        nonlocal forwards
        cache = kwargs.get(keyword)
        if cache is None or cache.get_seq_length() == 0:
            found.append(forwards)
        forwards += 1

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield found
    finally:
        handle.remove()


def _greedy(model: Any, ids: torch.Tensor, steps: int) -> Any:
    return model.generate(ids, max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                          output_logits=True, return_dict_in_generate=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_greedy_generate_follows_transformers(device: str, arch: str, dtype: torch.dtype) -> None:
    patched, reference, counts = _pair(arch, dtype, device)
    # Phi-3's tiny config switches to the long factors past position 32: the decode crosses it.
    prompt, steps = (24, 12) if arch == "phi3" else (10, 8)
    ids = _ids(0, 1, prompt, device)
    with torch.inference_mode(), _routing_log(reference) as ref_log, _routing_log(patched) as our_log:
        with _forwards_from_an_empty_cache(reference) as prefills:
            want = _greedy(reference, ids, steps)
        with TileOpsCalls() as calls:
            got = _greedy(patched, ids, steps)
    # A forward from an empty cache (a prefill) has its attention served, a decode step over
    # cached keys runs the model's own (not served). Phi-3's generate drops the cache once the
    # sequence crosses original_max_position_embeddings (its long factors then apply): 5.25
    # prefills the whole sequence again once, 5.17 runs every later step from an empty cache.
    switch = reference.config.original_max_position_embeddings if arch == "phi3" else None
    assert prefills[0] == 0 and prefills[1:2] == ([] if switch is None else [switch + 1 - prompt])
    assert calls.calls["attention"] == len(prefills) * counts["attention"]
    _assert_decoding_follows(got.sequences[0, prompt:], got.logits, want.sequences[0, prompt:],
                             want.logits, ref_log, our_log, TOLERANCE[dtype])


def _assert_decoding_follows(got_tokens: torch.Tensor, got_logits: Any, want_tokens: torch.Tensor,
                             want_logits: Any, ref_log: list[RouterCall], our_log: list[RouterCall],
                             tolerance: float) -> None:
    """Greedy decoding of the patched model (new tokens, per-step logits) follows the reference's:
    the logits of every step whose inputs both runs share are close; a token may differ only
    where the reference's top two logits are a near tie, or after a routing near tie."""
    steps = len(want_tokens)
    tolerance *= max(s.abs().max().item() for s in want_logits)
    t = _first_difference(got_tokens.cpu(), want_tokens.cpu())  # step t's forward chose another token
    shared = steps if t is None else t + 1  # the steps whose inputs both runs share
    per_step = len(ref_log) // steps  # router calls of one forward (0 without MoE)
    difference = _first_routing_difference(ref_log[: shared * per_step], our_log[: shared * per_step])
    _assert_near_ties(difference)
    if difference is not None:  # from that step on the runs may legitimately part
        shared = difference[0] // per_step
    for step in range(shared):
        torch.testing.assert_close(got_logits[step].float(), want_logits[step].float(),
                                   rtol=0, atol=tolerance)
    if t is not None and difference is None:
        top2 = want_logits[t][0].float().topk(2).values
        assert top2[0] - top2[1] < 2 * tolerance, (
            f"step {t}: token {int(got_tokens[t])} instead of {int(want_tokens[t])}, "
            f"but the reference's top two logits differ by {float(top2[0] - top2[1]):.4f}")


def test_static_cache_decode_follows_dynamic_cache() -> None:
    # The decode loop the CUDA-graph test captures, run eagerly: StaticCache, one token a step.
    patched, reference, _ = _pair("qwen3_moe", torch.bfloat16)
    ids = _ids(0, 1, 8, "cpu")
    with torch.inference_mode(), _routing_log(reference) as ref_log, _routing_log(patched) as our_log:
        want = _greedy(reference, ids, 6)
        tokens, logits = _static_decode(patched, ids, 6, graph=False)
    _assert_decoding_follows(tokens, logits, want.sequences[0, 8:], want.logits, ref_log, our_log,
                             TOLERANCE[torch.bfloat16])


def _cache_keyword(model: Any) -> str:
    """The forward's cache argument: `cache` from transformers 5.25 on, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _static_decode(model: Any, ids: torch.Tensor, steps: int, graph: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Greedy decoding with a StaticCache (its write position is a device tensor the cache
    advances itself), one token a step; with ``graph`` each step is one replay of a CUDA graph
    captured once, after an eager warm-up, on a static token buffer."""
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=ids.shape[1] + steps + 2)
    token_buffer = torch.zeros(1, 1, dtype=torch.long, device=ids.device)
    kw = {_cache_keyword(model): cache, "use_cache": True}

    def step() -> torch.Tensor:
        return model(token_buffer, **kw).logits[:, -1]

    run = step
    if graph:
        model(ids, **kw)  # allocates the cache
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # builds every kernel
                step()
        torch.cuda.current_stream().wait_stream(stream)
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            graph_logits = step()
        cache.reset()  # in place: the captured addresses stay

        def run() -> torch.Tensor:
            cuda_graph.replay()
            return graph_logits.clone()

    logits = model(ids, **kw).logits[:, -1]
    tokens, all_logits = [], []
    for i in range(steps):
        token = logits.argmax(-1)
        tokens.append(token[0])
        all_logits.append(logits)
        if i + 1 < steps:
            token_buffer.copy_(token.view(1, 1))
            logits = run()
    return torch.stack(tokens), all_logits


class HostReads(TorchDispatchMode):
    """Records the ops that read a tensor's value back to the host (a CUDA graph cannot)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.name() in ("aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal"):
            self.reads.append(func.name())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("arch", ["phi3", "qwen3_moe", "deepseek_v3"])
def test_patched_decode_step_reads_nothing_back(arch: str) -> None:
    # What makes the step capturable (test_cuda_graph_decode_replays_eager on a GPU): LongRoPE's
    # choice of factors and the MoE routing stay on the device.
    from transformers import StaticCache

    patched, _, _ = _pair(arch, torch.bfloat16)
    cache = StaticCache(config=patched.config, max_cache_len=16)
    kw = {_cache_keyword(patched): cache, "use_cache": True}
    ids = _ids(0, 1, 8, "cpu")
    with torch.inference_mode():
        patched(ids, **kw)
        with HostReads() as host, TileOpsCalls() as calls:
            patched(ids[:, -1:], **kw)
    assert host.reads == []
    assert calls.calls["rope"] > 0 and calls.calls["rms_norm"] > 0


@requires_cuda
@pytest.mark.parametrize("arch", ["llama", "phi3", "qwen3_moe", "deepseek_v3"])
def test_cuda_graph_decode_replays_eager(arch: str) -> None:
    patched, reference, _ = _pair(arch, torch.bfloat16, "cuda")
    ids = _ids(0, 1, 10, "cuda")
    steps = 8
    with torch.inference_mode():
        graph_tokens, graph_logits = _static_decode(patched, ids, steps, graph=True)
        with _routing_log(reference) as ref_log, _routing_log(patched) as our_log:
            want = _greedy(reference, ids, steps)
            eager_tokens, eager_logits = _static_decode(patched, ids, steps, graph=False)
    # The graph replays the eager kernels on the same inputs.
    assert torch.equal(graph_tokens, eager_tokens)
    for a, b in zip(graph_logits, eager_logits):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    _assert_decoding_follows(eager_tokens, eager_logits, want.sequences[0, 10:], want.logits, ref_log,
                             our_log, TOLERANCE[torch.bfloat16])


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
        model(_ids(0, 1, 6, "cpu"))
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
        model(_ids(0, 1, 6, device))
    for w in (experts.gate_up_proj, experts.gate_up_proj_scale_inv, experts.down_proj,
              experts.down_proj_scale_inv):
        assert w.data_ptr() in calls.pointers  # e4m3 weights and weight_scale_inv, unconverted
    fused_experts = block.op.held_delegates()[1]
    assert "MoEExpertMLPFP8FwdOp" in [type(d).__name__ for d in fused_experts.held_delegates()]
    _compare_logits(model, reference, torch.bfloat16, device, FP8_TOLERANCE, batch=1, length=12)


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
    _compare_logits(model, reference, torch.float32, "cpu", TOLERANCE[torch.float32])


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
    patched, reference, _ = _pair("qwen3_moe", torch.bfloat16)
    ids = _ids(0, 1, 8, "cpu")
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
    patched, reference, _ = _pair("qwen3_moe", torch.bfloat16)
    ids = _ids(2, 1, 8, "cpu")
    with torch.inference_mode():
        want = reference(ids, output_router_logits=True).router_logits
        got = patched(ids, output_router_logits=True).router_logits
    assert len(got) == len(want) == 2
    # Layer 0's router input went through a norm and attention, rounded differently (layer 1's
    # also through layer 0's routing, which may differ at a near tie).
    _assert_close(got[0], want[0], TOLERANCE[torch.bfloat16])


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
    _assert_close(got, want, TOLERANCE[torch.bfloat16])


# ---- locality, removal, versions --------------------------------------------------------------------


def test_patching_one_model_leaves_others_and_the_modeling_module_alone() -> None:
    from transformers.models.phi3 import modeling_phi3

    rotate = modeling_phi3.apply_rotary_pos_emb
    patched, reference, _ = _pair("phi3", torch.float32)
    other = tiny_model("phi3", torch.float32, seed=1)
    assert modeling_phi3.apply_rotary_pos_emb is rotate
    assert type(patched.model.layers[0].self_attn.hf_module) is type(other.model.layers[0].self_attn)
    ids = _ids(0, 1, 8, "cpu")
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

    patched, _, _ = _pair("phi3", torch.float32)
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

    patched, reference, _ = _pair("qwen3_moe", torch.bfloat16)
    twin = copy.deepcopy(patched)
    assert twin.model.norm.op is patched.model.norm.op  # ops are shared, not copied
    assert twin.model.norm.weight is not patched.model.norm.weight
    attention = patched.model.layers[0].self_attn
    assert isinstance(attention, TileOpsAttention)
    original_attention = weakref.ref(attention)
    ids = _ids(0, 1, 8, "cpu")
    with torch.inference_mode():
        want = patched(ids).logits
        del patched, attention
        gc.collect()
        torch.testing.assert_close(twin(ids).logits, want, rtol=0, atol=0)
    # The copy's rebound functions (shared with the original's) keep no module of the original.
    assert original_attention() is None


def test_to_dtype_after_apply() -> None:
    patched, reference, _ = _pair("llama", torch.float32)
    patched.to(torch.bfloat16)
    reference.to(torch.bfloat16)
    _compare_logits(patched, reference, torch.bfloat16, "cpu", TOLERANCE[torch.bfloat16])


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
