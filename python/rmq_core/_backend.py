"""Selects the hot-path implementation for the whole process: ``RMQ_CORE_BACKEND=rust`` (default) or ``python``.

Invariant: both modules export the same names (see docs/CORE_API.md); callers import them from here only.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

_NAMES = ("rust", "python")


def load(name: str) -> ModuleType:
    """Either implementation by name, whatever the process default (parity tests and benchmarks use both)."""
    if name == "rust":
        from rmq_core import _core

        return _core
    if name == "python":
        from rmq_core import _reference

        return _reference
    raise ValueError(f"unknown backend {name!r}")


def _select() -> tuple[str, ModuleType]:
    name = os.environ.get("RMQ_CORE_BACKEND", "rust").strip().lower() or "rust"
    if name not in _NAMES:
        raise ImportError(f"RMQ_CORE_BACKEND must be one of {_NAMES}, got {name!r}")
    return name, load(name)


if TYPE_CHECKING:  # both modules have the native module's signatures (python/rmq_core/_core.pyi, checked by stubtest)
    from rmq_core import _core as impl

    BACKEND: str
else:
    BACKEND, impl = _select()


def backend() -> str:
    """``"rust"`` or ``"python"``: the implementation this process uses."""
    return BACKEND
