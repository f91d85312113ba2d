"""The ``rmq-core`` command line's expected failures as one line each: what failed and what to do about it.

Owns: ``-n``'s parsing and default (``namesrv_address``; ``default_namesrv``: ``$NAMESRV_ADDR`` as mqadmin, else
127.0.0.1:9876), ``CliError`` (a command's own expected failure: its text is the line printed), ``one_line`` (an
exception the commands expect — an address that did not answer, a topic with no route, a port in use, a missing file
— as that line, or None for a bug) and ``run_command`` (runs a parsed command: an expected failure prints
``error: <line>`` on stderr and exits 1; anything else, and every failure under ``--debug``, keeps its traceback).
Invariants: a line names the address, port, file or topic concerned and, where there is one, the flag to change it;
it is one line (RocketMQ's multi-line "See <FAQ url>" suffix is dropped).
Thread-safety: pure functions, called on the main thread once per process.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys

from rmq_core.client.exceptions import (
    MQClientException,
    RemotingConnectError,
    RemotingTimeoutError,
    RocketMQRpcError,
)
from rmq_core.remoting.codes import ResponseCode

EXIT_FAILED = 1


class CliError(Exception):
    """An expected failure of a command; ``str(self)`` is the line the CLI prints."""


def first_line(text: object) -> str:
    """``text`` up to its first line break (RocketMQ's messages end in "\\nSee <FAQ url> ...")."""
    return str(text).strip().split("\n", 1)[0].strip()


def failure_line(e: BaseException) -> str:
    """``e``'s first line, and its cause's (a producer's "Send [3] times, still failed" names the broker's answer only
    in its cause: an ACL refusal, a forbidden topic)."""
    line = first_line(e)
    cause = getattr(e, "cause", None) or e.__cause__
    if cause is not None:
        why = first_line(cause)
        if why and why not in line:
            line += f" (the last answer: {why})"
    return line


def port_in_use(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno == errno.EADDRINUSE


def port_in_use_line(what: str, port: int, flag: str) -> str:
    return f"port {port} is in use, so the {what} cannot listen on it: give another with {flag} (0 picks a free one)"


def one_line(e: BaseException, namesrv: str | None = None, topic: str | None = None) -> str | None:
    """The line for an expected failure ``e`` (``namesrv``, ``topic``: the name server and topic the command was
    given), else None."""
    if isinstance(e, CliError):
        return str(e)
    if isinstance(e, RemotingConnectError):
        role = "the name server" if namesrv and e.addr and e.addr in namesrv.split(";") else "a broker"
        where = f" ({role}; check -n HOST:PORT)" if role == "the name server" else f" ({role})"
        reason = first_line(e).partition(" failed: ")[2] or first_line(e)
        return f"nothing answers at {e.addr}{where}: {reason}"
    if isinstance(e, RemotingTimeoutError):
        return f"{e.addr} did not answer within {int(e.timeout_ms)} ms"
    if isinstance(e, MQClientException) and e.response_code == ResponseCode.TOPIC_NOT_EXIST:
        ns = e.addr or namesrv or "HOST:PORT"
        name = topic or "TOPIC"
        return f"topic {name} has no route on name server {ns} (create it: rmq-core topic create {name} -n {ns})"
    if isinstance(e, RocketMQRpcError):
        at = f" ({e.addr})" if e.addr else ""
        return f"{first_line(e)}{at}"
    if isinstance(e, FileNotFoundError):
        return f"no such file: {e.filename}"
    if isinstance(e, PermissionError):
        return f"permission denied: {e.filename}"
    if port_in_use(e):
        return f"an address is in use: {first_line(e)}"
    return None


def run_command(args: argparse.Namespace) -> int:
    """``args.func(args)``; an expected failure becomes ``error: <line>`` on stderr and exit code 1 (with ``--debug``:
    the traceback as well)."""
    debug = bool(getattr(args, "debug", False))
    if debug:
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from rmq_core.errors import AclConfigError

    try:
        return int(args.func(args) or 0)
    except AclConfigError as e:  # a broker that must not start (its ACL configuration): one line, exit 2
        if debug:
            raise
        print(f"rmq-core: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        namesrv = getattr(args, "namesrv", None) or getattr(args, "namesrv_addr", None)
        line = one_line(e, namesrv, getattr(args, "topic", None))
        if line is None or debug:
            raise
        print(f"error: {line}", file=sys.stderr)
        return EXIT_FAILED


def default_namesrv() -> str:
    """``-n``'s default: ``$NAMESRV_ADDR`` (as mqadmin and RocketMQ's clients read it), else 127.0.0.1:9876."""
    return os.environ.get("NAMESRV_ADDR") or "127.0.0.1:9876"


def namesrv_address(text: str) -> str:
    """An argparse ``type`` for ``-n``: ``host:port[;host:port...]``, each port a number in 0..65535."""
    parts = [a.strip() for a in text.split(";") if a.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("a name server address is host:port, e.g. 127.0.0.1:9876")
    for a in parts:
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise argparse.ArgumentTypeError(
                f"{a!r} is not host:port (a name server address is e.g. 127.0.0.1:9876; several: 'a:9876;b:9876')"
            )
    return ";".join(parts)
