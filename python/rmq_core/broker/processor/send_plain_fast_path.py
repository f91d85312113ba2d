"""PlainSendFastPath: a received chunk's plain single sends, read into columns by the store engine, checked once per
key, stored with one ``put_send_requests`` per run and answered with frames the engine encodes. It must give what
SendMessageProcessor's general path gives each send (the same records, answers and put stats:
tests/broker/test_plain_send_parity.py; every fast path: docs/FAST_PATHS.md). Thread-safety: the broker's loop.

The gate, all of it here:
1. a request is plain when the engine's ``SendRequestParser`` reads it so (``__init__``): SEND_MESSAGE or
   SEND_MESSAGE_V2, not a batch, a queue id >= 0, no DELAY, TRAN_MSG or timer property, WAIT not ``false``;
2. its key (topic, queue id, unit mode, default topic, default queue nums) passes once (``key_verdict``): not a
   ``%RETRY%`` topic (its group decides), the general path's msgCheck, the broker no slave;
3. the chunk is answered at once (a list, no coroutine) when nothing has to wait (the general path's
   ``_waits_for_nothing``: neither SYNC_FLUSH nor SYNC_MASTER); else an awaitable.
Every other request goes back to the general path (``_process_general``) in its turn: the store keeps arrival order.
A run that one send fails validation appends nothing and is put again send by send (each its own verdict).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Protocol

from rmq_core import _backend
from rmq_core.broker.processor.send_outcome import (
    ANSWER_KEYS,
    REFUSED_BY_VALIDATION,
    SEND_OK,
    SendRefused,
    parse_address,
)
from rmq_core.broker.timer.timer_message_hook import TIMER_PROPERTIES
from rmq_core.common import mix_all
from rmq_core.message import (
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    UNIQ_KEY,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RPC_ONEWAY, RPC_TYPE_RESPONSE, RemotingCommand
from rmq_core.remoting.header import SendMessageRequestHeader, field_names
from rmq_core.store_status import PutMessageStatus

if TYPE_CHECKING:
    from rmq_core import _core
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.common.topic_config import TopicConfig
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

# per PutMessageStatus ordinal: the answer's code of a stored single send (-1: answered with its error remark)
_ANSWER_CODES = [int(SEND_OK[s]) if s in SEND_OK else -1 for s in PutMessageStatus]
_COUNTED = [s in SEND_OK for s in PutMessageStatus]  # the statuses whose sends the put stats count
_HEADER_FIELDS = 13  # SendMessageRequestHeader's fields a send reads (all but brokerName)

Responses = list[RemotingCommand | bytes | None]


class GeneralSendPath(Protocol):
    """What the fast path takes from the path it must equal (``SendMessageProcessor``): its checks, answers and
    waits, so that each exists once."""

    broker_config: BrokerConfig
    message_store: MessageStore
    broker_stats_manager: BrokerStatsManager

    def _check_topic(
        self,
        conn: Connection,
        topic: str,
        queue_id: int,
        unit_mode: bool | None,
        default_topic: str,
        default_topic_queue_nums: int,
    ) -> TopicConfig: ...

    def _send_response(self, request: RemotingCommand, code: int, remark: str | None = None) -> RemotingCommand: ...

    def _status_to_code(self, status: PutMessageStatus) -> tuple[int, str | None]: ...

    def _waits_for_nothing(self) -> bool: ...

    def _must_wait_flush(self, wait_store_msg_ok: bool = True) -> bool: ...

    async def _flushed(self, stored: Iterable[tuple[int, int, int]]) -> bool: ...

    async def _replica_status(self, stored: Iterable[tuple[int, int, int]]) -> PutMessageStatus | None: ...

    async def _process_general(
        self, conn: Connection, requests: list[RemotingCommand], indexes: Iterable[int], responses: Responses
    ) -> None: ...


class PlainSendFastPath:
    """``PlainSendFastPath(general)``; ``read(requests)`` (gate 1), then ``process(conn, requests, sends)``: the
    chunk's answers, or an awaitable of them."""

    def __init__(self, general: GeneralSendPath) -> None:
        self._general = general
        store = general.message_store
        self._backend = _backend.load(store.backend)
        # gate 1: the sends the engine reads as plain (a delayed, transactional, timer, batch or unusual send is not)
        self._parser = self._backend.SendRequestParser(
            (int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_MESSAGE_V2)),
            field_names(SendMessageRequestHeader)[:_HEADER_FIELDS],
            field_names(SendMessageRequestHeader, short_names=True)[:_HEADER_FIELDS],
            [PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TRANSACTION_PREPARED, *TIMER_PROPERTIES],
            PROPERTY_WAIT_STORE_MSG_OK,
            PROPERTY_CLUSTER,
            UNIQ_KEY,
            store.assigns_uniq_keys_in_batch,
            RPC_ONEWAY,
            "JAVA",
            RPC_TYPE_RESPONSE,
            list(ANSWER_KEYS),
        )
        # the answer settings of the plain sends, rebuilt when the broker's region or trace switch changes
        self._answer_spec: tuple[tuple[str, bool], _core.SendAnswerSpec] | None = None

    def read(self, requests: list[RemotingCommand]) -> _core.SendRequestColumns:
        """Gate 1: the chunk's plain sends as columns (``keys`` empty when there is none)."""
        return self._parser.parse(requests, self._general.broker_config.broker_cluster_name)

    def key_verdict(self, conn: Connection, key: tuple[str, int, bool, str, int]) -> int | SendRefused | None:
        """Gate 2, the checks of the general path's ``_prepare_send`` for the plain sends of one key, once: the sys
        flag bits to or in (an int), the refusal every such send gets, or None for the general path (a ``%RETRY%``
        topic: its group decides)."""
        topic, queue_id, unit_mode, default_topic, default_topic_queue_nums = key
        if mix_all.is_retry_topic(topic):
            return None
        general = self._general
        try:
            topic_config = general._check_topic(
                conn, topic, queue_id, unit_mode, default_topic, default_topic_queue_nums
            )
        except SendRefused as e:
            return e
        except Exception:  # the general path meets it again, and answers each send with it
            return None
        if general.broker_config.is_slave:
            return SendRefused(
                ResponseCode.SERVICE_NOT_AVAILABLE, "service not available now, messages are put to the slave"
            )
        return MULTI_TAGS_FLAG if topic_config.topic_filter_type == "MULTI_TAG" else 0

    def process(
        self, conn: Connection, requests: list[RemotingCommand], sends: _core.SendRequestColumns
    ) -> Responses | Awaitable[Responses]:
        """A chunk with plain sends (``read``'s ``sends``), answered in order: each run of consecutive plain sends
        whose key passed stored with one ``put_send_requests`` and answered by the engine, every other request
        refused with its key's verdict or handed to the general path in its turn. At once (gate 3) or awaitable."""
        responses: Responses = [None] * len(requests)
        keys = sends.keys
        sys_flag_or: list[int] = []
        verdicts: list[int | SendRefused | None] = []
        every_key_passed = True
        for key in keys:
            verdict = self.key_verdict(conn, key)
            verdicts.append(verdict)
            if isinstance(verdict, int):
                sys_flag_or.append(verdict)
            else:
                sys_flag_or.append(0)
                every_key_passed = False
        topics = [key[0] for key in keys]
        at_once = self._general._waits_for_nothing()
        if at_once and every_key_passed and sends.all_plain:  # the common chunk: one run of plain sends
            self._put(conn, requests, sends, topics, 0, len(requests), sys_flag_or, responses, False)
            return responses
        segments = sends.segments([isinstance(v, int) for v in verdicts])
        if at_once and all(plain for _, _, plain in segments):
            for start, end, _ in segments:
                self._put(conn, requests, sends, topics, start, end, sys_flag_or, responses, False)
            return responses
        return self._process_segments(conn, requests, sends, verdicts, topics, sys_flag_or, segments, responses)

    async def _process_segments(
        self,
        conn: Connection,
        requests: list[RemotingCommand],
        sends: _core.SendRequestColumns,
        verdicts: list[int | SendRefused | None],
        topics: list[str],
        sys_flag_or: list[int],
        segments: list[tuple[int, int, bool]],
        responses: Responses,
    ) -> Responses:
        """``process`` when something may wait: each segment in turn, plain runs through ``_put``, the others
        answered with their key's refusal or through the general path."""
        general = self._general
        key_of: list[int] | None = None
        for start, end, plain in segments:
            if plain:
                waiting = self._put(conn, requests, sends, topics, start, end, sys_flag_or, responses, True)
                if waiting is not None:
                    await waiting
                continue
            if key_of is None:
                key_of = sends.key_of
            indexes = []
            for i in range(start, end):
                verdict = verdicts[key_of[i]] if key_of[i] >= 0 else None
                if isinstance(verdict, SendRefused):
                    responses[i] = general._send_response(requests[i], verdict.code, verdict.remark)
                else:
                    indexes.append(i)
            await general._process_general(conn, requests, indexes, responses)
        return responses

    def _put(
        self,
        conn: Connection,
        requests: list[RemotingCommand],
        sends: _core.SendRequestColumns,
        topics: list[str],
        start: int,
        end: int,
        sys_flag_or: list[int],
        responses: Responses,
        wait: bool,
    ) -> Awaitable[None] | None:
        """Stores the plain sends ``[start, end)`` (``topics``: each key's) in one call and answers each: at once
        (None) unless ``wait``, else the awaitable that first waits for the flush (SYNC_FLUSH) and the slave
        (SYNC_MASTER) as the general path's ``_put_run`` does."""
        raw = self._store(conn, requests, sends, start, end, sys_flag_or, responses)
        if raw is None:
            return None
        if not wait:
            self._answer(requests, sends, topics, start, end, raw, responses)
            return None
        stored = raw

        async def answer_after_waits() -> None:
            self._answer(requests, sends, topics, start, end, await self._waited(stored), responses)

        return answer_after_waits()

    async def _waited(self, raw: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
        """``raw`` after the waits of the general path's ``_put_run``: a send not flushed in time FLUSH_DISK_TIMEOUT
        (SYNC_FLUSH), a stored one the slave's status where it has one (SYNC_MASTER)."""
        general = self._general
        if general._must_wait_flush() and not await general._flushed((t[0], t[1], t[3]) for t in raw):
            raw = [(PutMessageStatus.FLUSH_DISK_TIMEOUT, *t[1:]) if t[0] == PutMessageStatus.PUT_OK else t for t in raw]
        replica = await general._replica_status((t[0], t[1], t[3]) for t in raw)
        if replica is not None:
            raw = [(replica, *t[1:]) if t[0] in SEND_OK else t for t in raw]
        return raw

    def _store(
        self,
        conn: Connection,
        requests: list[RemotingCommand],
        sends: _core.SendRequestColumns,
        start: int,
        end: int,
        sys_flag_or: list[int],
        responses: Responses,
    ) -> list[tuple[int, int, int, int]] | None:
        """The plain sends ``[start, end)`` stored with one call (the flush not awaited): the store's result of
        each; None when the store refused the run before appending anything (every send then answered
        SYSTEM_ERROR). A run that one send fails validation (``REFUSED_BY_VALIDATION``: nothing appended) is
        put again send by send, so each gets its own verdict."""
        born_host = parse_address(conn.remote_address)
        store = self._general.message_store
        try:
            raw = store.put_send_requests(sends, start, end, sys_flag_or, born_host, wait_flush=False)
            if end - start > 1 and raw[0][0] in REFUSED_BY_VALIDATION:  # one send's verdict, not the run's
                raw = [
                    t
                    for i in range(start, end)
                    for t in store.put_send_requests(sends, i, i + 1, sys_flag_or, born_host, wait_flush=False)
                ]
        except Exception as e:  # refused before anything was appended: every send of the run gets the error
            log.exception("storing %d sends failed", end - start)
            for i in range(start, end):
                responses[i] = RemotingCommand.response_to(
                    requests[i], ResponseCode.SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}"
                )
            return None
        return raw

    def _answer(
        self,
        requests: list[RemotingCommand],
        sends: _core.SendRequestColumns,
        topics: list[str],
        start: int,
        end: int,
        raw: list[tuple[int, int, int, int]],
        responses: Responses,
    ) -> None:
        """The answers of the stored plain sends ``[start, end)`` (``raw``: each one's final status and store
        result) into ``responses``, and their put stats."""
        answers, totals = sends.answer(start, end, raw, self._plain_answer_spec())
        responses[start:end] = answers
        if None in answers:  # oneway sends (no answer) and sends the store refused (their error's answer)
            general = self._general
            for j, answer in enumerate(answers):
                request = requests[start + j]
                if answer is None and not request.is_oneway:
                    code, remark = general._status_to_code(PutMessageStatus(raw[j][0]))
                    responses[start + j] = general._send_response(request, code, remark)
        stats = self._general.broker_stats_manager
        for key, n, size in totals:
            stats.inc_put(topics[key], n, size, times=n)

    def _plain_answer_spec(self) -> _core.SendAnswerSpec:
        """The engine's settings of a plain send's answer (codes, counted statuses, region, trace switch, store
        host), built once and again when the broker's region or trace switch changes."""
        cfg = self._general.broker_config
        current = (cfg.region_id, cfg.trace_on)
        cached = self._answer_spec
        if cached is not None and cached[0] == current:
            return cached[1]
        spec = self._backend.SendAnswerSpec(
            _ANSWER_CODES,
            _COUNTED,
            cfg.region_id,
            "true" if cfg.trace_on else "false",
            self._general.message_store.config.store_host,
        )
        self._answer_spec = (current, spec)
        return spec
