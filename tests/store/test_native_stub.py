"""The hand-written stub python/rmq_core/_core.pyi matches the built native module (mypy.stubtest)."""

from __future__ import annotations

import subprocess
import sys


def test_core_pyi_matches_the_native_module():
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "rmq_core._core"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
