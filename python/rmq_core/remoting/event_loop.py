"""The event loop of every loop thread rmq_core starts (servers, clients): uvloop's where it is installed, else the
stdlib's. A fast path (docs/REMOTING_DESIGN.md, "Fast paths"): the stdlib loop runs the same code, uvloop only
costs less per callback and per write.

Thread-safety: ``new_event_loop`` may be called from any thread; the loop it returns is its caller's to run.
"""

from __future__ import annotations

import asyncio
from types import ModuleType

_uvloop: ModuleType | None
try:
    import uvloop as _uvloop
except ImportError:  # not installed (Windows has none): the stdlib loop
    _uvloop = None


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (Linux, macOS: about half the per-callback and per-write cost of
    the stdlib loop on the broker's send path), else the stdlib's."""
    if _uvloop is not None:
        return _uvloop.new_event_loop()
    return asyncio.new_event_loop()
