"""tileops.integrations.transformers in generation: greedy `generate` with the KV cache follows
the unpatched model (decode steps' attention served on the CPU in half precision), StaticCache
decode, no host
reads in a decode step, CUDA-graph decode.
The pairs, tolerances and near-tie rules of transformers_pairs.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import requires_cuda

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from tileops.models import ARCHITECTURES  # noqa: E402
from transformers_pairs import (  # noqa: E402
    HostReads,
    assert_near_ties,
    cache_keyword,
    DTYPES,
    first_routing_difference,
    greedy,
    patched_pair,
    random_ids,
    routing_log,
    TileOpsCalls,
    TOLERANCE,
)


def _first_difference(a: torch.Tensor, b: torch.Tensor) -> int | None:
    differ = (a != b).nonzero()
    return None if differ.numel() == 0 else int(differ[0, -1])


@contextmanager
def _forwards_from_an_empty_cache(model: Any) -> Iterator[list[int]]:
    """Per forward of `model` that starts from no cache or an empty one, the step (its index
    among the model's forwards) it is; the first is the prefill."""
    found: list[int] = []
    forwards = 0
    keyword = cache_keyword(model)

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


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_greedy_generate_follows_transformers(device: str, arch: str, dtype: torch.dtype) -> None:
    patched, reference, counts = patched_pair(arch, dtype, device)
    # Phi-3's tiny config switches to the long factors past position 32: the decode crosses it.
    prompt, steps = (24, 12) if arch == "phi3" else (10, 8)
    ids = random_ids(0, 1, prompt, device)
    with torch.inference_mode(), routing_log(reference) as ref_log, routing_log(patched) as our_log:
        with _forwards_from_an_empty_cache(reference) as prefills:
            want = greedy(reference, ids, steps)
        with TileOpsCalls() as calls:
            got = greedy(patched, ids, steps)
    # A forward from an empty cache (a prefill) has its attention served; a decode step over
    # cached keys too on the CPU in half precision, the model's own otherwise (not served).
    # Phi-3's generate drops the cache once the sequence crosses original_max_position_embeddings
    # (its long factors then apply): 5.25 prefills the whole sequence again once, 5.17 runs every
    # later step from an empty cache.
    switch = reference.config.original_max_position_embeddings if arch == "phi3" else None
    assert prefills[0] == 0 and prefills[1:2] == ([] if switch is None else [switch + 1 - prompt])
    cpu_decode = device == "cpu" and dtype in (torch.float16, torch.bfloat16)
    served = steps if cpu_decode else len(prefills)  # one forward per new token
    assert calls.calls["attention"] == served * counts["attention"]
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
    difference = first_routing_difference(ref_log[: shared * per_step], our_log[: shared * per_step])
    assert_near_ties(difference)
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
    patched, reference, _ = patched_pair("qwen3_moe", torch.bfloat16)
    ids = random_ids(0, 1, 8, "cpu")
    with torch.inference_mode(), routing_log(reference) as ref_log, routing_log(patched) as our_log:
        want = greedy(reference, ids, 6)
        tokens, logits = _static_decode(patched, ids, 6, graph=False)
    _assert_decoding_follows(tokens, logits, want.sequences[0, 8:], want.logits, ref_log, our_log,
                             TOLERANCE[torch.bfloat16])


def _static_decode(model: Any, ids: torch.Tensor, steps: int, graph: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Greedy decoding with a StaticCache (its write position is a device tensor the cache
    advances itself), one token a step; with ``graph`` each step is one replay of a CUDA graph
    captured once, after an eager warm-up, on a static token buffer."""
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=ids.shape[1] + steps + 2)
    token_buffer = torch.zeros(1, 1, dtype=torch.long, device=ids.device)
    kw = {cache_keyword(model): cache, "use_cache": True}

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


@pytest.mark.parametrize("arch", ["phi3", "qwen3_moe", "deepseek_v3"])
def test_patched_decode_step_reads_nothing_back(arch: str) -> None:
    # What makes the step capturable (test_cuda_graph_decode_replays_eager on a GPU): LongRoPE's
    # choice of factors and the MoE routing stay on the device.
    from transformers import StaticCache

    patched, _, _ = patched_pair(arch, torch.bfloat16)
    cache = StaticCache(config=patched.config, max_cache_len=16)
    kw = {cache_keyword(patched): cache, "use_cache": True}
    ids = random_ids(0, 1, 8, "cpu")
    with torch.inference_mode():
        patched(ids, **kw)
        with HostReads() as host, TileOpsCalls() as calls:
            patched(ids[:, -1:], **kw)
    assert host.reads == []
    assert calls.calls["rope"] > 0 and calls.calls["rms_norm"] > 0


@requires_cuda
@pytest.mark.parametrize("arch", ["llama", "phi3", "qwen3_moe", "deepseek_v3"])
def test_cuda_graph_decode_replays_eager(arch: str) -> None:
    patched, reference, _ = patched_pair(arch, torch.bfloat16, "cuda")
    ids = random_ids(0, 1, 10, "cuda")
    steps = 8
    with torch.inference_mode():
        graph_tokens, graph_logits = _static_decode(patched, ids, steps, graph=True)
        with routing_log(reference) as ref_log, routing_log(patched) as our_log:
            want = greedy(reference, ids, steps)
            eager_tokens, eager_logits = _static_decode(patched, ids, steps, graph=False)
    # The graph replays the eager kernels on the same inputs.
    assert torch.equal(graph_tokens, eager_tokens)
    for a, b in zip(graph_logits, eager_logits):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    _assert_decoding_follows(eager_tokens, eager_logits, want.sequences[0, 10:], want.logits, ref_log,
                             our_log, TOLERANCE[torch.bfloat16])
