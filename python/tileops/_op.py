"""The base classes of the Python op classes (generated into tileops.ops from the manifest).

An op with a compile boundary (a call-time tensor input, no composition) lives in C++: the
Python object holds its instance key, and each call is one custom operator of the
``torch.ops.tileops`` namespace (one per effect branch), so that under ``torch.compile`` the op
is one opaque node whose fake comes from the manifest. A composite op has no operator of its
own: its ``forward`` (tileops._composites) calls its stages' ops, whose nodes appear in the
traced graph, as the C++ composite does.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar

import torch

from tileops.errors import ArgumentTypeError, Error, UsageError, translate

_MANIFEST: dict[str, dict[str, Any]] = {
    entry["name"]: entry
    for entry in json.loads(resources.files("tileops").joinpath("_manifest.json").read_text())
}
# Instance key -> (manifest entry, parameters): what a fake needs. Keys are never reused, so an
# entry may outlive its op (a compiled artefact keeps the key as a constant).
_LIVE: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
_LIVE_LOCK = threading.Lock()


def manifest_entry(name: str) -> dict[str, Any]:
    """The generated manifest description of op class `name`."""
    return _MANIFEST[name]


def live_instance(key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The manifest entry and parameters of the instance registered under `key`."""
    try:
        return _LIVE[key]
    except KeyError:
        raise UsageError(f"tileops: no op instance has key '{key}'") from None


def _raise_translated(exc: RuntimeError) -> None:
    err = translate(exc)
    if err is None:
        raise exc
    raise err from None


