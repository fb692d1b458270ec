"""The base classes of the Python op classes (generated into tileops.ops from the manifest).

Every Python op object stands for one C++ instance, found by its instance key: constructed from
Python (the object owns it and releases it when collected) or held by a C++ composite (the object
wraps it and keeps its composite's object alive). So construction checks, records, rooflines,
targets, tuning and the held sub-ops are the C++ base class's.

An op with a compile boundary (a call-time tensor input, no composition) is one custom operator
of the ``torch.ops.tileops`` namespace per effect branch, so that under ``torch.compile`` the op
is one opaque node whose fake comes from the manifest. A composite op has no operator of its
own: its wiring (tileops._composites) calls the held stages' ops, whose nodes appear in the
traced graph. Eagerly, the wiring runs inside the C++ composite's open call (signature check and
target selection first, result check and record after, undone on failure), and the stages'
calls are filed under their stages there, as inside the C++ composite's forward
(docs/design/torch-boundary.md).
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

_EXT = torch.ops.tileops


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


def _encode_value(op: str, name: str, kind: str, value: Any, tensors: list[torch.Tensor | None]) -> str:
    """One parameter as the extension takes it (typed text; a tensor goes into `tensors`)."""
    def bad(what: str) -> ArgumentTypeError:
        return ArgumentTypeError(f"tileops: {op}: parameter '{name}' must be {what}, got {value!r}")

    if kind == "tensor":
        if value is not None and not isinstance(value, torch.Tensor):
            raise ArgumentTypeError(
                f"tileops: {op}: parameter '{name}' must be a torch.Tensor, got {type(value).__name__}"
            )
        # The C++ ops read construction-time tensors on the host when they are built (e.g.
        # LongRoPE's rescale_factors); a torch user's copy often lives on the GPU.
        tensors.append(value.detach().cpu() if value is not None else None)
        return f"t:{len(tensors) - 1}"
    if value is None:
        return "n:"
    if kind.startswith(("list[", "tuple[")):
        if isinstance(value, (str, bytes)) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise bad("a list of ints")
        return "l:" + ",".join(str(int(v)) for v in value)
    if kind.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a float")
        return "f:" + repr(float(value))
    if kind.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an int")
        return f"i:{value}"
    if kind.startswith("bool"):
        if not isinstance(value, bool):
            raise bad("a bool")
        return "b:1" if value else "b:0"
    if not isinstance(value, str):
        raise bad("a str")
    return "s:" + value


def _encode(meta: dict[str, Any], params: dict[str, Any]) -> tuple[list[str], list[str], list[torch.Tensor | None]]:
    """Parameters as the extension's _construct takes them: the declared ones by their declared
    kind; an undeclared name by its value's type, for C++ to refuse by name."""
    declared = {p["name"]: ("tensor" if p["is_tensor"] else p["type"]) for p in meta["params"]}
    by_type = {bool: "bool", int: "int", float: "float", list: "list[", tuple: "tuple["}
    names: list[str] = []
    values: list[str] = []
    tensors: list[torch.Tensor | None] = []
    for name, value in params.items():
        kind = declared.get(name) or (
            "tensor" if isinstance(value, torch.Tensor) else by_type.get(type(value), "str"))
        names.append(name)
        values.append(_encode_value(meta["name"], name, kind, value, tensors))
    return names, values, tensors


def _decode(text: str) -> Any:
    """A parameter value as the extension's "params" query writes it."""
    kind, _, body = text.partition(":")
    if kind == "i":
        return int(body)
    if kind == "f":
        return float(body)
    if kind == "b":
        return body == "1"
    if kind == "l":
        return [int(v) for v in body.split(",")] if body else []
    if kind in ("s", "d"):
        return body
    return None  # "n:", and tensors and injected objects, which stay on the C++ side


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
    """The record of an op's last completed call (mirrors C++ SignatureCall): solved indices,
    tensors, written inputs and, for a composite, each stage's sub-op records of that call."""

    device: str
    has_out: bool
    indices: dict[str, str]
    tensors: dict[str, TensorInfo]
    written: tuple[int, ...]
    stages: dict[str, tuple[LastCall, ...]] = field(default_factory=dict)

    @staticmethod
    def parse(lines: list[str]) -> LastCall:
        record, rest = LastCall._parse(lines, 0)
        if rest != len(lines):
            raise UsageError(f"tileops: unreadable call record line '{lines[rest]}'")
        return record

    @staticmethod
    def _parse(lines: list[str], at: int) -> tuple[LastCall, int]:
        device, has_out = "", False
        indices: dict[str, str] = {}
        tensors: dict[str, TensorInfo] = {}
        written: list[int] = []
        stages: dict[str, tuple[LastCall, ...]] = {}
        while at < len(lines):
            kind, _, rest = lines[at].partition(":")
            if kind == "call":  # "call:end" closes this record; "call:begin" is read below
                break
            at += 1
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
            elif kind == "stage":
                stage, _, count = rest.rpartition(":")
                records = []
                for _ in range(int(count)):
                    sub, at = LastCall._parse(lines, at + 1)  # past "call:begin"
                    records.append(sub)
                    at += 1  # past "call:end"
                stages[stage] = tuple(records)
        return LastCall(device, has_out, indices, tensors, tuple(written), stages), at


