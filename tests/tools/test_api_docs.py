"""The API reference (`./dev docs`: pdoc over the public modules) builds, and every public module's page is there."""

from __future__ import annotations

import subprocess
import sys

import pytest

PUBLIC = ["rmq_core", "rmq_core.message", "rmq_core.store", "rmq_core.errors", "rmq_core.client", "rmq_core.testing"]


def test_pdoc_builds_the_public_modules(tmp_path):
    pytest.importorskip("pdoc")
    out = subprocess.run(
        [sys.executable, "-m", "pdoc", "-o", str(tmp_path), *PUBLIC],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for module in PUBLIC[1:]:
        page = tmp_path / "rmq_core" / f"{module.split('.', 1)[1]}.html"
        assert page.is_file(), module
    assert 'id="MessageStore.get_message"' in (tmp_path / "rmq_core" / "store.html").read_text()
