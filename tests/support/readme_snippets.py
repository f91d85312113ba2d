"""The README's fenced code blocks as the README test runs them: ``sh`` blocks as command lines (comments dropped,
``.venv/bin/rmq-core`` as this interpreter's ``-m rmq_core.cli``), ``python`` blocks as scripts; and the rewrites that
let them run on free ports: the documented name server and broker ports (9876, 10911) and the offset message id that
embeds the broker's address."""

from __future__ import annotations

import re
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
CLI = [sys.executable, "-m", "rmq_core.cli"]
NAMESRV = "127.0.0.1:9876"
BROKER_PORT = 10911
README_OFFSET_ID = "7F00000100002A9F0000000000000000"  # README's query-by-id: 127.0.0.1:10911, CommitLog offset 0

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence, for messages


def blocks(lang: str, text: str | None = None) -> list[Block]:
    text = README.read_text(encoding="utf-8") if text is None else text
    out = []
    for m in _FENCE.finditer(text):
        if m.group(1) == lang:
            out.append(Block(lang, m.group(2), text.count("\n", 0, m.start()) + 1))
    return out


def shell_commands(block: Block) -> list[list[str]]:
    """Each line of an ``sh`` block as argv (a trailing ``# comment`` dropped)."""
    out = []
    for raw in block.code.splitlines():
        words = shlex.split(raw, comments=True)
        if words:
            out.append(words)
    return out


def as_cli(words: list[str]) -> list[str] | None:
    """``.venv/bin/rmq-core ARGS`` as this interpreter's ``-m rmq_core.cli ARGS``; None for another program."""
    if words[0] in (".venv/bin/rmq-core", "rmq-core"):
        return [*CLI, *words[1:]]
    return None


def free_port(span: tuple[int, ...] = (0,)) -> int:
    """A port p with p + each of ``span`` free on 127.0.0.1 (bound and released: free at the moment of asking)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + max(span) > 65535:
            continue
        held = []
        try:
            for d in span:
                h = socket.socket()
                held.append(h)
                h.bind(("127.0.0.1", base + d))
            return base
        except OSError:
            continue
        finally:
            for h in held:
                h.close()
    raise RuntimeError("no free port")


def offset_msg_id(port: int) -> str:
    """The README's offset message id with the broker port ``port`` instead of 10911."""
    return README_OFFSET_ID[:8] + f"{port:08X}" + README_OFFSET_ID[16:]


def rewrite(text: str, namesrv: str, broker_port: int) -> str:
    """The documented addresses as the test's: the name server, and the offset message id of the broker."""
    return text.replace(NAMESRV, namesrv).replace(README_OFFSET_ID, offset_msg_id(broker_port))
