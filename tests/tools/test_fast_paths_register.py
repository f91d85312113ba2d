"""docs/FAST_PATHS.md names real things: every parity test it names (``file::test``, and ``::test`` after it for the
same file) is defined in that file, every benchmark and source file it names exists, and every fast-path module
header points back to the register."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGISTER = ROOT / "docs" / "FAST_PATHS.md"
_CODE = re.compile(r"`([^`]+)`")
_FILE_TEST = re.compile(r"^((?:tests|rust)/[\w/.-]+\.(?:py|rs))::((?:tests::)?\w+)$")
_NEXT_TEST = re.compile(r"^::(\w+)$")


def _named_tests() -> list[tuple[str, str]]:
    named = []
    for line in REGISTER.read_text(encoding="utf-8").splitlines():
        current = None
        for code in _CODE.findall(line):
            m = _FILE_TEST.match(code)
            if m:
                current = m.group(1)
                named.append((current, m.group(2).removeprefix("tests::")))
                continue
            m = _NEXT_TEST.match(code)
            if m and current is not None:
                named.append((current, m.group(1)))
    return named


def test_every_parity_test_named_exists() -> None:
    named = _named_tests()
    assert len(named) > 30
    missing = []
    for path, name in named:
        text = (ROOT / path).read_text(encoding="utf-8")
        definition = rf"^\s*fn {name}\(" if path.endswith(".rs") else rf"^(async )?def {name}\("
        if not re.search(definition, text, re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert not missing, missing


def test_every_benchmark_and_source_file_named_exists() -> None:
    codes = _CODE.findall(REGISTER.read_text(encoding="utf-8"))
    paths = {c.split("::")[0].split(" ")[0] for c in codes if re.match(r"^(benches|rust|tests|docs)/[\w/.-]+\.\w+", c)}
    paths |= {
        f"python/rmq_core/{c}" for c in codes if re.match(r"^(broker|client|remoting|_reference)/[\w/.-]+\.py$", c)
    }
    assert len(paths) > 20
    assert [p for p in sorted(paths) if not (ROOT / p).is_file()] == []


def test_the_fast_path_modules_point_to_the_register() -> None:
    for module in (
        "python/rmq_core/broker/processor/send_plain_fast_path.py",
        "python/rmq_core/broker/processor/pull_plain_fast_path.py",
        "python/rmq_core/client/producer/fast_send.py",
    ):
        head = (ROOT / module).read_text(encoding="utf-8").split('"""')[1]
        assert "docs/FAST_PATHS.md" in head, module
