"""ScheduleMessageService: RocketMQ's delay levels (4.9 ``st/schedule/ScheduleMessageService.java``).

Owns the delivery of messages stored in ``SCHEDULE_TOPIC_XXXX`` queue L − 1 (``redirect_to_schedule_topic``, called
by the send processor): once due (store timestamp + the level's delay) each is put again to its
``REAL_TOPIC``/``REAL_QID`` (``DELAY`` removed; a topic the ``InnerPutGuard`` refuses is logged and dropped).
Format: ``config/delayOffset.json`` (``{"offsetTable":{1:0,2:5}}``, the next offset per level, persisted by the
controller and at ``shutdown()``). Invariants: each level queue is in deliver-time order, so only its head can be
due; after a clean shutdown nothing is delivered twice or lost, after a crash at least once.
Thread-safety: the broker's event loop only (one ``call_later`` timer per level); under SYNC_FLUSH a re-put runs in
the loop's default executor; the store's arrival listener only hops to the loop.
Details: docs/BROKER_DESIGN.md, 'Delay levels'.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from rmq_core.broker.config_manager import ConfigManager
from rmq_core.common.clock import now_ms
from rmq_core.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from rmq_core.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    Message,
    MessageExt,
    decode_messages,
)
from rmq_core.remoting import fastjson
from rmq_core.store_status import GetMessageStatus, PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.inner_put_guard import InnerPutGuard
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.store import MessageStore, PutMessageResult

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = RMQ_SYS_SCHEDULE_TOPIC
TIME_UNIT_MS = {"s": 1000, "m": 60 * 1000, "h": 60 * 60 * 1000, "d": 24 * 60 * 60 * 1000}
DELAY_FOR_A_WHILE_S = 0.1  # retry after a failed re-put (4.9 DELAY_FOR_A_WHILE)
DELAY_FOR_A_PERIOD_S = 10.0  # back off after an unexpected error (4.9 DELAY_FOR_A_PERIOD)
EMPTY_QUEUE_POLL_S = 1.0  # an empty level queue is woken by arrivals; this is only the safety net
READ_BATCH = 32  # schedule units read per get_message
SCHEDULE_GROUP = "SCHEDULE_MESSAGE_SERVICE"  # only for logs: get_message does not use the group
_IN_FLIGHT = object()  # deliver_due: a SYNC_FLUSH re-put is running in the executor
_LEVEL = re.compile(r"^(\d+)([smhd])$")
_DELIVERABLE = (
    PutMessageStatus.PUT_OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE,
)


def parse_delay_levels(text: str) -> dict[int, int]:
    """``parseDelayLevel``: ``"1s 5s 10s 30s 1m ..."`` → {level (1-based): delay in ms}. Units s, m, h, d.
    Raises ValueError naming the bad entry (RocketMQ logs and refuses to load)."""
    levels: dict[int, int] = {}
    for i, item in enumerate(text.split()):
        m = _LEVEL.match(item)
        if m is None:
            raise ValueError(f"messageDelayLevel entry {i + 1} {item!r} in {text!r} is not <number><s|m|h|d>")
        levels[i + 1] = int(m.group(1)) * TIME_UNIT_MS[m.group(2)]
    if not levels:
        raise ValueError(f"messageDelayLevel {text!r} names no level")
    return levels


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


def delay_level_of(properties: Mapping[str, str]) -> int:
    """``Message.getDelayTimeLevel``: the ``DELAY`` property as an int, 0 when absent. ValueError if not a number."""
    raw = properties.get(PROPERTY_DELAY_TIME_LEVEL)
    if raw is None or raw == "":
        return 0
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"the DELAY property {raw!r} is not an integer delay level") from None


def redirect_to_schedule_topic(msg: Message, queue_id: int, max_delay_level: int) -> int:
    """4.9 ``CommitLog.putMessage`` for a non-transactional (or commit) message: when ``DELAY`` > 0, clamp it to
    ``max_delay_level``, record ``REAL_TOPIC``/``REAL_QID``, and move ``msg`` to ``SCHEDULE_TOPIC_XXXX``. Returns the
    queue id to store it in (``queue_id`` unchanged when there is no delay). ValueError for a non-integer DELAY."""
    level = delay_level_of(msg.properties)
    if level <= 0:
        return queue_id
    if level > max_delay_level:
        level = max_delay_level
        msg.properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    msg.properties[PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    msg.topic = SCHEDULE_TOPIC
    return delay_level_to_queue_id(level)


def message_timeup(msg_ext: MessageExt) -> tuple[Message, int]:
    """The message to put when a schedule record is due, and its queue id (``messageTimeup``). ValueError when the
    record has no usable REAL_TOPIC/REAL_QID."""
    props = dict(msg_ext.properties)
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    raw_qid = props.get(PROPERTY_REAL_QUEUE_ID)
    if not real_topic:
        raise ValueError(f"schedule message at commitlog offset {msg_ext.commitlog_offset} has no REAL_TOPIC")
    try:
        queue_id = int(raw_qid) if raw_qid is not None else -1
    except ValueError:
        queue_id = -1
    if queue_id < 0:
        raise ValueError(
            f"schedule message at commitlog offset {msg_ext.commitlog_offset} has no valid REAL_QID ({raw_qid!r})"
        )
    msg = Message(real_topic, msg_ext.body, flag=msg_ext.flag)
    msg.properties = props
    return msg, queue_id


class ScheduleMessageService(ConfigManager):
    """``ScheduleMessageService(broker_config, broker_stats_manager, inner_put_guard=None)`` (the guard checks each
    delivery's ``REAL_TOPIC``: the broker always gives one); ``start(message_store)`` / ``shutdown()`` on
    the broker's loop; ``persist()``,
    ``load()``; ``offset_table`` {level: next offset}; ``delay_level_table`` {level: ms}; ``max_delay_level``."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        broker_stats_manager: BrokerStatsManager | None = None,
        now_ms: Callable[[], int] = now_ms,
        inner_put_guard: InnerPutGuard | None = None,
    ) -> None:
        super().__init__(os.path.join(broker_config.store_config_dir, "delayOffset.json"))
        self.inner_put_guard = inner_put_guard
        self.broker_config = broker_config
        self.broker_stats_manager = broker_stats_manager
        self.now_ms = now_ms
        self.message_store: MessageStore | None = None  # the broker's store, from start() on
        self.delay_level_table: dict[int, int] = parse_delay_levels(broker_config.message_delay_level)
        self.max_delay_level: int = max(self.delay_level_table)
        self.offset_table: dict[int, int] = {}
        self._started = False
        self._handles: dict[int, asyncio.TimerHandle] = {}
        self._idle: dict[int, bool] = {}
        self._in_flight: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None

    # --- ConfigManager -------------------------------------------------------------------------------------------
    def encode(self, pretty: bool = False) -> str:
        return fastjson.dumps(
            {"offsetTable": {lvl: self.offset_table[lvl] for lvl in sorted(self.offset_table)}}, pretty=pretty
        )

    def decode(self, text: str) -> None:
        doc = fastjson.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("delayOffset.json is not a JSON object")
        raw = doc.get("offsetTable") or {}
        if not isinstance(raw, dict):
            raise ValueError("delayOffset.json: offsetTable is not an object")
        table: dict[int, int] = {}
        for k, v in raw.items():
            if isinstance(k, bool) or not isinstance(k, int) or isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"delayOffset.json: offsetTable entry {k!r}: {v!r} is not <level>: <offset>")
            table[k] = v
        self.offset_table = table

    def load(self) -> bool:
        """Read delayOffset.json (falling back to its .bak); clamp each offset into its queue when the store is open."""
        ok = super().load()
        self.correct_delay_offset()
        return ok

    def correct_delay_offset(self) -> None:
        """``correctDelayOffset``: an offset below the queue's min or above its max is moved to that bound."""
        store = self.message_store
        if store is None:
            return
        for level, offset in list(self.offset_table.items()):
            if level not in self.delay_level_table:
                continue
            queue_id = delay_level_to_queue_id(level)
            lo = store.get_min_offset_in_queue(SCHEDULE_TOPIC, queue_id)
            hi = store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id)
            fixed = min(max(offset, lo), hi)
            if fixed != offset:
                log.error(
                    "correct delay offset [delayLevel %d] from %d to %d (queue min %d, max %d)",
                    level,
                    offset,
                    fixed,
                    lo,
                    hi,
                )
                self.offset_table[level] = fixed

    # --- lifecycle -----------------------------------------------------------------------------------------------
    def start(self, message_store: MessageStore) -> None:
        """Load the offsets and start delivering on the broker's loop (call it on that loop)."""
        if self._started:
            return
        self.message_store = message_store
        self.load()
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.current_thread()
        self._started = True
        message_store.add_arrival_listener(self._on_arrival, topics=(SCHEDULE_TOPIC,))
        for level in sorted(self.delay_level_table):
            self._schedule(level, 0.0)

    @property
    def _store(self) -> MessageStore:
        if self.message_store is None:
            raise RuntimeError("ScheduleMessageService is not started")
        return self.message_store

    def shutdown(self) -> None:
        """Stop delivering and persist the offsets (idempotent; on the loop). Pending timers are cancelled at once;
        a SYNC_FLUSH re-put already handed to the executor may still complete, and is then delivered again after a
        restart (its offset was not advanced)."""
        if not self._started:
            return
        self._started = False
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        try:
            self._store.remove_arrival_listener(self._on_arrival)
        except ValueError:
            pass
        self.persist()

    @property
    def is_started(self) -> bool:
        return self._started

    def compute_deliver_timestamp(self, delay_level: int, store_timestamp: int) -> int:
        delay = self.delay_level_table.get(delay_level)
        return store_timestamp + (delay if delay is not None else 1000)

    # --- timers --------------------------------------------------------------------------------------------------
    def _schedule(self, level: int, delay_s: float, idle: bool = False) -> None:
        old = self._handles.pop(level, None)
        if old is not None:
            old.cancel()
        if not self._started or self._loop is None:
            return
        self._idle[level] = idle
        self._handles[level] = self._loop.call_later(max(delay_s, 0.0), self._run_level, level)

    def _run_level(self, level: int) -> None:
        self._handles.pop(level, None)
        self._idle[level] = False
        if not self._started or level in self._in_flight:
            return
        try:
            wait_s = self.deliver_due(level)
        except Exception:
            log.exception("schedule level %d: delivery failed; retrying in %.0f s", level, DELAY_FOR_A_PERIOD_S)
            wait_s = DELAY_FOR_A_PERIOD_S
        if wait_s is _IN_FLIGHT:
            return  # _put_done reschedules
        if wait_s is None:  # drained: an arrival wakes the level; the poll is only a safety net
            self._schedule(level, EMPTY_QUEUE_POLL_S, idle=True)
        else:
            self._schedule(level, float(wait_s))  # type: ignore[arg-type]

    def _on_arrival(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None, properties: Mapping[str, str] | None
    ) -> None:
        """Store arrival listener (any thread): wake a drained level when its queue gets a message."""
        if topic != SCHEDULE_TOPIC or not self._started:
            return
        level = queue_id_to_delay_level(queue_id)
        loop = self._loop
        if level not in self.delay_level_table or loop is None:
            return
        if threading.current_thread() is self._loop_thread:
            self._wake_level(level)
        else:
            try:
                loop.call_soon_threadsafe(self._wake_level, level)
            except RuntimeError:  # the loop is closed: the broker is going down
                pass

    def _wake_level(self, level: int) -> None:
        if self._started and self._idle.get(level):
            self._schedule(level, 0.0)

    # --- delivery ------------------------------------------------------------------------------------------------
    def deliver_due(self, level: int) -> float | object | None:
        """Deliver every due message of ``level`` in order (on the loop). Returns None when the level queue is
        drained, else the seconds until its head is due (0.1 s after a failed put, retried without advancing), or
        ``_IN_FLIGHT`` while a SYNC_FLUSH re-put runs in the executor."""
        store = self._store
        queue_id = delay_level_to_queue_id(level)
        delay_ms = self.delay_level_table[level]
        while self._started:
            offset = self.offset_table.get(level, 0)
            r = store.get_message(SCHEDULE_GROUP, SCHEDULE_TOPIC, queue_id, offset, READ_BATCH)
            status = r.status
            if status in (
                GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
                GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                GetMessageStatus.OFFSET_OVERFLOW_ONE,
            ):
                return None
            if status != GetMessageStatus.FOUND:
                fixed = r.next_begin_offset
                if status == GetMessageStatus.OFFSET_OVERFLOW_BADLY:
                    fixed = r.max_offset
                elif status == GetMessageStatus.OFFSET_TOO_SMALL:
                    fixed = r.min_offset
                if fixed == offset:
                    return DELAY_FOR_A_WHILE_S
                log.error(
                    "schedule level %d: offset %d is invalid (%s, queue min %d, max %d); moving to %d",
                    level,
                    offset,
                    status.name,
                    r.min_offset,
                    r.max_offset,
                    fixed,
                )
                self.offset_table[level] = fixed
                continue
            for msg_ext in decode_messages(r.body, decompress=False):  # re-put bodies byte for byte
                now = self.now_ms()
                deliver_at = msg_ext.store_timestamp + delay_ms
                if deliver_at > now + delay_ms:  # correctDeliverTimestamp: a store time in the future (clock step)
                    deliver_at = now
                if deliver_at > now:
                    self.offset_table[level] = msg_ext.queue_offset
                    return (deliver_at - now) / 1000.0
                outcome = self._deliver_one(level, msg_ext)
                if outcome is _IN_FLIGHT:
                    self.offset_table[level] = msg_ext.queue_offset
                    return _IN_FLIGHT
                if not outcome:
                    self.offset_table[level] = msg_ext.queue_offset
                    return DELAY_FOR_A_WHILE_S
                self.offset_table[level] = msg_ext.queue_offset + 1
                if not self._started:
                    return None
            if r.next_begin_offset > self.offset_table.get(level, 0):
                self.offset_table[level] = r.next_begin_offset
        return None

    def _deliver_one(self, level: int, msg_ext: MessageExt) -> bool | object:
        """Put one due message to its real topic: True when done (delivered, or skipped as undeliverable), False
        when the put failed, ``_IN_FLIGHT`` when handed to the executor (SYNC_FLUSH)."""
        try:
            msg, queue_id = message_timeup(msg_ext)
        except ValueError as e:
            log.error("schedule level %d: %s; skipped", level, e)
            return True
        if msg.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            log.error(
                "[BUG] the real topic of schedule msg is %s, discard the msg (commitlog offset %d)",
                msg.topic,
                msg_ext.commitlog_offset,
            )
            return True
        guard = self.inner_put_guard
        refusal = guard.refusal(msg.topic, queue_id) if guard is not None else None
        if refusal is not None:
            log.error(
                "schedule level %d: the real topic %s:%d of commitlog offset %d is refused (%s); dropped",
                level,
                msg.topic,
                queue_id,
                msg_ext.commitlog_offset,
                refusal.remark,
            )
            return True
        store = self._store

        def put() -> PutMessageResult:
            return store.put_message(
                msg,
                queue_id,
                msg_ext.born_host,
                born_timestamp=msg_ext.born_timestamp,
                sys_flag=msg_ext.sys_flag,
                reconsume_times=msg_ext.reconsume_times,
            )

        if store.config.flush_disk_type == "SYNC_FLUSH" and self._loop is not None:
            self._in_flight.add(level)
            fut = self._loop.run_in_executor(None, put)
            fut.add_done_callback(functools.partial(self._put_done, level, msg_ext, msg, queue_id))
            return _IN_FLIGHT
        return self._after_put(level, msg_ext, msg, queue_id, put())

    def _put_done(
        self, level: int, msg_ext: MessageExt, msg: Message, queue_id: int, fut: asyncio.Future[PutMessageResult]
    ) -> None:
        self._in_flight.discard(level)
        if not self._started or fut.cancelled():
            return
        try:
            ok = self._after_put(level, msg_ext, msg, queue_id, fut.result())
        except Exception:
            log.exception("schedule level %d: re-put of commitlog offset %d failed", level, msg_ext.commitlog_offset)
            ok = False
        if ok:
            self.offset_table[level] = msg_ext.queue_offset + 1
            self._schedule(level, 0.0)
        else:
            self._schedule(level, DELAY_FOR_A_WHILE_S)

    def _after_put(
        self, level: int, msg_ext: MessageExt, msg: Message, queue_id: int, result: PutMessageResult
    ) -> bool:
        if result.status not in _DELIVERABLE:
            log.error(
                "schedule level %d: re-put of commitlog offset %d to %s:%d failed (%s); retrying",
                level,
                msg_ext.commitlog_offset,
                msg.topic,
                queue_id,
                result.status.name,
            )
            return False
        stats = self.broker_stats_manager
        if stats is not None:
            try:
                stats.inc_topic_put_nums(msg.topic, 1, 1)
                stats.inc_topic_put_size(msg.topic, result.wrote_bytes)
            except Exception:  # statistics never stop delivery
                log.debug("broker stats failed", exc_info=True)
        return True