class _OpBase:
    """One C++ instance, by its key: construction, introspection and the held sub-ops."""

    compile_op_names: ClassVar[tuple[str, ...]] = ()
    _meta: ClassVar[dict[str, Any]]
    _key: str
    _params: dict[str, Any]
    # The composite object holding this instance (None: this object owns its instance).
    _holder: _OpBase | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__name__ in _MANIFEST:  # the generated op classes, not the bases
            cls._meta = manifest_entry(cls.__name__)

    def __init__(self, params: dict[str, Any], *, target: str | None = None) -> None:
        meta = self._meta
        names, values, tensors = _encode(meta, params)
        if target is not None:
            names.append("target")
            values.append("s:" + target)
        try:
            key = _EXT._construct(meta["name"], names, values, tensors)
        except RuntimeError as exc:
            _raise_translated(exc)
        self._key = key
        self._holder = None
        self._params = dict(params)
        self._setup()

    @classmethod
    def _wrap_held(cls, key: str, holder: _OpBase) -> _OpBase:
        """The object of an instance `holder`'s C++ instance holds (its key registered)."""
        self = cls.__new__(cls)
        self._key = key
        self._holder = holder  # keeps the holder, which keeps the C++ instance, alive
        self._params = {
            name: _decode(value)
            for name, _, value in (line.partition("=") for line in self._query("params"))
        }
        self._setup()
        return self

    def _setup(self) -> None:
        self._children: dict[str, _OpBase] = {}
        self._children_lock = threading.Lock()
        with _LIVE_LOCK:
            _LIVE[self._key] = (self._meta, self._params)

    def __del__(self) -> None:
        key = getattr(self, "_key", None)
        if key is not None and getattr(self, "_holder", None) is None:
            try:
                _EXT._query(key, "release")
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

    def _query(self, what: str) -> list[str]:
        try:
            return list(_EXT._query(self._key, what))
        except RuntimeError as exc:
            _raise_translated(exc)
            raise

    def _child(self, key: str) -> _OpBase:
        """The object of the held sub-op registered under `key`, made once."""
        with self._children_lock:
            child = self._children.get(key)
            if child is None:
                from tileops import ops

                cls = getattr(ops, key.partition("#")[0])
                child = cls._wrap_held(key, self)
                self._children[key] = child
            return child

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

    @property
    def last_call(self) -> LastCall:
        """The record of the last completed call; UsageError before any."""
        return LastCall.parse(self._query("last_call"))

    def eval_roofline(self) -> tuple[float, float]:
        """(flops, bytes) of the last call, from the manifest's roofline (a composite's own)."""
        flops, nbytes = self._query("roofline")
        return float(flops), float(nbytes)

    def request_tune(self) -> None:
        """Puts the op and its held sub-ops in tuned mode (kernels tune now or when built)."""
        self._query("request_tune")

    def kernel_config(self) -> str | None:
        """The configuration of the first configured kernel, or None."""
        lines = self._query("kernel_config")
        return lines[0] if lines else None

    def iter_kernels(self) -> list[str]:
        """The configurations of every kernel the op and its held sub-ops have built."""
        return self._query("iter_kernels")

    @property
    def serving_target(self) -> str | None:
        """The selected target ("BUILTIN" for the in-tree kernels), None before selection."""
        lines = self._query("serving_target")
        return lines[0] if lines else None

    def built_entries(self, interface: str) -> list[str]:
        """The entries built for kernel interface `interface`, keyed "key[identity]"."""
        return self._query("built_entries:" + interface)

    def held_delegates(self) -> list[Any]:
        """Held sub-ops in stage order, then holding order (the C++ instance's)."""
        return [self._child(key) for key in self._query("held_delegates")]