def _encode(meta: dict[str, Any], params: dict[str, Any]) -> tuple[list[str], list[str], list[torch.Tensor | None]]:
    """Parameters as the extension's _construct takes them (typed text, tensors aside)."""
    names: list[str] = []
    values: list[str] = []
    tensors: list[torch.Tensor | None] = []
    for p in meta["params"]:
        name, kind = p["name"], p["type"]
        value = params[name]
        names.append(name)
        if p["is_tensor"]:
            if value is not None and not isinstance(value, torch.Tensor):
                raise ArgumentTypeError(
                    f"tileops: {meta['name']}: parameter '{name}' must be a torch.Tensor, got "
                    f"{type(value).__name__}"
                )
            values.append(f"t:{len(tensors)}")
            # The C++ ops read construction-time tensors on the host when they are built (e.g.
            # LongRoPE's rescale_factors); a torch user's copy often lives on the GPU.
            tensors.append(value.detach().cpu() if value is not None else None)
        elif value is None:
            values.append("n:")
        elif kind.startswith(("list[", "tuple[")):
            if isinstance(value, (str, bytes)) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                raise ArgumentTypeError(
                    f"tileops: {meta['name']}: parameter '{name}' must be a list of ints, got {value!r}"
                )
            values.append("l:" + ",".join(str(int(v)) for v in value))
        elif kind.startswith("float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ArgumentTypeError(
                    f"tileops: {meta['name']}: parameter '{name}' must be a float, got {value!r}"
                )
            values.append("f:" + repr(float(value)))
        elif kind.startswith("int"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentTypeError(
                    f"tileops: {meta['name']}: parameter '{name}' must be an int, got {value!r}"
                )
            values.append(f"i:{value}")
        elif kind.startswith("bool"):
            if not isinstance(value, bool):
                raise ArgumentTypeError(
                    f"tileops: {meta['name']}: parameter '{name}' must be a bool, got {value!r}"
                )
            values.append("b:1" if value else "b:0")
        else:
            if not isinstance(value, str):
                raise ArgumentTypeError(
                    f"tileops: {meta['name']}: parameter '{name}' must be a str, got {value!r}"
                )
            values.append("s:" + value)
    return names, values, tensors


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a call record."""

    shape: tuple[int, ...]
    dtype: str
    role: str
    reads: int
    writes: int


@dataclass(frozen=True)
class LastCall:
    """The record of an op's last completed call (mirrors C++ SignatureCall)."""

    device: str
    has_out: bool
    indices: dict[str, str]
    tensors: dict[str, TensorInfo]
    written: tuple[int, ...]
    stages: dict[str, tuple[LastCall, ...]] = field(default_factory=dict)

    @staticmethod
    def parse(lines: list[str]) -> LastCall:
        device, has_out = "", False
        indices: dict[str, str] = {}
        tensors: dict[str, TensorInfo] = {}
        written: list[int] = []
        for line in lines:
            kind, _, rest = line.partition(":")
            if kind == "device":
                device = rest
            elif kind == "has_out":
                has_out = rest == "1"
            elif kind == "index":
                name, _, value = rest.partition("=")
                indices[name] = value
            elif kind == "tensor":
                name, role, dtype, reads, writes, dims = rest.split(":")
                shape = tuple(int(d) for d in dims.split(",")) if dims else ()
                tensors[name] = TensorInfo(shape, dtype, role, int(reads), int(writes))
            elif kind == "written":
                written.append(int(rest))
        return LastCall(device, has_out, indices, tensors, tuple(written))


class _OpBase:
    compile_op_names: ClassVar[tuple[str, ...]] = ()
    # Eager calls completed: a composite files under a stage only the sub-ops called by this call.
    _completed: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__name__ in _MANIFEST:  # the generated op classes, not the two bases
            cls._meta = manifest_entry(cls.__name__)

    _meta: ClassVar[dict[str, Any]]

    # Copies share the instance: its parameters are fixed at construction, and a second Python
    # object with the same instance key would release the C++ instance twice (a deepcopied
    # transformers model holding ops keeps working after either copy is dropped).
    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def _check_tensors(self, inputs: tuple[Any, ...], out: Any) -> None:
        for decl, value in zip(self._meta["inputs"], inputs):
            if value is None and decl["optional"]:
                continue
            if not isinstance(value, torch.Tensor):
                raise ArgumentTypeError(
                    f"tileops: {self._meta['name']}: input '{decl['name']}' must be a "
                    f"torch.Tensor, got {type(value).__name__}"
                )
        if out is not None and not isinstance(out, torch.Tensor):
            raise ArgumentTypeError(
                f"tileops: {self._meta['name']}: out must be a torch.Tensor, got {type(out).__name__}"
            )


class BoundaryOp(_OpBase):
    """An op that is one custom operator per effect branch (see the module doc)."""

    def __init__(self, params: dict[str, Any], *, target: str | None = None) -> None:
        meta = self._meta
        names, values, tensors = _encode(meta, params)
        if target is not None:
            names.append("target")
            values.append("s:" + target)
        try:
            key = torch.ops.tileops._construct(meta["name"], names, values, tensors)
        except RuntimeError as exc:
            _raise_translated(exc)
        self._key: str = key
        self._params = dict(params)
        ops = [getattr(torch.ops.tileops, c["name"].split("::", 1)[1]).default for c in meta["compile_ops"]]
        self._alloc_op = ops[0]
        self._out_op = ops[1] if len(ops) > 1 else None
        self._buffer = next((i for i, o in enumerate(meta["outputs"]) if o["buffer_out"]), None)
        with _LIVE_LOCK:
            _LIVE[key] = (meta, self._params)

    def __del__(self) -> None:
        key = getattr(self, "_key", None)
        if key is not None:
            try:
                torch.ops.tileops._query(key, "release")
            except Exception:  # noqa: BLE001 (interpreter shutdown: nothing to release into)
                pass

    @property
    def instance_key(self) -> str:
        """The key the custom operators find this instance by ("RMSNormFwdOp#3")."""
        return self._key

    def __repr__(self) -> str:
        args = ", ".join(
            f"{k}={v!r}" for k, v in self._params.items() if not isinstance(v, torch.Tensor)
        )
        return f"{type(self).__name__}({args})  # {self._key}"

    def _invoke(self, inputs: tuple[Any, ...], out: torch.Tensor | None) -> Any:
        if out is None:
            fn, args = self._alloc_op, (self._key, *inputs)
        else:
            fn, args = self._out_op, (self._key, *inputs, out)
        if torch.compiler.is_compiling():
            self._check_tensors(inputs, out)
            result = fn(*args)
        else:
            # The eager fast path checks nothing in Python (the C++ call checks the signature):
            # only a failed call looks for a non-tensor argument, to raise the typed error.
            try:
                result = fn(*args)
            except (RuntimeError, TypeError) as exc:
                self._check_tensors(inputs, out)
                if isinstance(exc, RuntimeError):
                    _raise_translated(exc)
                raise
            self._completed += 1
        if out is None:
            return result
        n_outputs = len(self._meta["outputs"])
        if n_outputs == 1:
            return out
        rest = list(result) if isinstance(result, (tuple, list)) else [result]
        rest.insert(self._buffer, out)
        return tuple(rest)

    def _query(self, what: str) -> list[str]:
        try:
            return list(torch.ops.tileops._query(self._key, what))
        except RuntimeError as exc:
            _raise_translated(exc)
            raise

    @property
    def last_call(self) -> LastCall:
        """The record of the last completed call; UsageError before any."""
        return LastCall.parse(self._query("last_call"))

    def eval_roofline(self) -> tuple[float, float]:
        """(flops, bytes) of the last call, from the manifest's roofline."""
        flops, nbytes = self._query("roofline")
        return float(flops), float(nbytes)

    def request_tune(self) -> None:
        """Puts the op in tuned mode (its kernels tune now or at the launch that builds them)."""
        self._query("request_tune")

    def kernel_config(self) -> str | None:
        """The configuration of the first configured kernel, or None."""
        lines = self._query("kernel_config")
        return lines[0] if lines else None

    def iter_kernels(self) -> list[str]:
        """The configurations of every kernel the op has built (one string per kernel)."""
        return self._query("iter_kernels")

    @property
    def serving_target(self) -> str | None:
        """The selected target ("BUILTIN" for the in-tree kernels), None before selection."""
        lines = self._query("serving_target")
        return lines[0] if lines else None


# Input signatures a composite remembers as checked (a serving loop sees one per token count).
_CHECKED_MAX = 1024


class CompositeOp(_OpBase):
    """An op composed of other ops' stages; traced, its stages' custom operators are the nodes."""

    def __init__(self, params: dict[str, Any], *, target: str | None = None) -> None:
        from tileops import _composites

        self._params = dict(params)
        self._target = target
        self._held: dict[tuple[str, str | None], Any] = {}
        self._checked: set[tuple[Any, ...]] = set()
        self._tune = False
        self._last: LastCall | None = None
        _composites.construct(self)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})"

    def delegate_for(self, stage: str, identity: str | None, cls: type, **params: Any) -> Any:
        """The sub-op held for (stage, identity), built once (with this op's target)."""
        if stage not in [s["name"] for s in self._meta["stages"]]:
            raise UsageError(f"tileops: {self._meta['name']}: unknown stage '{stage}'")
        held = self._held.get((stage, identity))
        if held is None:
            held = cls(**params, target=self._target)
            if self._tune:
                held.request_tune()
            self._held[(stage, identity)] = held
        return held

    def held_delegates(self) -> list[Any]:
        """Held sub-ops in stage order, then holding order."""
        order = [s["name"] for s in self._meta["stages"]]
        return [op for (stage, _), op in sorted(self._held.items(), key=lambda kv: order.index(kv[0][0]))]

    def _invoke(self, inputs: tuple[Any, ...], out: torch.Tensor | None) -> Any:
        from tileops import _composites, _shapes

        self._check_tensors(inputs, out)
        if not torch.compiler.is_compiling():
            # No C++ call checks a composite's signature; traced, its stages' operators check theirs.
            # The check reads only shapes, dtypes and presence: once per distinct combination.
            key = tuple(None if t is None else (tuple(t.shape), t.dtype) for t in inputs)
            if key not in self._checked:
                _shapes.check_call(self._meta, self._params, inputs)
                if len(self._checked) >= _CHECKED_MAX:
                    self._checked.clear()
                self._checked.add(key)
        before = {id(op): op._completed for op in self._held.values()}
        result = _composites.forward(self, inputs, out)
        if not torch.compiler.is_compiling():
            self._completed += 1
            called = [(s, op) for (s, _), op in self._held.items()
                      if op._completed != before.get(id(op), 0)]
            self._last = LastCall(
                device=str(inputs[0].device), has_out=out is not None, indices={}, tensors={},
                written=(), stages={
                    stage: tuple(op.last_call for s, op in called if s == stage)
                    for stage in (st["name"] for st in self._meta["stages"])
                },
            )
        return result

    @property
    def last_call(self) -> LastCall:
        """The stages' records of the last call (each stage: the last calls of its sub-ops)."""
        if self._last is None:
            raise UsageError(f"tileops: {self._meta['name']}: last_call before any completed call")
        return self._last

    def eval_roofline(self) -> tuple[float, float]:
        """(flops, bytes) summed over the stages' last calls."""
        flops = nbytes = 0.0
        for op in self.held_delegates():
            f, b = op.eval_roofline()
            flops, nbytes = flops + f, nbytes + b
        return flops, nbytes

    def request_tune(self) -> None:
        self._tune = True
        for op in self.held_delegates():
            op.request_tune()

    def iter_kernels(self) -> list[str]:
        return [k for op in self.held_delegates() for k in op.iter_kernels()]

    def kernel_config(self) -> str | None:
        kernels = self.iter_kernels()
        return next((k for k in kernels if k), None)


__all__ = ["BoundaryOp", "CompositeOp", "Error", "LastCall", "TensorInfo"]
