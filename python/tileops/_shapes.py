"""Output inference for the fakes, from the manifest's shape and dtype declarations.

The fake of every custom operator is built here from the generated manifest description: the
inputs' shapes are unified with their declared patterns to solve the indices, and the outputs'
shape expressions are evaluated over them. Sizes may be SymInts: binding an index to a size
keeps the symbol, equalities between two sizes become ``torch._check`` constraints, and output
sizes are arithmetic on the symbols, so dynamic shapes trace. The manifest's expression language
is a subset of Python's, so each expression is compiled once (at first use) and evaluated with
the solved indices, the op's parameters and the language's primitives in scope.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import torch

from tileops.errors import DTypeError, SignatureError

_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_SCALED = re.compile(r"^(\d+)\s*\*\s*([A-Za-z_]\w*)$|^([A-Za-z_]\w*)\s*\*\s*(\d+)$")
_SHIFTED = re.compile(r"^([A-Za-z_]\w*)\s*([+-])\s*(\d+)$")
_FAMILY = re.compile(r"^([A-Za-z_]\w*)\s*\[(.*)\]$", re.DOTALL)


def _split_top(text: str) -> list[str]:
    """Splits on commas outside brackets and parentheses."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        items.append(tail)
    return items


def _strip_parens(text: str) -> str:
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1].strip()
    return text


@lru_cache(maxsize=None)
def _compiled(expr: str) -> Any:
    return compile(expr, "<manifest>", "eval")


def _ceil_div(a: Any, b: Any) -> Any:
    return (a + b - 1) // b


def _prod(values: Sequence[Any]) -> Any:
    return math.prod(values)


def _expect_equal(a: Any, b: Any, message: Callable[[], str]) -> None:
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise SignatureError(message())
    else:
        torch._check(a == b, message)