class BoundaryOp(_OpBase):
    """An op that is one custom operator per effect branch (see the module doc)."""

    def _setup(self) -> None:
        super()._setup()
        meta = self._meta
        ops = [getattr(_EXT, c["name"].split("::", 1)[1]).default for c in meta["compile_ops"]]
        self._alloc_op = ops[0]
        self._out_op = ops[1] if len(ops) > 1 else None
        self._buffer = next((i for i, o in enumerate(meta["outputs"]) if o["buffer_out"]), None)

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
        if out is None:
            return result
        n_outputs = len(self._meta["outputs"])
        if n_outputs == 1:
            return out
        rest = list(result) if isinstance(result, (tuple, list)) else [result]
        rest.insert(self._buffer, out)
        return tuple(rest)


class CompositeOp(_OpBase):
    """An op composed of other ops' stages, held by its C++ instance; see the module doc."""

    def _setup(self) -> None:
        from tileops import _composites

        super()._setup()
        self._held: dict[tuple[str, str | None], _OpBase] = {}
        # The output the stages write (every composite's outputs are `buffer: out` ones).
        self._buffer = next(i for i, o in enumerate(self._meta["outputs"]) if o["buffer_out"])
        # What the C++ constructor settled (FusedMoE's activation), as the wiring reads it.
        if self._holder is None:
            self._params = {
                name: _decode(value)
                for name, _, value in (line.partition("=") for line in self._query("params"))
            }
            with _LIVE_LOCK:
                _LIVE[self._key] = (self._meta, self._params)
        _composites.construct(self)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})  # {self._key}"

    def delegate_for(self, stage: str, identity: str | None = None, given: _OpBase | None = None,
                     /, **params: Any) -> Any:
        """The sub-op the C++ instance holds for (stage, identity): built once from `params` with
        this op's target, or `given` (kept with its own target). The C++ rules apply: an unknown
        stage, a class other than the stage declares, or one instance held under two keys is a
        UsageError."""
        held = self._held.get((stage, identity))
        if held is not None and given is None:
            return held
        if torch.compiler.is_compiling():
            raise UsageError(
                f"tileops: {self._meta['name']}: stage '{stage}' holds no sub-op for identity "
                f"{identity!r} yet, and building one cannot be traced: call the op once eagerly "
                "with these shapes before compiling"
            )
        op_name = next((s["op"] for s in self._meta["stages"] if s["name"] == stage), "")
        if given is not None:
            op_name = type(given).__name__
        names, values, tensors = _encode(_MANIFEST[op_name], params) if op_name else ([], [], [])
        try:
            key = _EXT._delegate_for(
                self._key, stage, "n:" if identity is None else "s:" + identity, op_name,
                names, values, tensors, "" if given is None else given.instance_key,
            )
        except RuntimeError as exc:
            _raise_translated(exc)
        if given is not None and given.instance_key == key:
            with self._children_lock:
                self._children.setdefault(key, given)
        sub = self._child(key)
        self._held[(stage, identity)] = sub
        return sub

    def _invoke(self, inputs: tuple[Any, ...], out: torch.Tensor | None) -> Any:
        from tileops import _composites

        if torch.compiler.is_compiling():
            # Traced, the composite is no node: its stages' operators are, and check their calls.
            self._check_tensors(inputs, out)
            return _composites.forward(self, inputs, out)
        try:
            outputs, is_open = _EXT._composite_open(self._key, list(inputs), out)
        except (RuntimeError, TypeError) as exc:
            self._check_tensors(inputs, out)
            if isinstance(exc, RuntimeError):
                _raise_translated(exc)
            raise
        if is_open:
            # The stages write the outputs the C++ call allocated (or `out`), as a C++ forward does.
            try:
                result = _composites.forward(self, inputs, outputs[self._buffer])
                _EXT._composite_close(
                    self._key, [result] if isinstance(result, torch.Tensor) else list(result))
            except RuntimeError as exc:
                _EXT._composite_abort(self._key)  # nothing left to undo when the close ran
                _raise_translated(exc)
            except BaseException:
                _EXT._composite_abort(self._key)
                raise
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


__all__ = ["BoundaryOp", "CompositeOp", "Error", "LastCall", "TensorInfo"]
