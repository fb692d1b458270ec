"""apply_tileops: the kinds, how a model's modules are matched to them, swapped and reported."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

import tileops
from tileops.integrations.transformers import _attention, _moe, _rms_norm, _rope
from tileops.integrations.transformers._architectures import LOOKS_LIKE, architecture_of, names
from tileops.integrations.transformers._common import Replacement

# What a kind decides for one module: a builder of its replacement (which returns the
# replacement and how many sites it serves), or the reason it is not served.
Builder = Callable[[], tuple[Replacement, int]]
Decide = Callable[[nn.Module, nn.Module, Any], "Builder | str"]


@dataclass(frozen=True)
class Kind:
    """One kind of module tileops serves.

    ``recognizes`` names the Architecture field holding the class this kind replaces (a module
    is the kind's when its class is exactly that class of a listed architecture). ``decide``
    gets (module, its parent, the model config). ``restore`` undoes what a replacement did
    beyond standing in its parent (the rope kind rebinds attention forwards).
    """

    name: str
    recognizes: str
    decide: Decide
    # the op classes the replacement calls (composites: their stages' ops serve it too)
    ops: tuple[str, ...] = ()
    restore: Callable[[Replacement, nn.Module], None] | None = None
    # whether compiled calls below apply_tileops's compiled_min_tokens trace transformers' code
    # (not the moe kind: transformers' experts loop is slower at every size)
    traced_when_small: bool = True

    def operators(self) -> frozenset[str]:
        """The names of the torch.ops.tileops operators that calls of this kind run."""
        found: set[str] = set()
        pending = list(self.ops)
        while pending:
            cls = getattr(tileops, pending.pop())
            found.update(name.split("::", 1)[1] for name in cls.compile_op_names)
            pending.extend(stage["op"] for stage in cls._meta.get("stages", []))
        return frozenset(found)


def _decide_rms_norm(module: nn.Module, parent: nn.Module, config: Any) -> Builder | str:
    why = _rms_norm.refusal(module)
    return why if why is not None else (lambda: (_rms_norm.TileOpsRMSNorm(module), 1))


def _decide_rope(module: nn.Module, parent: nn.Module, config: Any) -> Builder | str:
    why = _rope.refusal(module, parent)
    return why if why is not None else (lambda: _rope.replace(module, parent))


def _decide_moe(module: nn.Module, parent: nn.Module, config: Any) -> Builder | str:
    plan = _moe.plan(module, config)
    if isinstance(plan, str):
        return plan
    return lambda: (_moe.TileOpsMoE(module, plan), 1)


def _decide_attention(module: nn.Module, parent: nn.Module, config: Any) -> Builder | str:
    plan = _attention.plan(module, config)
    if isinstance(plan, str):
        return plan
    return lambda: (_attention.TileOpsAttention(module, plan), 1)


def _restore_rope(replacement: Replacement, parent: nn.Module) -> None:
    assert isinstance(replacement, _rope.TileOpsRotaryEmbedding)
    _rope.restore(replacement, parent)


def _restore_attention(replacement: Replacement, parent: nn.Module) -> None:
    assert isinstance(replacement, _attention.TileOpsAttention)
    _attention.restore(replacement)


# The kinds, in the order they are applied (docs/design/integrations.md, "Adding a kind").
KINDS: tuple[Kind, ...] = (
    Kind("rms_norm", "rms_norm", _decide_rms_norm, ("RMSNormFwdOp",)),
    Kind("rope", "rotary", _decide_rope, ("LongRoPEFwdOp",), _restore_rope),
    Kind("moe", "moe_block", _decide_moe, ("FusedMoEFwdOp",), traced_when_small=False),
    Kind("attention", "attention", _decide_attention, ("GroupedQueryAttentionVarlenFwdOp",),
         _restore_attention),
)


@dataclass(frozen=True)
class NotServed:
    """A module apply_tileops left as it was, and why."""

    path: str
    kind: str
    module: str
    reason: str


@dataclass
class Report:
    """What the last apply_tileops call on a model did."""

    replaced: dict[str, int]
    not_served: list[NotServed] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"tileops: replaced {', '.join(f'{k} {n}' for k, n in self.replaced.items())}"]
        for item in self.not_served:
            lines.append(f"  not served: {item.path} ({item.module}, {item.kind}): {item.reason}")
        return "\n".join(lines)


class TileOpsNotServedWarning(UserWarning):
    """apply_tileops left modules as they were (the report says which and why)."""


_REPORT_ATTRIBUTE = "_tileops_report"


def _selected(kinds: Iterable[str] | None) -> tuple[Kind, ...]:
    if kinds is None:
        return KINDS
    wanted = list(kinds)
    known = {k.name for k in KINDS}
    unknown = [k for k in wanted if k not in known]
    if unknown:
        raise tileops.UsageError(
            f"tileops: unknown kind(s) {', '.join(map(repr, unknown))}; kinds: {', '.join(sorted(known))}"
        )
    return tuple(k for k in KINDS if k.name in wanted)


def _kind_of(module: nn.Module, kinds: tuple[Kind, ...]) -> tuple[Kind | None, str | None]:
    """(the kind that recognizes the module's class, None) or (None, the name of a kind whose
    modules its class name looks like)."""
    if isinstance(module, Replacement):
        return None, None
    for kind in kinds:
        if architecture_of(type(module), kind.recognizes) is not None:
            return kind, None
    for kind in kinds:
        if LOOKS_LIKE[kind.name].search(type(module).__name__):
            return None, kind.name
    return None, None


def _config(model: nn.Module) -> Any:
    config = getattr(model, "config", None)
    text = getattr(config, "get_text_config", None)
    return text() if callable(text) else config


# Under torch.compile, calls of fewer tokens trace transformers' own norm, rotation and attention
# (apply_tileops's compiled_min_tokens). Timed interleaved on an H100, the compiled Llama-3-8B
# layer with tileops lost 3-9% at 1024-2048 tokens (host time, with less GPU work) and was at
# parity from 4096 (docs/design/integrations.md).
COMPILED_MIN_TOKENS = 4096


def apply_tileops(model: nn.Module, *, kinds: Iterable[str] | None = None,
                  strict: bool = False, compiled_min_tokens: int = COMPILED_MIN_TOKENS) -> dict[str, int]:
    """Swaps, in place, the modules of a transformers model that tileops serves for tileops-backed
    ones; returns how many of each kind it replaced ({"rms_norm": n, "rope": n, "moe": n,
    "attention": n}).

    ``kinds`` limits the kinds applied. Modules of a served class that tileops cannot serve (an
    unsupported option, a dtype the kernel refuses) stay as they are: they are listed by
    :func:`tileops_report` and in a TileOpsNotServedWarning, or, with ``strict=True``, raise a
    UsageError before anything is changed. The replacements run transformers' own forward for
    calls tileops cannot serve (autograd, an input dtype other than the weights'), so a patched
    model computes what it computed before, within the dtype's rounding. Applying twice changes
    nothing more.

    ``compiled_min_tokens``: under torch.compile, calls of the rms_norm, rope and attention kinds
    with fewer tokens than this trace transformers' own code, which inductor fuses with the
    layer's other small kernels: a compiled layer that small is bound by the host, where one
    custom-operator call costs more than a fused kernel. Eager calls, CUDA graphs of eager calls
    and the moe kind use tileops at every size; 0 uses tileops for every compiled call too.
    See docs/design/integrations.md.
    """
    if isinstance(compiled_min_tokens, bool) or not isinstance(compiled_min_tokens, int) \
            or compiled_min_tokens < 0:
        raise tileops.UsageError(
            f"tileops: apply_tileops(compiled_min_tokens={compiled_min_tokens!r}): an int >= 0 is expected")
    selected = _selected(kinds)
    config = _config(model)
    decisions: list[tuple[Kind, str, nn.Module, str, nn.Module, Builder]] = []
    not_served: list[NotServed] = []
    for parent_path, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            path = f"{parent_path}.{child_name}" if parent_path else child_name
            kind, looks_like = _kind_of(child, selected)
            if looks_like is not None:
                not_served.append(NotServed(path, looks_like, type(child).__name__,
                                            f"not a class tileops serves (architectures: {', '.join(names())})"))
                continue
            if kind is None:
                continue
            decided = kind.decide(child, parent, config)
            if isinstance(decided, str):
                not_served.append(NotServed(path, kind.name, type(child).__name__, decided))
            else:
                decisions.append((kind, path, parent, child_name, child, decided))
    if strict and not_served:
        raise tileops.UsageError(
            "tileops: apply_tileops(strict=True): modules not served, nothing changed:\n"
            + "\n".join(f"  {n.path} ({n.module}, {n.kind}): {n.reason}" for n in not_served)
        )
    counts = {kind.name: 0 for kind in selected}
    order = {kind.name: i for i, kind in enumerate(KINDS)}
    decisions.sort(key=lambda d: order[d[0].name])  # stable: kind by kind, in KINDS order
    for kind, path, parent, child_name, child, build in decisions:
        try:
            replacement, served = build()
        except tileops.Error as exc:  # an op refused its parameters
            not_served.append(NotServed(path, kind.name, type(child).__name__, str(exc)))
            continue
        replacement.compiled_min_tokens = compiled_min_tokens if kind.traced_when_small else 0
        setattr(parent, child_name, replacement)
        counts[kind.name] += served
    report = Report(dict(counts), not_served)
    object.__setattr__(model, _REPORT_ATTRIBUTE, report)
    if not_served:
        warnings.warn(report.summary(), TileOpsNotServedWarning, stacklevel=2)
    return counts


def tileops_report(model: nn.Module) -> Report:
    """The report of the last apply_tileops call on `model`."""
    report = vars(model).get(_REPORT_ATTRIBUTE)
    if report is None:
        raise tileops.UsageError("tileops: tileops_report(model) before apply_tileops(model)")
    return report


def remove_tileops(model: nn.Module) -> dict[str, int]:
    """Puts back every module apply_tileops replaced (and the attention forwards the rope and
    attention kinds rebound); returns how many replacements of each kind it removed."""
    counts = {kind.name: 0 for kind in KINDS}
    restore = {kind.name: kind.restore for kind in KINDS}
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, Replacement):
                undo = restore.get(child.kind)
                if undo is not None:
                    undo(child, parent)
                setattr(parent, child_name, child.hf_module)
                counts[child.kind] = counts.get(child.kind, 0) + 1
    vars(model).pop(_REPORT_ATTRIBUTE, None)
    return counts
