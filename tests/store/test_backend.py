"""Backend selection (rmq_core._backend): RMQ_CORE_BACKEND picks the engine for the whole process; both engines
export the same names (CORE_API §0). Each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.helpers import subprocess_env

CODE = "import rmq_core, rmq_core._backend as b; print(rmq_core.backend(), b.impl.__name__)"
NAMES = (
    "StoreEngine",
    "tags_hash",
    "encode_properties",
    "decode_properties",
    "decode_messages",
    "create_offset_msg_id",
)


def run(env_value: str | None) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env.pop("RMQ_CORE_BACKEND", None)
    if env_value is not None:
        env["RMQ_CORE_BACKEND"] = env_value
    return subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "value, expected",
    [("python", "python rmq_core._reference"), ("rust", "rust rmq_core._core"), (None, "rust rmq_core._core"),
     (" Python ", "python rmq_core._reference"), ("RUST", "rust rmq_core._core"), ("", "rust rmq_core._core")],
)  # fmt: skip
def test_backend_reported(value, expected):
    p = run(value)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == expected


def test_unknown_backend_is_an_import_error():
    p = run("java")
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "RMQ_CORE_BACKEND" in p.stderr


@pytest.mark.parametrize("name", ["rust", "python"])
@pytest.mark.both_backends
def test_both_engines_export_the_contract(name):
    code = (
        "import rmq_core._backend as b; m = b.load(%r); missing = [n for n in %r if not hasattr(m, n)]; "
        "print(missing)" % (name, NAMES)
    )
    p = subprocess.run([sys.executable, "-c", code], env=subprocess_env("python"), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
