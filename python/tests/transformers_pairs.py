"""Tiny random-weight transformers models of every served architecture, patched with
apply_tileops, against the same models unpatched: the pairs, inputs, tolerances and comparisons
that the integration tests share (test_integrations_transformers.py, test_integrations_generate.py,
test_integrations_compile.py).

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
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from tileops.integrations.transformers import KINDS, TileOpsNotServedWarning, apply_tileops  # noqa: E402
from tileops.models import KINDS as MODEL_KINDS, tiny_model  # noqa: E402

TOLERANCE = {torch.float32: 2.0**-16, torch.bfloat16: 2.0**-5}
FP8_TOLERANCE = 2.0**-4
NEAR_TIE = 2.0**-4
DTYPES = [torch.float32, torch.bfloat16]
SEEDS = 8


def random_ids(seed: int, batch: int, length: int, device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randint(3, 128, (batch, length), generator=g).to(device)


def patched_pair(arch: str, dtype: torch.dtype, device: str = "cpu", compiled_min_tokens: int | None = None,
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


def expected_kinds(arch: str, dtype: torch.dtype, device: str = "cpu") -> tuple[str, ...]:
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
        # `_query` is the ops' bookkeeping (last calls, releases), not a computation: the garbage
        # collector may release an earlier test's ops inside the mode.
        if namespace == "tileops" and name.split(".")[0] != "_query":
            self.calls[self.kind_of.get(name.split(".")[0], name)] += 1
            self.pointers.update(a.data_ptr() for a in args if isinstance(a, torch.Tensor))
        return func(*args, **(kwargs or {}))


# ---- routing near ties --------------------------------------------------------------------------


@dataclass
class RouterCall:
    module: Any
    logits: torch.Tensor
    ids: torch.Tensor


def routers(model: Any) -> list[Any]:
    return [m for m in model.modules() if type(m).__name__.endswith(("TopKRouter", "TopkRouter"))]


@contextmanager
def routing_log(model: Any) -> Iterator[list[RouterCall]]:
    """Records every router call (a tileops MoE runs the router module when it is hooked)."""
    log: list[RouterCall] = []

    def hook(module: Any, args: Any, out: Any) -> None:
        log.append(RouterCall(module, out[0].detach().double().cpu(), out[2].detach().cpu()))

    handles = [r.register_forward_hook(hook) for r in routers(model)]
    try:
        yield log
    finally:
        for h in handles:
            h.remove()


def margins(call: RouterCall) -> torch.Tensor:
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


def first_routing_difference(reference: list[RouterCall], patched: list[RouterCall]) -> tuple[int, list[float]] | None:
    """The first router call (in execution order) where the two runs may route differently, with
    the reference margins of the tokens whose chosen experts differ and a 0 for each exact tie in
    the patched run's router scores (there the recorded choice is torch.topk's, the op's may be
    the other expert: tileops takes the lower id); None when they route alike. Later calls see
    inputs that this difference changed, so only the first one must be a near tie."""
    assert len(reference) == len(patched)
    for i, (r, p) in enumerate(zip(reference, patched)):
        differ = (r.ids.sort(-1).values != p.ids.sort(-1).values).any(-1)
        flips = margins(r)[differ].tolist() + [0.0] * int((margins(p) == 0).sum())
        if flips:
            return i, flips
    return None


def assert_near_ties(difference: tuple[int, list[float]] | None) -> None:
    if difference is not None:
        assert all(m < NEAR_TIE for m in difference[1]), (
            f"router call {difference[0]} routes differently where it is no near tie: {difference[1]}")


def assert_logits_close(got: torch.Tensor, want: torch.Tensor, tolerance: float) -> None:
    scale = want.abs().max().item()
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=tolerance * scale)


def compare_logits(patched: Any, reference: Any, dtype: torch.dtype, device: str, tolerance: float,
                    batch: int = 2, length: int = 16) -> None:
    """Patched against reference logits on the first input seed without a routing near tie."""
    for seed in range(SEEDS):
        ids = random_ids(seed, batch, length, device)
        with torch.inference_mode(), routing_log(reference) as ref_log, routing_log(patched) as our_log:
            want = reference(ids).logits
            got = patched(ids).logits
        difference = first_routing_difference(ref_log, our_log)
        assert_near_ties(difference)
        if difference is None:
            assert_logits_close(got, want, tolerance)
            return
    pytest.fail(f"every one of {SEEDS} inputs had a routing near tie")


def greedy(model: Any, ids: torch.Tensor, steps: int) -> Any:
    return model.generate(ids, max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                          output_logits=True, return_dict_in_generate=True)


def cache_keyword(model: Any) -> str:
    """The forward's cache argument: `cache` from transformers 5.25 on, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class HostReads(TorchDispatchMode):
    """Records the ops that read a tensor's value back to the host (a CUDA graph cannot)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.name() in ("aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal"):
            self.reads.append(func.name())
        return func(*args, **(kwargs or {}))
