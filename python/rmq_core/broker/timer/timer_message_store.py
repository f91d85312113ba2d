"""TimerMessageStore: delivers timer messages at their time, RocketMQ 5's ``store/timer/TimerMessageStore.java``.

Owns the flow from ``rmq_sys_wheel_timer`` queue 0 to each message's ``REAL_TOPIC``/``REAL_QID``: enqueue (the timer
queue → timer log + wheel; rolls beyond ``timerRollWindowSlot``), dequeue (each timer put at its exact time, never
before; a ``REAL_TOPIC`` the ``InnerPutGuard`` refuses is logged and dropped), recovery, and the flush of the timer
log, the wheel and ``config/timercheck`` every ``timerFlushIntervalMs``. Formats: ``timer_log.py``, ``timer_wheel.py``.
Invariants (durability across kill -9): 1. every timer message below ``commit_queue_offset`` is filed or delivered;
2. every slot below ``commit_read_time_ms`` is delivered; 3. the checkpoint stores (2), (1) and the timer log
position of (1): nothing is lost or early; timers delivered since the last checkpoint are delivered again.
Thread-safety: the broker's event loop only (three tasks: enqueue, dequeue, flush); the store's arrival listener
only hops to the loop.
Details (flow, departure from 5.x, recovery, memory): docs/BROKER_DESIGN.md, 'Timer messages: the timer store'.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from rmq_core.broker.timer.timer_checkpoint import TimerCheckpoint
from rmq_core.broker.timer.timer_log import TimerLog
from rmq_core.broker.timer.timer_message_hook import TIMER_TOPIC, normalize_precision_ms
from rmq_core.broker.timer.timer_wheel import TimerWheel
from rmq_core.common.clock import now_ms
from rmq_core.format import timer as fmt
from rmq_core.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_ENQUEUE_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_TIMES,
    Message,
    MessageExt,
    decode_messages,
)
from rmq_core.store_status import GetMessageStatus, PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.inner_put_guard import InnerPutGuard
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

TIMER_GROUP = "TIMER_MESSAGE_STORE"  # only for logs
READ_BATCH = 32
ENQUEUE_BUDGET = 4096  # messages filed per turn of the loop
DELIVER_BUDGET = 2048  # timers put per turn of the loop
LOAD_SLOTS_BUDGET = 20000  # (empty) slots walked per turn of the loop when catching up
HEAP_CAP = 200_000  # timers loaded ahead of delivery at most
LOAD_AHEAD_MS = 100  # a slot is read this long before it begins
IDLE_WAIT_S = 0.5
RETRY_LATER_MS = 500  # 5.x: sleep 500 ms × precision / 1000 between put attempts
MAX_PUT_ATTEMPTS = 3  # 5.x with timerEnableRetryUntilSuccess=false
_DELIVERED = (
    PutMessageStatus.PUT_OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE,
)
_NO_RETRY = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)


class _Timer(NamedTuple):
    """One timer waiting in the heap: where its message is, its unit's magic and write time, and what it holds
    back: the slot it was loaded from (-1: none) or the queue offset it was enqueued from directly (-1: none)."""

    offset_py: int
    size_py: int
    magic: int
    enqueue_time_ms: int
    slot_ms: int
    direct_queue_offset: int
    attempts: int = 0


def exact_deliver_ms(props: Mapping[str, str], out_ms: int, store_timestamp: int, precision_ms: int) -> int:
    """The timer's own deliver time, within its slot ``(out_ms, out_ms + precision]`` (the slot's end when it
    cannot be told: a rolled message with only a relative delay, or a value outside the slot)."""
    end = out_ms + precision_ms
    try:
        if PROPERTY_TIMER_ROLL_TIMES in props:
            t = int(props[PROPERTY_TIMER_DELIVER_MS]) if PROPERTY_TIMER_DELIVER_MS in props else end
        elif PROPERTY_TIMER_DELAY_SEC in props:
            t = store_timestamp + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
        elif PROPERTY_TIMER_DELAY_MS in props:
            t = store_timestamp + int(props[PROPERTY_TIMER_DELAY_MS])
        elif PROPERTY_TIMER_DELIVER_MS in props:
            t = int(props[PROPERTY_TIMER_DELIVER_MS])
        else:
            t = end
    except ValueError:
        t = end
    return t if out_ms < t <= end else end


class TimerMessageStore:
    """``TimerMessageStore(broker_config, message_store, broker_stats_manager=None, now_ms=now_ms,
    inner_put_guard=None)`` (the guard checks each delivery's ``REAL_TOPIC``: the broker always gives one); ``load()``
    (recovery), ``start()`` / ``shutdown()`` on the broker's loop; ``flush_checkpoint()``; figures:
    ``pending_in_heap``, ``curr_read_time_ms``, ``curr_queue_offset``, ``enqueued``, ``delivered``."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        broker_stats_manager: BrokerStatsManager | None = None,
        now_ms: Callable[[], int] = now_ms,
        inner_put_guard: InnerPutGuard | None = None,
    ) -> None:
        cfg = broker_config
        self.inner_put_guard = inner_put_guard
        root = cfg.store_path_root_dir
        self.broker_config = cfg
        self.message_store = message_store
        self.broker_stats_manager = broker_stats_manager
        self.now_ms = now_ms
        self.precision_ms = normalize_precision_ms(cfg.timer_precision_ms)
        slots = fmt.SLOTS_TOTAL
        window = cfg.timer_roll_window_slot
        self.roll_window_slots = (
            slots - fmt.TIMER_BLANK_SLOTS if window > slots - fmt.TIMER_BLANK_SLOTS or window < 2 else window
        )
        self.timer_log = TimerLog(os.path.join(root, fmt.TIMER_LOG_DIR), cfg.mapped_file_size_timer_log)
        self.timer_wheel = TimerWheel(os.path.join(root, fmt.TIMER_WHEEL_FILE), self.precision_ms)
        try:
            self.timer_checkpoint = TimerCheckpoint(os.path.join(cfg.store_config_dir, fmt.TIMER_CHECK_FILE))
        except BaseException:
            self.timer_wheel.close()
            raise
        self.curr_queue_offset = 0
        self.curr_read_time_ms = 0
        self.commit_read_time_ms = 0
        self._heap: list[tuple[int, int, _Timer]] = []
        self._seq = 0
        self._loaded: OrderedDict[int, int] = OrderedDict()  # slot ms → timers of it not yet delivered
        self._direct: OrderedDict[int, int] = OrderedDict()  # queue offset → timer log position then
        self._skip_py: set[int] = set()  # recovery: messages already filed after the checkpoint's position
        self._file_max_slot: dict[int, int] = {}  # timer log file start → the latest slot of its units (this run)
        self.enqueued = 0
        self.delivered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._enqueue_wake = asyncio.Event()
        self._dequeue_wake = asyncio.Event()
        self._started = False
        self._closed = False

    @classmethod
    def open(
        cls,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        broker_stats_manager: BrokerStatsManager | None = None,
        inner_put_guard: InnerPutGuard | None = None,
    ) -> TimerMessageStore:
        """Map the files and recover; on failure (a timer file of the wrong size, an unreadable file) the files
        opened so far are closed and the error raised (the broker then refuses to start, naming the file)."""
        ts = cls(broker_config, message_store, broker_stats_manager, inner_put_guard=inner_put_guard)
        try:
            ts.load()
        except BaseException:
            ts.close_unstarted()
            raise
        return ts

    # --- recovery ------------------------------------------------------------------------------------------------
    def load(self) -> None:
        """Map the timer log and recover (5.x ``load`` + ``recover``)."""
        self.timer_log.load()
        self.recover()

    def recover(self) -> None:
        cp = self.timer_checkpoint.data
        flush_pos = cp.last_timer_log_flush_pos
        tl = self.timer_log
        if flush_pos >= tl.min_pos and tl.unit_ok_before(flush_pos):
            # the wheel's links up to the checkpoint's position were flushed with it (timer log first, then the
            # wheel, then the checkpoint): re-link from there (5.x goes back one whole file, ≈2 M units)
            process_offset, units = tl.scan_valid(flush_pos, from_file_start=False)
        else:
            process_offset, units = tl.scan_valid(max(0, flush_pos - tl.file_size))
        for pos, u in units:
            self.timer_wheel.revise_slot(u.delayed_time_ms, fmt.IGNORE, pos, True)
        self.timer_log.truncate_dirty(process_offset)
        self._skip_py = {u.offset_py for pos, u in units if pos >= flush_pos}
        store = self.message_store
        lo = store.get_min_offset_in_queue(TIMER_TOPIC, 0)
        hi = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        self.curr_queue_offset = min(max(cp.last_timer_queue_offset, lo), hi)
        p = self.precision_ms
        now_slot = self.now_ms() // p * p
        if cp.last_read_time_ms == 0 and not units and self.timer_log.write_pos == 0:
            read = now_slot  # a new timer store
        else:
            read = max(cp.last_read_time_ms // p * p, now_slot - fmt.SLOTS_TOTAL * p + fmt.TIMER_BLANK_SLOTS * p)
        self.curr_read_time_ms = read
        self.commit_read_time_ms = read
        # 5.x: a slot whose last position is past the valid end (the wheel reached the disk before the timer log,
        # a machine crash) is linked again from the earliest first position among such slots (≈0.15 s for the wheel)
        min_first = self.timer_wheel.check_phy_pos(read, process_offset)
        if min_first < process_offset:
            log.warning(
                "timer recheck: a slot links past the timer log's end %d; re-linking from %d", process_offset, min_first
            )
            for pos, u in self.timer_log.units_in(max(min_first, self.timer_log.min_pos), process_offset):
                self.timer_wheel.revise_slot(u.delayed_time_ms, fmt.IGNORE, pos, True)
        log.info(
            "timer recover ok: read time %d, queue offset %d (CQ %d..%d), timer log end %d, %d units re-linked",
            read,
            self.curr_queue_offset,
            lo,
            hi,
            process_offset,
            len(units),
        )

    # --- lifecycle -----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start enqueueing and delivering (call on the broker's loop)."""
        if self._started:
            return
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.current_thread()
        self._enqueue_wake = asyncio.Event()
        self._dequeue_wake = asyncio.Event()
        self._started = True
        self.message_store.add_arrival_listener(self._on_arrival, topics=(TIMER_TOPIC,))
        self._tasks = [
            loop.create_task(self._enqueue_service(), name="timer enqueue"),
            loop.create_task(self._dequeue_service(), name="timer dequeue"),
            loop.create_task(self._flush_service(), name="timer flush"),
        ]

    async def shutdown(self) -> None:
        """Stop, write the checkpoint and close the files (on the loop; idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._started:
            self._started = False
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
            try:
                self.message_store.remove_arrival_listener(self._on_arrival)
            except ValueError:
                pass
        self.flush_checkpoint()
        self.timer_log.close()
        self.timer_wheel.close()
        self.timer_checkpoint.close(flush=False)

    def close_unstarted(self) -> None:
        """Close the files of a timer store that was loaded but never started."""
        if not self._closed and not self._started:
            self._closed = True
            self.timer_log.close()
            self.timer_wheel.close()
            self.timer_checkpoint.close(flush=False)

    def _on_arrival(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None, properties: Mapping[str, str] | None
    ) -> None:
        if topic != TIMER_TOPIC or not self._started:
            return
        if threading.current_thread() is self._loop_thread:
            self._enqueue_wake.set()
        elif self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._enqueue_wake.set)
            except RuntimeError:
                pass

    # --- commit points -------------------------------------------------------------------------------------------
    @property
    def commit_queue_offset(self) -> int:
        for q in self._direct:
            return q
        return self.curr_queue_offset

    def _commit_timer_log_pos(self) -> int:
        for pos in self._direct.values():
            return pos
        return self.timer_log.write_pos

    def _update_commit_read_time(self) -> None:
        loaded = self._loaded
        while loaded:
            slot, left = next(iter(loaded.items()))
            if left > 0:
                self.commit_read_time_ms = slot
                return
            loaded.popitem(last=False)
        self.commit_read_time_ms = self.curr_read_time_ms

    def flush_checkpoint(self) -> None:
        """5.x ``TimerFlushService``: flush the timer log and the wheel, then the checkpoint (nothing before the
        first timer: a broker that never had one writes no timer file)."""
        if not self.timer_wheel.exists:
            return
        self.timer_log.flush()
        self.timer_wheel.flush()
        self.timer_checkpoint.update(
            self.commit_read_time_ms, self._commit_timer_log_pos(), self.commit_queue_offset, self.now_ms()
        )
        self.timer_checkpoint.flush()

    @property
    def pending_in_heap(self) -> int:
        return len(self._heap)

    def delivered_before_ms(self) -> int:
        """Every timer message due before this time (epoch ms) has been put to its topic, as far as the messages
        filed so far go (0 while messages of the timer topic wait to be filed): what the POP revive service waits
        for before it decides a checkpoint (broker/pop/pop_revive_service.py)."""
        store = self.message_store
        if self.curr_queue_offset < store.get_max_offset_in_queue(TIMER_TOPIC, 0):
            return 0
        bound = min(self.curr_read_time_ms, self.now_ms())
        if self._heap:
            bound = min(bound, self._heap[0][0])
        return bound

    # --- enqueue -------------------------------------------------------------------------------------------------
    async def _enqueue_service(self) -> None:
        wait = 0.1 * self.precision_ms / 1000  # 5.x: waitForRunning(100 ms × precision / 1000) when idle
        while self._started:
            try:
                more = self.enqueue()
            except Exception:
                log.exception("timer enqueue failed; retrying")
                more = False
            if more:
                await asyncio.sleep(0)
                continue
            self._enqueue_wake.clear()
            try:
                await asyncio.wait_for(self._enqueue_wake.wait(), wait)
            except TimeoutError:
                pass

    def enqueue(self, budget: int = ENQUEUE_BUDGET) -> bool:
        """File the timer messages stored since ``curr_queue_offset``; True when there may be more."""
        store = self.message_store
        done = 0
        while done < budget:
            offset = self.curr_queue_offset
            r = store.get_message(TIMER_GROUP, TIMER_TOPIC, 0, offset, READ_BATCH)
            if r.status != GetMessageStatus.FOUND:
                if r.status == GetMessageStatus.OFFSET_TOO_SMALL:
                    log.warning("timer queue offset %d is below the queue's min %d", offset, r.min_offset)
                    self.curr_queue_offset = r.min_offset
                    continue
                if r.status == GetMessageStatus.OFFSET_OVERFLOW_BADLY and r.max_offset < offset:
                    log.warning("timer queue offset %d is past the queue's max %d", offset, r.max_offset)
                    self.curr_queue_offset = r.max_offset
                    continue
                if r.status in (GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.NO_MATCHED_MESSAGE):
                    if r.next_begin_offset > offset:
                        self.curr_queue_offset = r.next_begin_offset
                        continue
                return False
            for m in decode_messages(r.body, decompress=False):
                self._enqueue_one(m)
                self.curr_queue_offset = m.queue_offset + 1
                done += 1
            if r.next_begin_offset > self.curr_queue_offset:
                self.curr_queue_offset = r.next_begin_offset
        return True

    def _enqueue_one(self, m: MessageExt) -> None:
        props = m.properties
        try:
            out_ms = int(props[PROPERTY_TIMER_OUT_MS])
        except (KeyError, ValueError):
            log.error(
                "timer message at commitlog offset %d has no valid TIMER_OUT_MS (%r); skipped",
                m.commitlog_offset,
                props.get(PROPERTY_TIMER_OUT_MS),
            )
            return
        if self._skip_py:
            if m.commitlog_offset in self._skip_py:
                self._skip_py.discard(m.commitlog_offset)
                return
        self.enqueued += 1
        p = self.precision_ms
        deliver = exact_deliver_ms(props, out_ms, m.store_timestamp, p)
        if out_ms // p * p < self.curr_read_time_ms:
            # its slot has been read already (5.x: delayTime < currWriteTimeMs → straight to the put)
            self._direct[m.queue_offset] = self.timer_log.write_pos
            # 5.x marks these TIMER_ENQUEUE_MS = Long.MAX_VALUE
            timer = _Timer(m.commitlog_offset, m.store_size, fmt.MAGIC_DEFAULT, (1 << 63) - 1, -1, m.queue_offset)
            self._push(deliver, timer)
            return
        self.do_enqueue(m.commitlog_offset, m.store_size, out_ms, deliver, props.get(PROPERTY_REAL_TOPIC))

    def do_enqueue(self, offset_py: int, size_py: int, delayed_ms: int, deliver_ms: int, real_topic: str | None) -> int:
        """5.x ``doEnqueue``: append a unit for the message at ``offset_py`` in the slot of ``delayed_ms`` (or at
        the end / the middle of the roll window) and link it into the slot; returns its position."""
        p = self.precision_ms
        write_ms = self.now_ms() // p * p  # 5.x currWriteTimeMs
        magic = fmt.MAGIC_DEFAULT
        window = self.roll_window_slots * p
        if delayed_ms - write_ms >= window:
            magic |= fmt.MAGIC_ROLL
            if delayed_ms - write_ms - window < self.roll_window_slots // 3 * p:
                delayed_ms = write_ms + self.roll_window_slots // 2 * p
            else:
                delayed_ms = write_ms + window
            deliver_ms = delayed_ms // p * p
        wheel = self.timer_wheel
        wheel.ensure()  # before the unit: a full disk fails here, with nothing half written
        slot = wheel.get_slot(delayed_ms)
        unit = fmt.encode_unit(
            slot.last_pos,
            magic,
            write_ms,
            delayed_ms - write_ms,
            offset_py,
            size_py,
            fmt.topic_hash(real_topic),
            deliver_ms,
        )
        pos = self.timer_log.append(unit)
        file_start = pos - (pos - self.timer_log.min_pos) % self.timer_log.file_size
        if self._file_max_slot.get(file_start, -1) < delayed_ms:
            self._file_max_slot[file_start] = delayed_ms
        wheel.put_slot(delayed_ms, pos if slot.first_pos == -1 else slot.first_pos, pos, slot.num + 1, slot.magic)
        return pos

    # --- dequeue -------------------------------------------------------------------------------------------------
    def _push(self, deliver_ms: int, timer: _Timer) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (deliver_ms, self._seq, timer))
        self._dequeue_wake.set()

    def load_slots(self, now: int) -> int:
        """Read the slots that begin within ``LOAD_AHEAD_MS`` into the heap; returns how many were walked."""
        p = self.precision_ms
        walked = 0
        while (
            self.curr_read_time_ms <= now + LOAD_AHEAD_MS and len(self._heap) < HEAP_CAP and walked < LOAD_SLOTS_BUDGET
        ):
            t = self.curr_read_time_ms
            n = self._load_slot(t)
            if n:
                self._loaded[t] = n
            self.curr_read_time_ms = t + p
            walked += 1
        if not self._loaded:
            self.commit_read_time_ms = self.curr_read_time_ms
        return walked

    def _load_slot(self, t: int) -> int:
        slot = self.timer_wheel.get_slot(t)
        if slot.time_ms == -1:
            return 0
        p = self.precision_ms
        found: list[tuple[int, _Timer]] = []
        pos = slot.last_pos
        while pos != -1:
            u = self.timer_log.read_unit(pos)
            if u is None or u.size != fmt.UNIT_SIZE:
                log.error("timer slot %d: no unit at timer log position %d; the rest of the slot is skipped", t, pos)
                break
            if not (fmt.need_delete(u.magic) and not fmt.need_roll(u.magic)):  # delete markers: not delivered
                if fmt.need_roll(u.magic):
                    deliver = t
                else:
                    r = u.reserved
                    deliver = r if t < r <= t + p else t + p
                found.append((deliver, _Timer(u.offset_py, u.size_py, u.magic, u.curr_write_time_ms, t, -1)))
            if u.prev_pos >= pos:
                log.error("timer slot %d: unit at %d links forward to %d; the rest is skipped", t, pos, u.prev_pos)
                break
            pos = u.prev_pos
        # the chain runs backwards: number in append order, so timers due at the same ms go in the order they came
        heap = self._heap
        for deliver, timer in reversed(found):
            self._seq += 1
            heap.append((deliver, self._seq, timer))
        if found:
            heapq.heapify(heap)
        return len(found)

    async def _dequeue_service(self) -> None:
        while self._started:
            try:
                wait_s = self.dequeue()
            except Exception:
                log.exception("timer dequeue failed; retrying")
                wait_s = 1.0
            if wait_s <= 0:
                await asyncio.sleep(0)
                continue
            self._dequeue_wake.clear()
            try:
                await asyncio.wait_for(self._dequeue_wake.wait(), wait_s)
            except TimeoutError:
                pass

    def dequeue(self) -> float:
        """Load the slots about to begin and put every due timer; returns the seconds until there is work again
        (0: more now)."""
        now = self.now_ms()
        walked = self.load_slots(now)
        heap = self._heap
        put = 0
        while heap and heap[0][0] <= now and put < DELIVER_BUDGET:
            _, _, timer = heapq.heappop(heap)
            self._deliver(timer, now)
            put += 1
            if put % 256 == 0:
                now = self.now_ms()
        self._update_commit_read_time()
        if put >= DELIVER_BUDGET or walked >= LOAD_SLOTS_BUDGET:
            return 0.0
        now = self.now_ms()
        next_load = self.curr_read_time_ms - LOAD_AHEAD_MS if len(heap) < HEAP_CAP else now + 1000
        nxt = min(heap[0][0], next_load) if heap else next_load
        return min(max(nxt - now, 0) / 1000.0, IDLE_WAIT_S) if nxt > now else 0.0

    def _deliver(self, timer: _Timer, now: int) -> None:
        outcome = self._put(timer, now)
        if outcome is None:  # retry later
            self._seq += 1
            heapq.heappush(self._heap, (now + RETRY_LATER_MS, self._seq, timer._replace(attempts=timer.attempts + 1)))
            return
        if timer.slot_ms >= 0:
            left = self._loaded.get(timer.slot_ms)
            if left is not None:
                self._loaded[timer.slot_ms] = left - 1
        if timer.direct_queue_offset >= 0:
            self._direct.pop(timer.direct_queue_offset, None)
        if outcome:
            self.delivered += 1

    def _put(self, timer: _Timer, now: int) -> bool | None:
        """Put the timer's message to its topic (or back to the timer topic for a roll): True when put, False
        when skipped for good, None to retry later."""
        store = self.message_store
        raw = store.read_commit_log(timer.offset_py, timer.size_py)
        if raw is None:
            log.warning("timer: no message at commitlog offset %d (size %d); skipped", timer.offset_py, timer.size_py)
            return False
        try:
            m = decode_messages(raw, decompress=False)[0]
        except Exception as e:
            log.error("timer: the record at commitlog offset %d does not decode (%s); skipped", timer.offset_py, e)
            return False
        roll = fmt.need_roll(timer.magic)
        props = dict(m.properties)
        props[PROPERTY_TIMER_ENQUEUE_MS] = str(timer.enqueue_time_ms)
        if roll:
            props[PROPERTY_TIMER_ROLL_TIMES] = str(int(props.get(PROPERTY_TIMER_ROLL_TIMES, "0") or 0) + 1)
            topic, queue_id = m.topic, m.queue_id
        else:
            # REAL_TOPIC/REAL_QID stay in the record: 5.x's convertMessage clears them from the map only after
            # the properties string is made, so its delivered records carry them (seen against 5.3.3's broker)
            topic = props.get(PROPERTY_REAL_TOPIC, "")
            raw_qid = props.get(PROPERTY_REAL_QUEUE_ID, "")
            try:
                queue_id = int(raw_qid)
            except ValueError:
                queue_id = -1
            if not topic or queue_id < 0:
                log.error(
                    "timer message at commitlog offset %d has no valid REAL_TOPIC/REAL_QID (%r, %r); skipped",
                    timer.offset_py,
                    topic,
                    raw_qid,
                )
                return False
            guard = self.inner_put_guard
            refusal = guard.refusal(topic, queue_id) if guard is not None else None
            if refusal is not None:
                log.error(
                    "timer message at commitlog offset %d: its REAL_TOPIC %s:%d is refused (%s); dropped",
                    timer.offset_py,
                    topic,
                    queue_id,
                    refusal.remark,
                )
                return False
        props[PROPERTY_TIMER_DEQUEUE_MS] = str(now)
        msg = Message(topic, m.body, flag=m.flag)
        msg.properties = props
        result = store.put_message(
            msg,
            queue_id,
            m.born_host,
            born_timestamp=m.born_timestamp,
            sys_flag=m.sys_flag,
            reconsume_times=m.reconsume_times,
            wait_flush=False,
        )
        if result.status in _DELIVERED:
            stats = self.broker_stats_manager
            if stats is not None and not roll:
                try:
                    stats.inc_topic_put_nums(topic, 1, 1)
                    stats.inc_topic_put_size(topic, result.wrote_bytes)
                except Exception:
                    log.debug("broker stats failed", exc_info=True)
            return True
        if result.status in _NO_RETRY or timer.attempts + 1 >= MAX_PUT_ATTEMPTS:
            log.error(
                "timer: put of commitlog offset %d to %s:%d failed (%s) %d times; skipped",
                timer.offset_py,
                topic,
                queue_id,
                result.status.name,
                timer.attempts + 1,
            )
            return False
        return None

    # --- flush ---------------------------------------------------------------------------------------------------
    async def _flush_service(self) -> None:
        interval = max(self.broker_config.timer_flush_interval_ms, 10) / 1000.0
        while self._started:
            await asyncio.sleep(interval)
            try:
                self.flush_checkpoint()
                self._clean_timer_log()
            except Exception:
                log.exception("timer flush failed")

    def _clean_timer_log(self) -> None:
        """Delete the timer log's head files once no slot still to be read can reach them: every unit of a file
        lies in a slot below the commit read time (5.x deletes by the CommitLog's min offset instead)."""
        tl = self.timer_log
        if len(tl.files) < 2:
            return
        limit = self.commit_read_time_ms
        while len(tl.files) > 1:
            head = tl.files[0]
            if not self._file_done(head.start, head.end, limit):
                return
            tl.delete_files_before(head.end)
            self._file_max_slot.pop(head.start, None)

    def _file_done(self, start: int, end: int, limit: int) -> bool:
        """True when every unit of the file ``[start, end)`` lies in a slot below ``limit``: the latest slot is known
        for files written since the start; for older ones it is bounded by the last unit's write time + the roll
        window (no unit is filed further ahead than that)."""
        m = self._file_max_slot.get(start)
        if m is None:
            last = self.timer_log.last_unit_in(start, end)
            if last is None:
                return True
            m = last.curr_write_time_ms + self.roll_window_slots * self.precision_ms
        return m < limit
