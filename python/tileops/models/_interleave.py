"""Interleaved timing of a case's modes (``python -m tileops.models interleave``).

``bench`` times the modes one after the other, so a host whose speed drifts over the run (the
compiled Llama-3-8B layer at 1024 tokens took 0.860 to 1.239 ms in three runs on H100 hosts) can
put its drift between two modes. Here every mode's module is built first: the unpatched and the
patched case as two instances with the same seeded weights (twice the memory), each compiled once
for the compiled modes. Then ``rounds`` rounds each time ``iters`` calls of every mode in turn
(CUDA events around each call and a synchronisation after it, as ``bench``; the wall clock on the
CPU). A (phase, mode) reports the median, the minimum and the spread of its rounds' medians, and
on CUDA the GPU work per call: the kernel time a ``torch.profiler`` run of 3 calls records, which
the host's share of the per-call time does not reach
(docs/perf/2026-12-06-h100-compiled-layer-host.md).
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tileops.models import _bench, _fp8
from tileops.models._timing import median_ms

MODES = ("unpatched eager", "unpatched compiled", "tileops eager", "tileops compiled")


@dataclass
class Interleaved:
    case: str
    phase: str  # "layer T=1024", "prefill T=2048", "decode ctx=2048"
    mode: str
    rounds: list[float]  # each round's median, ms
    gpu_ms: float | None = None  # kernel time per call (CUDA)

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)

    @property
    def best(self) -> float:
        return min(self.rounds)

    @property
    def spread(self) -> float:
        """(slowest - fastest round) / median: how far this mode's own rounds disagree."""
        return (max(self.rounds) - min(self.rounds)) / self.median


@contextlib.contextmanager
def _recompile_limit(entries: int) -> Iterator[None]:
    """Both instances share their forward's code object: dynamo keeps one entry per compiled
    mode and phase there, past its default limit of 8 with 3 phases."""
    config = torch._dynamo.config
    saved = config.recompile_limit
    config.recompile_limit = max(saved, entries)
    try:
        yield
    finally:
        config.recompile_limit = saved


def gpu_ms(fn: Callable[[], Any], after: Callable[[], Any] | None, calls: int = 3) -> float:
    """Kernel time per call of `fn` from a torch.profiler run of `calls` calls (CUDA)."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
            if after is not None:
                after()
        torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    total = sum(e.device_time_total for e in prof.events() if e.device_type == cuda)
    return total / calls / 1e3


def _modules(case: _bench.Case, opts: _bench.Options,
             modes: tuple[str, ...]) -> tuple[dict[str, nn.Module], nn.Module, Any]:
    """The module of every mode, and the unpatched instance with its config (the phases' source)."""
    from tileops.integrations.transformers import apply_tileops

    unpatched, config = _bench.build(case, opts)
    if case.fp8:
        _fp8.dequantize_experts(unpatched)  # bench's unpatched baseline: the checkpoint in bf16
    patched = None
    if any(m.startswith("tileops") for m in modes):
        patched, _ = _bench.build(case, opts)
        opts.log(f"  apply_tileops: {apply_tileops(patched, **_bench.apply_options(opts))}")
    source = {"unpatched": unpatched, "tileops": patched}
    out: dict[str, nn.Module] = {}
    for mode in modes:
        module = source[mode.split()[0]]
        out[mode] = torch.compile(module, dynamic=False) if mode.endswith("compiled") else module
    return out, unpatched, config


def run(case: _bench.Case, opts: _bench.Options, modes: tuple[str, ...], rounds: int) -> list[Interleaved]:
    """Every phase of `case` in `modes` (some of MODES; the command line checks them and the
    counts), timed in `rounds` interleaved rounds of opts.iters calls."""
    opts.log(f"{case.name}: building {', '.join(modes)}")
    torch._dynamo.reset()
    results: list[Interleaved] = []
    modules, unpatched, config = _modules(case, opts, modes)
    phases = _bench._phases(case, unpatched, config, opts)
    compiled = sum(m.endswith("compiled") for m in modes)
    with _recompile_limit(compiled * len(phases) + 8), torch.inference_mode():
        for phase in phases:
            calls = {mode: phase.make(module) for mode, module in modules.items()}
            for mode, (fn, after) in calls.items():  # warm-up, and each compiled mode's compilation
                opts.log(f"  {case.name}: {phase.name}: warming up {mode}")
                for _ in range(max(opts.warmup, 1)):
                    fn()
                    if after is not None:
                        after()
            times: dict[str, list[float]] = {mode: [] for mode in calls}
            for _ in range(rounds):
                for mode, (fn, after) in calls.items():
                    times[mode].append(median_ms(fn, opts.device, 0, opts.iters, after))
            for mode, (fn, after) in calls.items():
                work = gpu_ms(fn, after) if opts.device == "cuda" else None
                results.append(Interleaved(case.name, phase.name, mode, times[mode], work))
            opts.log(f"  {case.name}: {phase.name}: " + ", ".join(
                f"{r.mode} {r.median:.3f}" for r in results[-len(calls):]))
    del modules, unpatched
    torch._dynamo.reset()
    _bench._free(opts)
    return results


def _tenths(fraction: float) -> float:
    """A fraction in percent truncated to 0.1 toward zero (never rounded up), after dropping the
    binary representation's last digits (1.21 / 1.00 - 1 is 0.2099999...)."""
    return math.trunc(round(fraction * 1000.0, 6)) / 10.0


def _percent(change: float) -> str:
    """A relative change truncated to 0.1% toward zero."""
    return f"{_tenths(change):+.1f}%"


# A mode whose rounds spread by more than this makes the run a poor measurement of small changes.
NOISY_SPREAD = 0.10


def noise_note(results: list[Interleaved]) -> str:
    """A line for the report when some mode's rounds spread by more than NOISY_SPREAD (a busy or
    drifting host), else ""."""
    noisy = [r for r in results if r.spread > NOISY_SPREAD]
    if not noisy:
        return ""
    worst = max(noisy, key=lambda r: r.spread)
    return (f"Host noise: the rounds of {len(noisy)} of {len(results)} (phase, mode) pairs spread by more "
            f"than {NOISY_SPREAD:.0%} (up to {_tenths(worst.spread):.1f}%, {worst.phase}, {worst.mode}); "
            "changes within a spread are not measurements: rerun on a quieter host or with more rounds.")


def table(results: list[Interleaved]) -> str:
    """A markdown table: per (case, phase, mode) the rounds' median, minimum and spread, the GPU
    work, and the median against the unpatched mode of the same kind (eager or compiled), marked
    "within spread" when it is smaller than either mode's spread."""
    lines = ["| case | phase | mode | ms (median of rounds) | ms (min) | rounds | spread | GPU ms "
             "| vs unpatched |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    base = {(r.case, r.phase, r.mode.split()[1]): r for r in results if r.mode.startswith("unpatched")}
    for r in results:
        ref = base.get((r.case, r.phase, r.mode.split()[1]))
        change = ""
        if ref is not None and ref is not r:
            ratio = r.median / ref.median - 1.0
            within = abs(ratio) < max(r.spread, ref.spread)
            change = _percent(ratio) + (" (within spread)" if within else "")
        work = "" if r.gpu_ms is None else f"{r.gpu_ms:.3f}"
        lines.append(f"| {r.case} | {r.phase} | {r.mode} | {r.median:.3f} | {r.best:.3f} | {len(r.rounds)} "
                     f"| {_tenths(r.spread):.1f}% | {work} | {change} |")
    return "\n".join(lines)
