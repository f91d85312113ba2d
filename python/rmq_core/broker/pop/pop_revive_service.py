"""PopReviveService (5.x ``broker/processor/PopReviveService.java``): redelivers what was popped and not acked.

Each revive queue of ``rmq_sys_REVIVE_LOG_{cluster}`` is read as group ``CID_RMQ_SYS_REVIVE_GROUP`` from its
committed offset + 1 (Apache's convention: the committed value is the last offset done). The timer wheel puts a CK
there 1 s before its revive time and an ACK at it; a CK is decided once the timer has put every timer message due
up to its revive time (``TimerMessageStore.delivered_before_ms``) and the queue was read to its end after that: then each offset not acked is put to ``%RETRY%{group}_{topic}`` queue 0 (reconsumeTimes + 1,
``1ST_POP_TIME`` kept), or to ``%DLQ%{group}`` once reconsumeTimes + 1 exceeds the group's ``retryMaxTimes``
(departure: Apache's proxy does that at the next pop). The committed offset stays below the oldest undecided CK, so a
restart reads the undecided CKs and their ACKs again. A CK whose re-put failed is put back to its revive queue, due
after 1 s doubling up to 2 h (5.x ``rePutCK``).
Thread-safety: the broker's event loop (one task).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rmq_core.broker.pop import extra_info as ei
from rmq_core.broker.pop.pop_records import AckMsg, PopCheckPoint, ck_unique_id
from rmq_core.common import mix_all
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.message import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    MessageExt,
    decode_messages,
)
from rmq_core.store_status import GetMessageStatus, PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.inner_put_guard import InnerPutGuard
    from rmq_core.broker.pop.pop_service import PopService

log = logging.getLogger(__name__)

REVIVE_INTERVAL_S = 0.5
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 7200.0  # a CK whose re-put failed comes back after this long, doubling
READ_BATCH = 32
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT)


@dataclass
class _ReviveQueue:
    queue_id: int
    next_offset: int
    committed: int
    cks: dict[str, PopCheckPoint] = field(default_factory=dict)


class PopReviveService:
    """``PopReviveService(pop_service, inner_put_guard)``: ``start()`` / ``stop()`` on the broker's loop;
    ``revive_once()`` runs one pass over every revive queue and returns how many messages it re-put."""

    def __init__(self, pop_service: PopService, inner_put_guard: InnerPutGuard) -> None:
        self.pop = pop_service
        self.guard = inner_put_guard
        self.revive_topic = pop_service.revive_topic
        self._queues: list[_ReviveQueue] | None = None
        self._task: asyncio.Task[None] | None = None
        self.revived = 0
        self.dead_lettered = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pop-revive")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                self.revive_once()
            except Exception:
                log.exception("pop revive pass failed")
            await asyncio.sleep(REVIVE_INTERVAL_S)

    def _load(self) -> list[_ReviveQueue]:
        com = self.pop.consumer_offset_manager
        queues = []
        for qid in range(mix_all.REVIVE_QUEUE_NUM):
            committed = com.query_offset(ei.REVIVE_GROUP, self.revive_topic, qid)
            queues.append(_ReviveQueue(qid, max(committed, -1) + 1, committed))
        return queues

    def _safe_time(self) -> int:
        """Every ACK due before this time is in the revive queues (0: not known now)."""
        timer = self.pop.timer_message_store
        return 0 if timer is None else timer.delivered_before_ms()

    def revive_once(self) -> int:
        if self._queues is None:
            self._queues = self._load()
        safe = self._safe_time()
        done = 0
        for q in self._queues:
            self._read(q)
            done += self._revive(q, safe)
        if done:  # what was re-put is recorded at once: a crash now must not re-put it again
            self.pop.consumer_offset_manager.persist()
        return done

    def _read(self, q: _ReviveQueue) -> None:
        store = self.pop.message_store
        while True:
            r = store.get_message(ei.REVIVE_GROUP, self.revive_topic, q.queue_id, q.next_offset, READ_BATCH)
            if r.status != GetMessageStatus.FOUND:
                if r.next_begin_offset > q.next_offset and r.status != GetMessageStatus.NO_MESSAGE_IN_QUEUE:
                    q.next_offset = r.next_begin_offset
                    continue
                return
            for m in decode_messages(r.body, decompress=False):
                self._take(q, m)
                q.next_offset = m.queue_offset + 1
            if r.next_begin_offset > q.next_offset:
                q.next_offset = r.next_begin_offset

    def _take(self, q: _ReviveQueue, m: MessageExt) -> None:
        tag = m.tags
        try:
            if tag == ei.CK_TAG:
                ck = PopCheckPoint.decode(m.body)
                if ck.topic is None or ck.cid is None:
                    return
                ck.revive_offset = m.queue_offset
                q.cks[ck.merge_key] = ck
            elif tag in (ei.ACK_TAG, ei.BATCH_ACK_TAG):
                ack = AckMsg.decode(m.body, batch=tag == ei.BATCH_ACK_TAG)
                point = q.cks.get(ack.merge_key)
                if point is None:
                    return  # its CK was decided already (a late ack) or never stored
                for off in ack.offsets():
                    i = point.index_of_ack(off)
                    if i > -1:
                        point.bit_map |= 1 << i
        except (ValueError, TypeError, KeyError) as e:
            log.warning("revive queue %d offset %d: unreadable %s record (%s)", q.queue_id, m.queue_offset, tag, e)

    def _revive(self, q: _ReviveQueue, safe: int) -> int:
        done = 0
        for key, ck in list(q.cks.items()):
            if ck.revive_time >= safe:
                continue
            ok, n = self._revive_ck(ck)
            done += n
            if ok or self._re_put_ck(ck, q.queue_id):
                del q.cks[key]
        low = min((ck.revive_offset for ck in q.cks.values()), default=q.next_offset) - 1
        if low > q.committed:
            self.pop.consumer_offset_manager.commit_offset(
                ei.REVIVE_GROUP_HOST, ei.REVIVE_GROUP, self.revive_topic, q.queue_id, low
            )
            q.committed = low
        return done

    def _re_put_ck(self, ck: PopCheckPoint, queue_id: int) -> bool:
        """5.x ``rePutCK``: a CK whose re-put failed goes back to its revive queue (what was re-put already marked in
        its bitmap, ``rp`` + 1), due after 1 s doubling with each try up to 2 h, so the revive offset moves on."""
        times = ck.re_put_times_count() + 1
        delay_ms = int(min(RETRY_FIRST_S * 2 ** (times - 1), RETRY_MAX_S) * 1000)
        again = replace(ck, re_put_times=str(times))
        deliver = int(time.time() * 1000) + delay_ms
        return self.pop.put_revive(again.encode(), ei.CK_TAG, queue_id, deliver, ck_unique_id(again))

    def _revive_ck(self, ck: PopCheckPoint) -> tuple[bool, int]:
        """Re-put the CK's unacked messages; (decided, how many were put)."""
        pop = self.pop
        normal = ei.parse_normal_topic(ck.topic, ck.cid)
        if pop.topic_config_manager.select_topic_config(normal) is None:
            return True, 0
        group_cfg = pop.subscription_group_manager.subscription_group_table.get(ck.cid)
        if group_cfg is None:
            return True, 0
        n = 0
        for i in range(ck.num):
            if (ck.bit_map >> i) & 1:
                continue
            off = ck.ack_offset_by_index(i)
            r = pop.message_store.get_message(ck.cid, ck.topic, ck.queue_id, off, 1)
            if r.status != GetMessageStatus.FOUND:
                log.warning("revive: %s:%d offset %d is gone (%s)", ck.topic, ck.queue_id, off, r.status.name)
                ck.bit_map |= 1 << i
                pop.inflight.decrement(ck.cid, ck.topic, ck.queue_id, ck.pop_time)
                continue
            m = decode_messages(r.body, decompress=False)[0]
            if not self._re_put(ck, m, normal, group_cfg.retry_max_times):
                return False, n
            ck.bit_map |= 1 << i
            pop.inflight.decrement(ck.cid, ck.topic, ck.queue_id, ck.pop_time)
            n += 1
        return True, n

    def _re_put(self, ck: PopCheckPoint, m: MessageExt, normal: str, retry_max_times: int) -> bool:
        reconsume = m.reconsume_times + 1
        props = dict(m.properties)
        if m.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
            props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        if reconsume > retry_max_times:
            topic = mix_all.get_dlq_topic(ck.cid)
            self.pop.topic_config_manager.create_topic_in_send_message_back_method(topic, 1, PERM_WRITE | PERM_READ, 0)
            props.setdefault(PROPERTY_RETRY_TOPIC, normal)
            props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, m.msg_id))
            reconsume = m.reconsume_times
        else:
            topic = (
                ck.topic
                if ck.topic.startswith(mix_all.RETRY_GROUP_TOPIC_PREFIX)
                else ei.pop_retry_topic(normal, ck.cid)
            )
        refusal = self.guard.refusal(topic, 0)
        if refusal is not None:
            log.error("revive: cannot put to %s: %s", topic, refusal.remark)
            return False
        msg = Message(topic, m.body, flag=m.flag)
        msg.properties = props
        result = self.pop.message_store.put_message(
            msg,
            0,
            self.pop.store_host,
            born_timestamp=m.born_timestamp,
            sys_flag=m.sys_flag,
            reconsume_times=reconsume,
            wait_flush=False,
        )
        if result.status not in _STORED:
            log.error("revive: put to %s failed: %s", topic, result.status.name)
            return False
        if topic.startswith(mix_all.DLQ_GROUP_TOPIC_PREFIX):
            self.dead_lettered += 1
        else:
            self.revived += 1
        return True
