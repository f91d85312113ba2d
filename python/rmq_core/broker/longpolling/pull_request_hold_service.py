"""PullRequestHoldService: RocketMQ's long polling (broker/longpolling/PullRequestHoldService.java, 4.9).

Owns the parked pulls (``PullRequest`` under ``"topic@queueId"``): woken by an arrival that passes the filter, by its
own deadline timer, or by the periodic sweep ``check_hold_request``. Invariants:
1. A parked pull is answered at most once: it leaves the table (and its timer is cancelled) before it is woken.
2. Wake-ups run on the loop *after* the current callback (``call_soon``), never inside the store's put call stack.
3. A pull whose connection closed is dropped (logged) when its connection closes, not run.
4. ``shutdown()`` answers every parked pull whose connection is open (re-run without suspension) and empties the
   table; nothing is parked afterwards (a late suspend is answered at once).
Thread-safety: everything runs on the broker's ``loop``; ``notify_message_arriving`` may be called from any thread
(the store calls its listeners on the putting thread): off the loop it hops over with ``call_soon_threadsafe``.
Details: docs/BROKER_DESIGN.md, 'Long polling'.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmq_core.common.clock import now_ms
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.format.cq_unit import CQ_STORE_UNIT_SIZE, decode_unit
from rmq_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.remoting.connection import Connection
    from rmq_core.remoting.remoting_server import RemotingServer
    from rmq_core.store import MessageStore

#: How a woken pull is run again: ``PullMessageProcessor.run_request_when_wakeup(conn, request)``.
RunRequestWhenWakeup = Callable[["Connection", RemotingCommand], None]

log = logging.getLogger(__name__)

TOPIC_QUEUEID_SEPARATOR = "@"
LONG_POLLING_CHECK_INTERVAL_MS = 5000
MAX_RECHECK_UNITS = 16000 // CQ_STORE_UNIT_SIZE  # the #7358 re-check scans at most this many new units, then just wakes
_MAX_TIMER_DELAY_S = 30 * 24 * 3600.0


@dataclass(eq=False)
class PullRequest:
    """One parked pull (broker/longpolling/PullRequest.java)."""

    request_command: RemotingCommand
    conn: Connection
    timeout_millis: int
    suspend_timestamp: int
    pull_from_this_offset: int
    subscription_data: SubscriptionData | None
    message_filter: Any
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def client_channel(self) -> Connection:
        return self.conn

    @property
    def deadline_ms(self) -> int:
        return self.suspend_timestamp + self.timeout_millis


def build_key(topic: str, queue_id: int) -> str:
    return f"{topic}{TOPIC_QUEUEID_SEPARATOR}{queue_id}"


class PullRequestHoldService:
    """``PullRequestHoldService(broker_config, message_store, loop, run_request_when_wakeup, remoting_server)``:
    ``start()``, ``suspend_pull_request``, ``notify_message_arriving``, ``check_hold_request``, ``shutdown()``."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        loop: asyncio.AbstractEventLoop,
        run_request_when_wakeup: RunRequestWhenWakeup,
        remoting_server: RemotingServer | None = None,
        now_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.broker_config = broker_config
        self.message_store = message_store
        self._loop = loop
        self.run_request_when_wakeup = run_request_when_wakeup
        self.remoting_server = remoting_server  # its closed connections drop their parked pulls
        self.now_ms = now_ms
        self.pull_request_table: dict[str, list[PullRequest]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._close_callback_registered = False

    # --- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def start(self) -> None:
        """Start the periodic check (an asyncio task on the broker loop) and listen for closed connections."""
        if not self._on_loop():
            self.loop.call_soon_threadsafe(self.start)
            return
        if self._task is not None:
            return
        self._stopped = False
        self._task = self.loop.create_task(self._run(), name="PullRequestHoldService")
        server = self.remoting_server
        if server is not None and not self._close_callback_registered:
            server.on_close.append(self._on_connection_closed)
            self._close_callback_registered = True

    def check_interval_ms(self) -> int:
        cfg = self.broker_config
        return LONG_POLLING_CHECK_INTERVAL_MS if cfg.long_polling_enable else max(1, int(cfg.short_polling_time_mills))

    async def _run(self) -> None:
        log.info("PullRequestHoldService service started")
        while not self._stopped:
            await asyncio.sleep(self.check_interval_ms() / 1000.0)
            begin = self._now()
            try:
                self.check_hold_request()
            except Exception:
                log.exception("PullRequestHoldService service has exception.")
            cost = self._now() - begin
            if cost > 5000:
                log.info("[NOTIFYME] check hold request cost %d ms.", cost)
        log.info("PullRequestHoldService service end")

    def shutdown(self) -> None:
        """Stop the periodic check; answer every parked pull on an open connection (invariant 4). Call it on the
        loop (off the loop it is scheduled there)."""
        if not self._on_loop() and self.loop.is_running():
            self.loop.call_soon_threadsafe(self.shutdown)
            return
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            self._task = None
        server = self.remoting_server
        if server is not None and self._close_callback_registered:
            try:
                server.on_close.remove(self._on_connection_closed)
            except ValueError:
                pass
            self._close_callback_registered = False
        table, self.pull_request_table = self.pull_request_table, {}
        for requests in table.values():
            for pr in requests:
                self._cancel_timer(pr)
                self._run_wakeup(pr)

    # --- parking -----------------------------------------------------------------------------------------------
    def suspend_pull_request(self, topic: str, queue_id: int, pull_request: PullRequest) -> None:
        """Park ``pull_request`` under ``topic@queueId`` with a timer for its deadline, then re-check the queue
        (apache/rocketmq#7358) and wake it at once when a matching message already arrived."""
        if self._stopped:  # invariant 4: nothing parks after shutdown
            self._wake(pull_request)
            return
        key = build_key(topic, queue_id)
        self.pull_request_table.setdefault(key, []).append(pull_request)
        delay_s = min(max(0.0, (pull_request.deadline_ms - self._now()) / 1000.0), _MAX_TIMER_DELAY_S)
        pull_request.timer = self.loop.call_at(self.loop.time() + delay_s, self._on_deadline, key, pull_request)
        self._recheck_after_parking(topic, queue_id, key, pull_request)

    def _recheck_after_parking(self, topic: str, queue_id: int, key: str, pr: PullRequest) -> None:
        try:
            newest = self.message_store.get_max_offset_in_queue(topic, queue_id)
        except Exception:
            log.exception("re-reading the max offset of %s after parking a pull failed", key)
            return
        if newest <= pr.pull_from_this_offset or not self._arrived_unit_matches(topic, queue_id, pr, newest):
            return
        if self._remove(key, pr):
            log.debug("pull on %s woken right after parking: offset %d < max %d", key, pr.pull_from_this_offset, newest)
            self._wake(pr)

    def _arrived_unit_matches(self, topic: str, queue_id: int, pr: PullRequest, newest: int) -> bool:
        """Does a ConsumeQueue unit in [request offset, newest) pass the pull's ConsumeQueue filter?"""
        mf = pr.message_filter
        selector = getattr(mf, "store_message_filter", None)
        if selector is None:  # match-all tags or SQL92: any new unit may match, as checkHoldRequest assumes
            return True
        count = newest - pr.pull_from_this_offset
        if count > MAX_RECHECK_UNITS:
            return True
        try:
            _, units = self.message_store.scan_consume_queue(topic, queue_id, max(0, pr.pull_from_this_offset), count)
        except Exception:
            log.exception("scanning %s@%d after parking a pull failed; waking it", topic, queue_id)
            return True
        for i in range(0, len(units) - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
            _phy_offset, _size, tags_code = decode_unit(units, i)
            if mf.is_matched_by_consume_queue(tags_code):
                return True
        return False

    # --- arrivals and the sweep --------------------------------------------------------------------------------
    def notify_message_arriving(
        self,
        topic: str,
        queue_id: int,
        max_offset: int,
        tags_code: int | None = None,
        msg_store_time: int = 0,
        properties: Mapping[str, str] | None = None,
        *,
        now_ms: int | None = None,
    ) -> None:
        """A message reached ``topic``/``queue_id`` (queue max offset now ``max_offset``): wake the parked pulls it
        satisfies, answer the expired ones, keep the rest. Callable from any thread."""
        if not self.pull_request_table:  # nothing parked anywhere (the common case on a busy send path)
            return
        if not self._on_loop():
            call = functools.partial(
                self._notify, topic, queue_id, max_offset, tags_code, msg_store_time, properties, now_ms
            )
            try:
                self.loop.call_soon_threadsafe(call)
            except RuntimeError:  # the loop is closed: the broker is gone, nobody is parked any more
                log.debug("arrival on %s@%d after the broker loop closed", topic, queue_id)
            return
        self._notify(topic, queue_id, max_offset, tags_code, msg_store_time, properties, now_ms)

    def _notify(
        self,
        topic: str,
        queue_id: int,
        max_offset: int,
        tags_code: int | None,
        msg_store_time: int,
        properties: Mapping[str, str] | None,
        now_ms: int | None,
    ) -> None:
        key = build_key(topic, queue_id)
        requests = self.pull_request_table.pop(key, None)
        if not requests:
            return
        now = self._now() if now_ms is None else now_ms
        replay: list[PullRequest] = []
        for pr in requests:
            newest = max_offset
            if newest <= pr.pull_from_this_offset:
                try:
                    newest = self.message_store.get_max_offset_in_queue(topic, queue_id)
                except Exception:
                    log.exception("reading the max offset of %s failed", key)
            if newest > pr.pull_from_this_offset:
                match = self._matches(pr, tags_code, properties)
                if match:
                    self._cancel_timer(pr)
                    self._wake(pr)
                    continue
            if now >= pr.deadline_ms:
                self._cancel_timer(pr)
                self._wake(pr)
                continue
            replay.append(pr)
        if replay:
            self.pull_request_table.setdefault(key, [])[:0] = replay

    @staticmethod
    def _matches(pr: PullRequest, tags_code: int | None, properties: Mapping[str, str] | None) -> bool:
        mf = pr.message_filter
        if mf is None:
            return True
        try:
            match = mf.is_matched_by_consume_queue(tags_code)
            if match and properties is not None:
                match = mf.is_matched_by_commit_log(properties)
            return bool(match)
        except Exception:
            log.exception("message filter %r failed on an arrival; waking the pull", mf)
            return True

    def check_hold_request(self, now_ms: int | None = None) -> None:
        """The sweep: every parked queue is notified with the store's max offset and no tag code."""
        for key in list(self.pull_request_table):
            topic, sep, qid = key.rpartition(TOPIC_QUEUEID_SEPARATOR)
            if not sep:
                continue
            try:
                queue_id = int(qid)
                offset = self.message_store.get_max_offset_in_queue(topic, queue_id)
                self._notify(topic, queue_id, offset, None, 0, None, now_ms)
            except Exception:
                log.exception("check hold request failed. topic=%s, queueId=%s", topic, qid)

    # --- deadlines, closed connections, waking -----------------------------------------------------------------
    def _on_deadline(self, key: str, pr: PullRequest) -> None:
        pr.timer = None
        if self._remove(key, pr):
            self._wake(pr)

    def _on_connection_closed(self, conn: Connection) -> None:
        for key in list(self.pull_request_table):
            requests = self.pull_request_table[key]
            gone = [pr for pr in requests if pr.conn is conn]
            if not gone:
                continue
            for pr in gone:
                self._cancel_timer(pr)
            kept = [pr for pr in requests if pr.conn is not conn]
            if kept:
                self.pull_request_table[key] = kept
            else:
                del self.pull_request_table[key]
            log.info("dropped %d parked pull(s) on %s: connection %s closed", len(gone), key, conn.remote_address)

    def _remove(self, key: str, pr: PullRequest) -> bool:
        requests = self.pull_request_table.get(key)
        if not requests:
            return False
        for i, other in enumerate(requests):
            if other is pr:
                del requests[i]
                if not requests:
                    del self.pull_request_table[key]
                self._cancel_timer(pr)
                return True
        return False

    @staticmethod
    def _cancel_timer(pr: PullRequest) -> None:
        if pr.timer is not None:
            pr.timer.cancel()
            pr.timer = None

    def _wake(self, pr: PullRequest) -> None:
        """Invariant 2: the re-run happens after the current callback (the put that notified us) finishes."""
        self.loop.call_soon(self._run_wakeup, pr)

    def _run_wakeup(self, pr: PullRequest) -> None:
        if pr.conn.closed:
            log.info("parked pull from %s dropped: connection closed", pr.conn.remote_address)
            return
        try:
            self.run_request_when_wakeup(pr.conn, pr.request_command)
        except Exception:
            log.exception("execute request when wakeup failed.")

    # --- introspection -----------------------------------------------------------------------------------------
    def parked(self, topic: str | None = None, queue_id: int | None = None) -> list[PullRequest]:
        """The parked pulls (of one queue when ``topic``/``queue_id`` are given), oldest first."""
        if topic is not None and queue_id is not None:
            return list(self.pull_request_table.get(build_key(topic, queue_id), ()))
        return [pr for requests in self.pull_request_table.values() for pr in requests]

    def _now(self) -> int:
        return int(self.now_ms())