class Solver:
    """Solves one call's indices from its tensors and evaluates the outputs of one op."""

    def __init__(self, meta: dict[str, Any], params: dict[str, Any], present: set[str]) -> None:
        self.meta = meta
        self.env: dict[str, Any] = {
            k: (list(v) if isinstance(v, (list, tuple)) else v)
            for k, v in params.items()
            if not isinstance(v, torch.Tensor)
        }
        self.env.update(
            prod=_prod, len=len, ceil_div=_ceil_div, min=min, max=max,
            present=lambda name: name in present,
        )
        self.present = present
        self.families = {f["name"]: f for f in meta["types"]}
        self.dtype_indices = {
            f["name"] for f in meta["forall"] if f["kind"].startswith("DType")
        }

    def eval(self, expr: str) -> Any:
        return eval(_compiled(expr), {"__builtins__": {}}, self.env)  # noqa: S307 (manifest text)

    def items(self, shape: str) -> list[str]:
        """The items of a shape declaration, with type families resolved."""
        shape = shape.strip()
        if shape.startswith("["):
            return _split_top(shape[1:-1])
        match = _FAMILY.match(shape)
        if match is None or match.group(1) not in self.families:
            raise SignatureError(f"tileops: cannot read the shape declaration '{shape}'")
        family = self.families[match.group(1)]
        args = _split_top(match.group(2))
        formals = dict(zip(family["formals"], args))
        selector = self.eval(formals[family["match"]])
        for when, pattern in family["cases"]:
            if when == selector:
                break
        else:
            raise SignatureError(f"tileops: no case of {family['name']} for {selector!r}")

        def substitute(item: str) -> str:
            return re.sub(
                r"[A-Za-z_]\w*",
                lambda m: f"({formals[m.group(0)]})" if m.group(0) in formals else m.group(0),
                item,
            )

        return [_strip_parens(substitute(item)) for item in _split_top(pattern.strip()[1:-1])]

    def unify(self, name: str, shape: str, sizes: Sequence[Any], final: bool) -> bool:
        """Binds the unbound indices of `shape` to `sizes`; checks the rest when `final`.

        Returns False when an item could not be settled yet (a later tensor may bind it)."""
        items = self.items(shape)
        splices = [i for i, it in enumerate(items) if it.startswith("*")]
        known = 0
        unknown = []
        for i in splices:
            value = self.env.get(items[i][1:].strip())
            if isinstance(value, list):
                known += len(value)
            else:
                unknown.append(i)
        fixed = len(items) - len(splices)
        if len(unknown) > 1:
            raise SignatureError(f"tileops: '{shape}' has more than one unknown splice")
        rank = len(sizes)
        if (unknown and rank < fixed + known) or (not unknown and rank != fixed + known):
            raise SignatureError(
                f"tileops: {self.meta['name']}: '{name}' has {rank} dimensions, its declared "
                f"shape {shape} needs {'at least ' if unknown else ''}{fixed + known}"
            )
        settled = True
        at = 0
        for i, item in enumerate(items):
            if item.startswith("*"):
                splice = item[1:].strip()
                length = rank - fixed - known if i in unknown else len(self.env[splice])
                part = list(sizes[at : at + length])
                if i in unknown:
                    self.env[splice] = part
                else:
                    for a, b in zip(self.env[splice], part):
                        _expect_equal(a, b, lambda: f"{name}: {shape} does not match")
                at += length
                continue
            size = sizes[at]
            at += 1
            item = _strip_parens(item)
            if _IDENT.match(item) and item not in self.env:
                self.env[item] = size
                continue
            scaled = _SCALED.match(item)
            if scaled is not None:
                k = int(scaled.group(1) or scaled.group(4))
                var = scaled.group(2) or scaled.group(3)
                if var not in self.env:
                    self.env[var] = size // k
                    continue
            shifted = _SHIFTED.match(item)
            if shifted is not None and shifted.group(1) not in self.env:
                c = int(shifted.group(3))
                self.env[shifted.group(1)] = size - c if shifted.group(2) == "+" else size + c
                continue
            try:
                want = self.eval(item)
            except NameError:
                if final:
                    raise
                settled = False
                continue
            _expect_equal(
                want, size,
                lambda: f"tileops: {self.meta['name']}: {name} dimension '{item}' is {size}, "
                f"expected {want} (declared shape {shape})",
            )
        return settled

    def bind_dtype(self, name: str, decl: str, dtype: torch.dtype) -> None:
        spelled = str(dtype).removeprefix("torch.")
        if decl in self.dtype_indices:
            bound = self.env.get(decl)
            if bound is None:
                self.env[decl] = spelled
            elif bound != spelled:
                raise DTypeError(
                    f"tileops: {self.meta['name']}: '{name}' has dtype {spelled}, but {decl} is "
                    f"{bound} from an earlier tensor"
                )
        elif decl != spelled:
            raise DTypeError(
                f"tileops: {self.meta['name']}: '{name}' must have dtype {decl}, got {spelled}"
            )

    def output_shape(self, shape: str) -> list[Any]:
        out: list[Any] = []
        for item in self.items(shape):
            if item.startswith("*"):
                out.extend(self.env[item[1:].strip()])
            else:
                out.append(self.eval(item))
        return out

    def output_dtype(self, decl: str) -> torch.dtype:
        spelled = self.env.get(decl, decl) if decl in self.dtype_indices else decl
        return getattr(torch, spelled)


def infer_outputs(
    meta: dict[str, Any],
    params: dict[str, Any],
    inputs: Sequence[torch.Tensor | None],
) -> list[tuple[list[Any], torch.dtype]]:
    """(shape, dtype) of every output of the op for these inputs (manifest order)."""
    present = {d["name"] for d, t in zip(meta["inputs"], inputs) if t is not None}
    solver = Solver(meta, params, present)
    tensors = [(d, t) for d, t in zip(meta["inputs"], inputs) if t is not None]
    for p in meta["params"]:
        value = params.get(p["name"])
        if p["is_tensor"] and isinstance(value, torch.Tensor):
            tensors.append(({"name": p["name"], "shape": p["shape"], "dtype": p["dtype"]}, value))
    for final in (False, True):
        pending = False
        for decl, t in tensors:
            pending |= not solver.unify(decl["name"], decl["shape"], t.shape, final)
        if not pending:
            break
    for decl, t in tensors:
        solver.bind_dtype(decl["name"], decl["dtype"], t.dtype)
    for name, expr in meta["lets"]:
        solver.env[name] = solver.eval(expr)
    return [(solver.output_shape(o["shape"]), solver.output_dtype(o["dtype"])) for o in meta["outputs"]]
