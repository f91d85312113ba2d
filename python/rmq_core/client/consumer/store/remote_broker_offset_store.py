"""RemoteBrokerOffsetStore (cl/consumer/store/RemoteBrokerOffsetStore.java): clustering consumers keep their offsets
on the broker that hosts each queue (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET), with an in-memory table in
front.

Invariants: the table holds the next offset to consume per queue; ``update_offset(..., increase_only=True)`` never
moves an offset back. ``read_offset(READ_FROM_STORE)`` answers the broker's offset (and caches it), -1 when the broker
has none (QUERY_NOT_FOUND), -2 on any other error.

Thread-safety: the table is guarded by a lock; reading from/persisting to the broker are blocking calls into the
client instance's loop (``instance.run_sync``) and must not be made on the loop thread — the ``*_async`` variants
are for the loop.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq_core.client.consumer.store.offset_store import OffsetTable, ReadOffsetType
from rmq_core.common.mix_all import MASTER_ID
from rmq_core.message import MessageQueue
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader

log = logging.getLogger(__name__)


class RemoteBrokerOffsetStore(OffsetTable):
    def __init__(self, instance: Any, group_name: str) -> None:
        super().__init__()
        self.instance = instance
        self.group_name = group_name

    def load(self) -> None:
        pass

    def _timeout_s(self) -> float:
        return float(getattr(self.instance.client_config, "mq_client_api_timeout", 3000)) / 1000.0 + 1.0

    def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        off = self._read_from_memory(mq, read_type)
        if off is not None:
            return off
        try:
            fetched: int = self.instance.run_sync(self.fetch_consume_offset_from_broker(mq), self._timeout_s())
            off = fetched
        except Exception as e:
            return self._store_error(mq, e)
        self.update_offset(mq, off, False)
        return off

    async def read_offset_async(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """read_offset for callers on the loop thread."""
        off = self._read_from_memory(mq, read_type)
        if off is not None:
            return off
        try:
            off = await self.fetch_consume_offset_from_broker(mq)
        except Exception as e:
            return self._store_error(mq, e)
        self.update_offset(mq, off, False)
        return off

    @staticmethod
    def _store_error(mq: MessageQueue, e: BaseException) -> int:
        code = getattr(e, "response_code", getattr(e, "code", None))
        if code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        log.warning("fetchConsumeOffsetFromBroker exception, %s: %s", mq, e)
        return -2

    def persist_all(self, mqs: set[MessageQueue]) -> None:
        """Send each given queue's offset to its broker (oneway); forget offsets of queues no longer assigned."""
        if not mqs:
            return
        self.instance.run_sync(self.persist_all_async(mqs), self._timeout_s())

    async def persist_all_async(self, mqs: set[MessageQueue]) -> None:
        with self._lock:
            table = dict(self.offset_table)
        unused: list[MessageQueue] = []
        for mq, off in table.items():
            if mq in mqs:
                try:
                    await self.update_consume_offset_to_broker_async(mq, off, True)
                    log.info(
                        "[persistAll] Group: %s ClientId: %s updateConsumeOffsetToBroker %s %d",
                        self.group_name,
                        self.instance.client_id,
                        mq,
                        off,
                    )
                except Exception as e:
                    log.error("updateConsumeOffsetToBroker exception, %s: %s", mq, e)
            else:
                unused.append(mq)
        if unused:
            with self._lock:
                for mq in unused:
                    self.offset_table.pop(mq, None)

    def persist(self, mq: MessageQueue) -> None:
        with self._lock:
            off = self.offset_table.get(mq)
        if off is not None:
            try:
                self.update_consume_offset_to_broker(mq, off, True)
            except Exception as e:
                log.error("updateConsumeOffsetToBroker exception, %s: %s", mq, e)

    async def persist_async(self, mq: MessageQueue) -> None:
        with self._lock:
            off = self.offset_table.get(mq)
        if off is not None:
            try:
                await self.update_consume_offset_to_broker_async(mq, off, True)
            except Exception as e:
                log.error("updateConsumeOffsetToBroker exception, %s: %s", mq, e)

    def remove_offset(self, mq: MessageQueue) -> None:
        with self._lock:
            self.offset_table.pop(mq, None)

    def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, is_oneway: bool = True) -> None:
        self.instance.run_sync(self.update_consume_offset_to_broker_async(mq, offset, is_oneway), self._timeout_s())

    async def _find_broker(self, mq: MessageQueue) -> str:
        inst = self.instance
        found = inst.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            await inst.update_topic_route_info_from_name_server(mq.topic)
            found = inst.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        if found is None:
            from rmq_core.client.exceptions import MQClientException

            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
        return str(found.broker_addr)

    async def update_consume_offset_to_broker_async(self, mq: MessageQueue, offset: int, is_oneway: bool) -> None:
        addr = await self._find_broker(mq)
        header = UpdateConsumerOffsetRequestHeader(
            consumerGroup=self.group_name, topic=mq.topic, queueId=mq.queue_id, commitOffset=offset
        )
        api = self.instance.mq_client_api
        if is_oneway:
            await api.update_consumer_offset_oneway(addr, header)
        else:
            await api.update_consumer_offset(addr, header, self.instance.client_config.mq_client_api_timeout)

    async def fetch_consume_offset_from_broker(self, mq: MessageQueue) -> int:
        addr = await self._find_broker(mq)
        header = QueryConsumerOffsetRequestHeader(consumerGroup=self.group_name, topic=mq.topic, queueId=mq.queue_id)
        return int(
            await self.instance.mq_client_api.query_consumer_offset(
                addr, header, self.instance.client_config.mq_client_api_timeout
            )
        )
