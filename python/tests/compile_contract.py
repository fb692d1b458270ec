"""The cold-compile contract: every boundary op registers a test that compiles a fresh
instance with torch.compile(op, fullgraph=True) and compares it with eager. A test
(test_compile_contract.py) fails when the registered set differs from the boundary ops."""

from __future__ import annotations

from collections.abc import Callable

CONTRACTS: dict[str, Callable[[str], None]] = {}


def register_compile_contract(op_name: str) -> Callable[[Callable[[str], None]], Callable[[str], None]]:
    def register(fn: Callable[[str], None]) -> Callable[[str], None]:
        CONTRACTS[op_name] = fn
        return fn

    return register
