"""A server's batch processors, the fast path of ``RemotingServer`` that the broker's plain sends take: a request of
a batch code and the requests of such codes read right after it (the rest of its chunk) go to their processor
together, whose answers go out in one write; an inline processor's chunk that arrives while its connection is idle
is handled in ``data_received`` itself (``serve_now``, invariant 6). It must answer as the per-request path
(``RemotingServer._process``): each answer in its request's place, none to a oneway request, SYSTEM_ERROR for a
processor failure, the refusals of the access check in their places (tests/remoting/test_remoting_transport.py).

Invariants it enforces (numbered in docs/REMOTING_DESIGN.md): 3, 4, 6, 9.

Thread-safety: on the server's loop only.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from rmq_core.remoting.connection import LARGE_BODY_BYTES, Connection
from rmq_core.remoting.frame_protocol import FrameProtocol

log = logging.getLogger(__name__)

# A batch processor answers each request with a command, None (no answer), or the answer's frame already encoded;
# the answers come at once (a list) when it had nothing to wait for, else as an awaitable
BatchAnswers = list[RemotingCommand | bytes | None]
BatchProcessor = Callable[[Connection, list[RemotingCommand]], BatchAnswers | Awaitable[BatchAnswers]]
# A check of every request before it is served (the broker's ACL): None serves it, a command is the refusal to answer
AccessCheck = Callable[[Connection, RemotingCommand], RemotingCommand | None]
# The server's start of a request's work: a task for it, or (past the connection's cap) an awaitable waiting for room
Start = Callable[[Coroutine[Any, Any, None]], Awaitable[None] | None]


class BatchProcessors:
    """The batch processors of one server by request code (``RemotingServer.register_batch``), and their serving."""

    def __init__(self) -> None:
        self.by_code: dict[int, tuple[BatchProcessor, bool]] = {}  # code → (processor as served, inline)
        self.max_run: dict[int, int] = {}  # code → the most requests of one run (absent: the rest of the chunk)
        self._registered: dict[BatchProcessor, tuple[int, ...]] = {}  # as registered (before any check)

    def register(
        self,
        codes: tuple[int, ...],
        processor: BatchProcessor,
        inline: bool,
        check: AccessCheck | None,
        max_run: int | None = None,
    ) -> None:
        self._registered[processor] = tuple(int(c) for c in codes)
        if check is not None:  # its requests checked before it sees them (invariant 9)
            processor = checked_batch(processor, check)
        for code in codes:
            self.by_code[int(code)] = (processor, inline)  # the last registration for a code wins
            if max_run is None:
                self.max_run.pop(int(code), None)
            else:
                self.max_run[int(code)] = max(1, max_run)

    def unregister(self, code: int) -> None:
        """``code`` no longer served by a batch processor (a per-request registration replaced it)."""
        self.by_code.pop(code, None)
        self.max_run.pop(code, None)

    def runs(self) -> dict[int, int]:
        """Each batch code with the most requests of one run (``serve_connection``'s ``batch_codes``)."""
        return {code: self.max_run.get(code, sys.maxsize) for code in self.by_code}

    def set_access_check(self, check: AccessCheck) -> None:
        """Every processor registered so far behind ``check`` (invariant 9)."""
        by_code = self.by_code
        for processor, codes in self._registered.items():
            checked = checked_batch(processor, check)
            for code in codes:
                if code in by_code and by_code[code][0] is processor:
                    by_code[code] = (checked, by_code[code][1])

    def serve(self, conn: Connection, start: Start, cmds: list[RemotingCommand]) -> Awaitable[None] | None:
        """A run of batch requests read together (``serve_connection``'s ``on_batch``): inline, or started by
        ``start``; an awaitable when the serving task must finish it before it serves the next command."""
        batch = self.by_code
        processor, inline_batch = batch[cmds[0].code]
        registrations = {batch[c.code] for c in cmds}
        if len(registrations) > 1:  # codes of different batch processors: their runs one after another
            if all(inline for _, inline in registrations):
                return self._process_runs(conn, cmds)
            return start(self._process_runs(conn, cmds))
        if inline_batch:
            return process_batch(conn, processor, cmds)
        return start(run_batch(conn, processor, cmds))

    def serve_now(self, conn: Connection, proto: FrameProtocol, cmds: list[RemotingCommand]) -> int:
        """The chunk's leading requests of one inline batch processor (at most its ``max_run``), handled at once
        (invariant 6): how many; 0 (nothing done) when the chunk does not begin with one."""
        batch = self.by_code
        first = cmds[0]
        registration = batch.get(first.code)
        if registration is None or not registration[1] or first.flag & RPC_TYPE_RESPONSE:
            return 0
        n = 1
        most = min(len(cmds), self.max_run.get(first.code, len(cmds)))
        while n < most and not cmds[n].flag & RPC_TYPE_RESPONSE and batch.get(cmds[n].code) == registration:
            n += 1
        work = process_batch(conn, registration[0], cmds if n == len(cmds) else cmds[:n])
        if work is not None:
            proto.hand_over(work)
        return n

    async def _process_runs(self, conn: Connection, cmds: list[RemotingCommand]) -> None:
        """Commands of different batch processors, split into runs of one processor each, handled in order."""
        batch = self.by_code
        start = 0
        for i in range(1, len(cmds) + 1):
            if i == len(cmds) or batch[cmds[i].code] != batch[cmds[start].code]:
                await run_batch(conn, batch[cmds[start].code][0], cmds[start:i])
                start = i


async def run_batch(conn: Connection, processor: BatchProcessor, cmds: list[RemotingCommand]) -> None:
    """``process_batch`` as a coroutine (a task's, or one run of ``_process_runs``)."""
    work = process_batch(conn, processor, cmds)
    if work is not None:
        await work


def process_batch(conn: Connection, processor: BatchProcessor, cmds: list[RemotingCommand]) -> Awaitable[None] | None:
    """``processor`` on ``cmds``, its answers sent: None when that is done, else an awaitable finishing it
    (the processor had to wait for something)."""
    try:
        responses = processor(conn, cmds)
    except Exception as e:  # a processor bug answers SYSTEM_ERROR, never kills the connection
        responses = _batch_failed(cmds, e)
    if isinstance(responses, list):
        _answer_batch(conn, cmds, responses)
        return None
    return _answer_batch_later(conn, cmds, responses)


async def _answer_batch_later(conn: Connection, cmds: list[RemotingCommand], pending: Awaitable[BatchAnswers]) -> None:
    try:
        responses = await pending
    except Exception as e:  # as in process_batch
        responses = _batch_failed(cmds, e)
    _answer_batch(conn, cmds, responses)


def _batch_failed(cmds: list[RemotingCommand], e: Exception) -> BatchAnswers:
    log.exception("batch processor for code %d failed", cmds[0].code, exc_info=e)
    return [
        RemotingCommand.response_to(cmd, ResponseCode.SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}") for cmd in cmds
    ]


def _answer_batch(conn: Connection, cmds: list[RemotingCommand], responses: BatchAnswers) -> None:
    out: list[RemotingCommand | bytes] = []
    large = False  # an answer with a large body (a pull's messages): its body is written as it is, not copied
    for cmd, response in zip(cmds, responses):
        if response is None or cmd.is_oneway:
            continue
        if isinstance(response, bytes):  # an answer the processor encoded itself (to this request)
            out.append(response)
            continue
        response.opaque = cmd.opaque
        response.flag |= 1
        response.serialize_type = cmd.serialize_type  # 4.9 answers in the request's serialize type
        out.append(response)
        body = response.body
        if body is not None and len(body) >= LARGE_BODY_BYTES:
            large = True
    try:
        if large:
            conn.send_parts([p for r in out for p in ((r,) if isinstance(r, bytes) else r.encode_parts())])
            conn.flush()  # written now, while the bodies are in cache (not after the other connections' runs)
        else:
            conn.send_all(out)
    except ConnectionError:
        log.info("could not answer %s: connection closed", conn.remote_address)


def checked_batch(processor: BatchProcessor, check: AccessCheck) -> BatchProcessor:
    """``processor`` behind ``check``: the refused requests answered with their refusals, the others handed to
    ``processor`` (all of them, the same list, when none is refused: the common case costs one check each)."""

    def checked(conn: Connection, cmds: list[RemotingCommand]) -> BatchAnswers | Awaitable[BatchAnswers]:
        refusals = [check(conn, c) for c in cmds]
        if all(r is None for r in refusals):
            return processor(conn, cmds)
        allowed = [c for c, r in zip(cmds, refusals, strict=True) if r is None]
        if not allowed:
            return list(refusals)
        answers = processor(conn, allowed)
        if isinstance(answers, list):
            return _merge_answers(refusals, answers)
        return _merge_answers_later(refusals, answers)

    return checked


def _merge_answers(refusals: list[RemotingCommand | None], answers: BatchAnswers) -> BatchAnswers:
    """The answers of a batch some of whose requests were refused: each refusal in its request's place, the
    processor's answers (to the others, in order) in the remaining places."""
    rest = iter(answers)
    return [next(rest) if r is None else r for r in refusals]


async def _merge_answers_later(
    refusals: list[RemotingCommand | None], pending: Awaitable[BatchAnswers]
) -> BatchAnswers:
    return _merge_answers(refusals, await pending)
