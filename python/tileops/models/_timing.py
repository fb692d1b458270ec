"""Timing for the models bench: the median of per-iteration times, and a profiled run that splits
the device time by op kind (rms_norm, rope, moe, attention; the rest is "other")."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch import nn

# Ranges the split reads back (profiler events of these names).
RANGE = "tileops.bench/"
SPLIT_KINDS = ("rms_norm", "rope", "moe", "attention")
# Kinds timed by the functions the attention modules call, not by a module: the attention module
# also projects, rotates and updates the cache (the rope kind's rotary module is timed too, and
# its rotation functions).
FUNCTION_KINDS = ("attention",)


def median_ms(fn: Callable[[], Any], device: str, warmup: int, iters: int,
              after: Callable[[], Any] | None = None) -> float:
    """The median time of one call of `fn` in ms: CUDA events around each call on the GPU, the
    wall clock on the CPU, after `warmup` calls; `after` runs after each call, untimed."""
    for _ in range(warmup):
        fn()
        if after is not None:
            after()
    times = []
    for _ in range(iters):
        if device == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        if after is not None:
            after()
    return statistics.median(times)


def _kind_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """The modules whose forward is one kind's work, patched (tileops) or not (transformers)."""
    from tileops.integrations.transformers import KINDS, Replacement
    from tileops.integrations.transformers._architectures import architecture_of

    for m in model.modules():
        if isinstance(m, Replacement):
            if m.kind not in FUNCTION_KINDS:
                yield m.kind, m
            continue
        for kind in KINDS:
            if kind.name not in FUNCTION_KINDS and architecture_of(type(m), kind.recognizes) is not None:
                yield kind.name, m


class _RangedInterface:
    """An attention interface whose functions run inside a profiler range of `kind`."""

    def __init__(self, interface: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        self._interface, self._wrap = interface, wrap

    def get_interface(self, implementation: str, default: Callable[..., Any]) -> Callable[..., Any]:
        return self._wrap(self._interface.get_interface(implementation, default))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._interface, name)


@contextmanager
def kind_ranges(model: nn.Module) -> Iterator[None]:
    """Profiler ranges named RANGE + kind around every kind's module, and around the rotation
    and attention functions the attention modules call (transformers' or this model's tileops
    ones); for the unpatched model the latter wrap the modeling module's globals, restored on
    exit."""
    from tileops.integrations.transformers._architectures import architecture_of
    from tileops.integrations.transformers._attention import INTERFACE
    from tileops.integrations.transformers._common import unwrapped
    from tileops.integrations.transformers._rebind import forward_globals
    from tileops.integrations.transformers._rope import rotary_functions

    def wrapped(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            with torch.profiler.record_function(RANGE + kind):
                return fn(*args, **kwargs)
        return run

    handles: list[Any] = []
    restore: list[tuple[dict[str, Any], str, Any]] = []
    open_ranges: dict[int, list[Any]] = {}

    def enter(kind: str) -> Callable[..., None]:
        def pre(module: nn.Module, args: Any) -> None:
            ctx = torch.profiler.record_function(RANGE + kind)
            ctx.__enter__()
            open_ranges.setdefault(id(module), []).append(ctx)
        return pre

    def leave(module: nn.Module, args: Any, out: Any) -> None:
        open_ranges[id(module)].pop().__exit__(None, None, None)

    try:
        for kind, m in _kind_modules(model):
            handles.append(m.register_forward_pre_hook(enter(kind)))
            handles.append(m.register_forward_hook(leave))
        for m in model.modules():
            attn = unwrapped(m)
            if architecture_of(type(attn), "attention") is None:
                continue
            functions = [(namespace, name, "rope") for namespace, name in rotary_functions(attn)]
            namespace = forward_globals(attn)
            if INTERFACE in namespace:
                functions.append((namespace, INTERFACE, "attention"))
            for namespace, name, kind in functions:
                if any(ns is namespace and n == name for ns, n, _ in restore):
                    continue
                restore.append((namespace, name, namespace[name]))
                if kind == "attention":
                    namespace[name] = _RangedInterface(namespace[name], lambda fn: wrapped("attention", fn))
                else:
                    namespace[name] = wrapped(kind, namespace[name])
        yield
    finally:
        for h in handles:
            h.remove()
        for namespace, name, fn in restore:
            namespace[name] = fn


def split_ms(fn: Callable[[], Any], model: nn.Module, device: str, iters: int = 3,
             after: Callable[[], Any] | None = None) -> dict[str, float]:
    """Per call, the device time (CUDA kernels; CPU: the ops' CPU time) under each kind's ranges
    and the rest ("other"), from a profiled run of `iters` calls after one warm-up call; `after`
    runs after each call, outside the ranges."""
    fn()
    if after is not None:
        after()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with ExitStack() as stack:
        stack.enter_context(kind_ranges(model))
        prof = stack.enter_context(torch.profiler.profile(activities=activities))
        for _ in range(iters):
            with torch.profiler.record_function(RANGE + "total"):
                fn()
            if after is not None:
                after()
        if device == "cuda":
            torch.cuda.synchronize()
    sums = dict.fromkeys((*SPLIT_KINDS, "total"), 0.0)
    for event in prof.events():
        if not event.name.startswith(RANGE):
            continue
        kind = event.name[len(RANGE):]
        if kind in sums and not _inside_same_kind(event, kind):
            us = event.device_time_total if device == "cuda" else event.cpu_time_total
            sums[kind] += us / 1e3 / iters
    split = {k: sums[k] for k in SPLIT_KINDS}
    split["other"] = max(0.0, sums["total"] - sum(split.values()))
    return split


def _inside_same_kind(event: Any, kind: str) -> bool:
    """A range nested in another of its kind (a rotation called inside the rope range) counts once."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == RANGE + kind:
            return True
        parent = parent.cpu_parent
    return False
