"""Instance-level attention forwards over a private copy of their modeling module's globals.

An attention forward of transformers looks up, as globals of its modeling module, the functions
tileops serves: the rotation of q and k (``apply_rotary_pos_emb``, the rope kind) and the
attention function (``ALL_ATTENTION_FUNCTIONS``, the attention kind). To serve them for one model
instance only, an attention module gets an instance-level ``forward``: its class's forward (and
the decorators around it, rebuilt through their closure cells) recreated with
``types.FunctionType`` over a copy of the modeling module's globals in which those names have
this module's values (and which has no ``__name__``: _private_globals says why). The class, the
modeling module and every other model are untouched.

Each module has its own copy, holding every name the kinds replaced in it (recorded on the
module: ``overrides``); a kind adds or removes its names by rebuilding the forward over a new
copy, never by changing a copy in place, so a deep copy of a patched model (whose modules share
the forward's function and so its globals) is not changed by patching or unpatching the other.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any

from torch import nn

# The instance attribute recording a rebound forward: (the function installed, the names it
# replaced -> their values). The record is the module's, so a deep copy has its own.
_RECORD = "_tileops_rebound"


def _function(module: nn.Module) -> Any:
    forward = vars(module).get("forward")
    return getattr(forward, "__func__", forward)


def overrides(module: nn.Module) -> dict[str, Any]:
    """The names (and values) this integration replaced in `module`'s forward; {} when none."""
    record = vars(module).get(_RECORD)
    if record is not None and record[0] is _function(module):
        return dict(record[1])
    return {}


def foreign_forward(module: nn.Module) -> bool:
    """True when `module` has an instance-level forward not rebuilt here (accelerate's hooks,
    another patcher): rebuilding it would drop theirs."""
    return "forward" in vars(module) and not overrides(module)


def rebuilt(fn: Callable[..., Any], old_globals: dict[str, Any], new_globals: dict[str, Any],
            done: dict[int, Callable[..., Any]]) -> Callable[..., Any]:
    """`fn` again, with every function it wraps (closure cells, recursively) that was defined over
    `old_globals` now defined over `new_globals`; `fn` itself when nothing in it changes."""
    if not isinstance(fn, types.FunctionType):
        return fn
    if id(fn) in done:
        return done[id(fn)]
    cells = fn.__closure__
    changed = fn.__globals__ is old_globals
    if cells:
        new_cells = []
        for cell in cells:
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell
                new_cells.append(cell)
                continue
            again = rebuilt(content, old_globals, new_globals, done)
            changed |= again is not content
            new_cells.append(cell if again is content else types.CellType(again))
        cells = tuple(new_cells)
    if not changed:
        done[id(fn)] = fn
        return fn
    new = types.FunctionType(fn.__code__, new_globals if fn.__globals__ is old_globals else fn.__globals__,
                             fn.__name__, fn.__defaults__, cells)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__module__ = fn.__module__  # FunctionType reads it from the globals' __name__
    new.__dict__.update(fn.__dict__)
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    if "__wrapped__" in fn.__dict__:  # functools.wraps: point at the rebuilt inner function
        new.__wrapped__ = rebuilt(fn.__dict__["__wrapped__"], old_globals, new_globals, done)  # type: ignore[attr-defined]
    done[id(fn)] = new
    return new


def _private_globals(modeling: types.ModuleType, values: dict[str, Any]) -> dict[str, Any]:
    """A copy of `modeling`'s globals with `values` in place of those names, and no ``__name__``.

    A copy naming the module passes for its dictionary: TorchDynamo 2.11 resolves a traced
    function's globals through ``sys.modules[__name__]``, so it guards on the module's values
    instead of the copy's (and fails to build those guards); without the name it guards on the
    copy itself, as 2.15 does for any globals that are not their module's dictionary."""
    new_globals = {**vars(modeling), **values}
    del new_globals["__name__"]
    return new_globals


def _install(module: nn.Module, modeling: types.ModuleType, values: dict[str, Any]) -> None:
    old_globals = vars(modeling)
    forward = rebuilt(type(module).forward, old_globals, _private_globals(modeling, values), {})
    if forward is type(module).forward:  # the kinds check that the forward reads the names
        raise RuntimeError(f"tileops: {type(module).__name__}.forward reads no global of {modeling.__name__}")
    module.forward = types.MethodType(forward, module)
    vars(module)[_RECORD] = (forward, dict(values))


def rebind(module: nn.Module, modeling: types.ModuleType, values: dict[str, Any]) -> None:
    """`module`'s forward is its class's, over `modeling`'s globals with `values` (and what was
    replaced before) in place of those names."""
    _install(module, modeling, {**overrides(module), **values})


def unbind(module: nn.Module, modeling: types.ModuleType, names: Iterable[str]) -> None:
    """Undoes rebind for `names`; the class's forward comes back when nothing is left replaced."""
    drop = set(names)
    remaining = {name: value for name, value in overrides(module).items() if name not in drop}
    if remaining:
        _install(module, modeling, remaining)
    else:
        vars(module).pop("forward", None)
        vars(module).pop(_RECORD, None)


def forward_globals(module: nn.Module) -> dict[str, Any]:
    """The globals the forward `module` runs reads: its rebuilt copy's, or its class's modeling
    module's (the bench wraps functions there to time them)."""
    fn: Any = vars(module).get("forward", type(module).forward)
    fn = getattr(fn, "__func__", fn)
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn.__globals__


__all__ = ["foreign_forward", "forward_globals", "overrides", "rebind", "rebuilt", "unbind"]
