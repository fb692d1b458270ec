"""tileops.integrations.transformers under torch.compile: one graph whose served sites are
torch.ops.tileops nodes, compiled calls below apply_tileops's compiled_min_tokens tracing
transformers' own code, generation with a dynamic cache. Tiny random-weight models, helpers and
tolerances of transformers_pairs.py."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import pytest
import torch

import tileops

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from transformers_pairs import (  # noqa: E402
    assert_logits_close,
    cache_keyword,
    expected_kinds,
    greedy,
    margins,
    patched_pair,
    random_ids,
    routing_log,
    SEEDS,
    TileOpsCalls,
    TOLERANCE,
)
from tileops.integrations.transformers import KINDS, TileOpsRMSNorm, apply_tileops  # noqa: E402
from tileops.models import tiny_model  # noqa: E402


@pytest.mark.parametrize("arch,dtype", [("llama", torch.float32), ("phi3", torch.float32),
                                        ("deepseek_v3", torch.bfloat16)], ids=str)
def test_compile_fullgraph(device: str, arch: str, dtype: torch.dtype) -> None:
    from test_block_compile import Recorder

    torch._dynamo.reset()
    patched, reference, counts = patched_pair(arch, dtype, device, compiled_min_tokens=0)
    recorder = Recorder()

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        recorder(gm, example_inputs)
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs)

    compiled = torch.compile(patched, fullgraph=True, backend=backend)
    ids = _decisive_ids(patched, 1, 10, device)
    with torch.inference_mode():
        eager = patched(ids).logits
        got = compiled(ids).logits
        want = reference(ids).logits
    assert len(recorder.graphs) == 1
    kind_of = {op: kind.name for kind in KINDS for op in kind.operators()}
    nodes: Counter[str] = Counter()
    for name, n in recorder.tileops_nodes().items():
        nodes[kind_of[name]] += n
    assert nodes["rms_norm"] == counts["rms_norm"]
    assert nodes["rope"] == 2 * counts["rope"] * (2 if arch == "phi3" else 1)
    assert (nodes["moe"] > 0) == (counts["moe"] > 0)
    served = "attention" in expected_kinds(arch, dtype, device)  # MLA; CUDA float32
    assert counts["attention"] == (2 if served else 0)
    # In the graph, the attention is served where transformers leaves the causal mask to sdpa
    # while compiling; where it builds the mask instead, the model's own sdpa runs with it.
    sdpa_masks = [n.kwargs.get("attn_mask", n.args[3] if len(n.args) > 3 else None)
                  for n in recorder.graphs[0].graph.nodes
                  if n.op == "call_function" and "scaled_dot_product_attention" in str(n.target)]
    if served and _compiling_skips_causal_masks():
        assert nodes["attention"] == 2 and sdpa_masks == []
    elif served:
        assert nodes["attention"] == 0 and len(sdpa_masks) == 2 and None not in sdpa_masks
    else:
        assert nodes["attention"] == 0
    assert_logits_close(got, eager, TOLERANCE[dtype])
    if counts["moe"] == 0:  # with MoE, test_logits_match_transformers relates eager and reference
        assert_logits_close(got, want, TOLERANCE[dtype])


def _call_targets(gm: torch.fx.GraphModule) -> Counter[str]:
    return Counter(str(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method"))


@pytest.mark.parametrize("arch", ["llama", "phi3", "deepseek_v3"])
def test_compiled_calls_below_min_tokens_trace_transformers(arch: str) -> None:
    """Under torch.compile, calls with fewer tokens than compiled_min_tokens trace transformers'
    norm, rotation and attention (the moe kind stays served): without a served moe block, the
    very operations of the unpatched model's graph (the rotary cos and sin once for every layer,
    not once per layer); from that many tokens on, and in eager mode at any size, tileops serves
    them."""
    from test_block_compile import Recorder

    dtype = torch.bfloat16
    patched, reference, counts = patched_pair(arch, dtype, compiled_min_tokens=12)
    assert counts["rms_norm"] > 0 and counts["rope"] > 0
    kind_of = {op: kind.name for kind in KINDS for op in kind.operators()}
    recorded: list[torch.fx.GraphModule] = []

    def compiled_kinds(length: int) -> tuple[Counter[str], torch.Tensor, torch.Tensor]:
        torch._dynamo.reset()
        recorder = Recorder()
        ids = _decisive_ids(patched, 1, length, "cpu")
        with torch.inference_mode():
            got = torch.compile(patched, fullgraph=True, backend=recorder, dynamic=False)(ids).logits
            want = reference(ids).logits
        assert len(recorder.graphs) == 1
        recorded.append(recorder.graphs[0])
        nodes: Counter[str] = Counter()
        for name, n in recorder.tileops_nodes().items():
            nodes[kind_of[name]] += n
        return nodes, got, want

    small, got, want = compiled_kinds(11)  # 11 tokens < 12: transformers' code, but the experts
    assert small["rms_norm"] == small["rope"] == small["attention"] == 0
    assert (small["moe"] > 0) == (counts["moe"] > 0) == (arch == "deepseek_v3")
    if counts["moe"] == 0:
        assert_logits_close(got, want, TOLERANCE[dtype])
        # Traced again: the first call ran transformers' lazy initialisations (LongRoPE's long
        # inverse frequencies, a buffer the reference's eager calls had made already).
        compiled_kinds(11)
        patched_graph = recorded[-1]
        torch._dynamo.reset()
        unpatched = Recorder()
        with torch.inference_mode():
            torch.compile(reference, fullgraph=True, backend=unpatched, dynamic=False)(
                _decisive_ids(patched, 1, 11, "cpu"))
        assert _call_targets(patched_graph) == _call_targets(unpatched.graphs[0])
    rotations = 2 * counts["rope"] * (2 if arch == "phi3" else 1)  # q and k; LongRoPE's two ops
    large, got, _ = compiled_kinds(12)
    assert large["rms_norm"] == counts["rms_norm"] and large["rope"] == rotations
    assert large["moe"] == small["moe"]
    ids = random_ids(0, 1, 11, "cpu")
    with torch.inference_mode(), TileOpsCalls() as calls:  # eager: tileops at any size
        patched(ids)
    assert calls.calls["rms_norm"] == counts["rms_norm"] and calls.calls["rope"] == rotations


@pytest.mark.parametrize("value", [-1, 1.5, True, "512"])
def test_compiled_min_tokens_is_checked(value: Any) -> None:
    model = tiny_model("llama", torch.float32)
    with pytest.raises(tileops.UsageError, match="compiled_min_tokens"):
        apply_tileops(model, compiled_min_tokens=value)
    assert not any(isinstance(m, TileOpsRMSNorm) for m in model.modules())  # nothing changed


@functools.cache
def _compiling_skips_causal_masks() -> bool:
    """Whether transformers' sdpa mask function returns None for a causal call without padding
    in a graph TorchDynamo traces, as it does in eager mode. transformers 5.17 builds the mask
    whenever it traces, so does a later one on torch before 2.14 (its masking_utils); the
    attention kind serves only calls without a mask (docs/design/integrations.md)."""
    from transformers.masking_utils import sdpa_mask

    def mask(x: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return x, sdpa_mask(batch_size=1, q_length=x.shape[0], kv_length=x.shape[0])

    assert mask(torch.zeros(4))[1] is None
    return torch.compile(mask, fullgraph=True, backend="eager")(torch.zeros(4))[1] is None


def _decisive_ids(model: Any, batch: int, length: int, device: str, margin: float = 2.0**-6) -> torch.Tensor:
    """An input on which every routing decision of `model` has a relative margin of at least
    `margin` (4 bf16 units), so that the compiled model (inductor rounds the unpatched parts
    differently, about one unit) routes alike."""
    for seed in range(4 * SEEDS):
        ids = random_ids(seed, batch, length, device)
        with torch.inference_mode(), routing_log(model) as log:
            model(ids)
        if all(bool((margins(call) >= margin).all()) for call in log):
            return ids
    pytest.fail(f"no input of {4 * SEEDS} without a routing margin below {margin}")


def test_compiled_generation_with_dynamic_cache() -> None:
    torch._dynamo.reset()
    patched, reference, _ = patched_pair("qwen3", torch.float32, compiled_min_tokens=0)
    compiled = torch.compile(patched, dynamic=True)
    ids = random_ids(1, 1, 8, "cpu")
    with torch.inference_mode():
        want = greedy(reference, ids, 5)
        cache = transformers.DynamicCache(config=patched.config)
        kw = {cache_keyword(patched): cache, "use_cache": True}
        out = compiled(ids, **kw)
        tokens = []
        for step in range(5):
            assert_logits_close(out.logits[:, -1], want.logits[step], TOLERANCE[torch.float32])
            token = out.logits[:, -1:].argmax(-1)
            tokens.append(int(token))
            out = compiled(token, **kw)
    assert tokens == want.sequences[0, 8:].tolist()
