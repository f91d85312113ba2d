"""Helpers for the push-consumer tests: a name server + broker in-process, raw SEND_MESSAGE_V2 sends (independent of
the Producer), the broker's committed offsets, and polling with a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.message_encoding import properties_to_string
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import (
    SendMessageResponseHeader,
    decode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import create_topic
from support.helpers import wait_until  # noqa: F401 (re-exported to the tests)
from support.send_helpers import send_request


@dataclass
class PushCluster:
    namesrv: NameServer
    broker: Broker
    client: BlockingRemotingClient = field(default_factory=BlockingRemotingClient)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.address

    def create_topic(self, topic: str, queues: int = 4) -> None:
        create_topic(self.broker.address, topic, queues, namesrv=self.namesrv_addr)

    def send(
        self, topic: str, body: bytes, queue_id: int, tags: str | None = None, properties: dict[str, str] | None = None
    ) -> int:
        """SEND_MESSAGE_V2 to one queue; the queue offset the broker gave it."""
        props = dict(properties or {})
        if tags:
            props["TAGS"] = tags
        properties = properties_to_string(props) if props else None
        r = self.client.invoke_sync(
            self.broker.address, send_request(topic, body, queue_id=queue_id, properties=properties), timeout=5.0
        )
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        return decode_header(SendMessageResponseHeader, r.ext_fields).queueOffset

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int:
        async def read() -> int:
            return int(self.broker.controller.consumer_offset_manager.query_offset(group, topic, queue_id))

        return asyncio.run_coroutine_threadsafe(read(), self.broker.controller.loop).result(5.0)


@contextlib.contextmanager
def push_cluster(tmp_path: Any, **broker_settings: Any) -> Iterator[PushCluster]:
    ns = NameServer(listen_port=0)
    ns.start()
    broker: Broker | None = None
    c: PushCluster | None = None
    try:
        cfg = BrokerConfig(
            listen_port=0,
            namesrv_addr=ns.address,
            broker_name="broker-a",
            store_path_root_dir=os.path.join(str(tmp_path), "broker-a"),
            **broker_settings,
        )
        broker = Broker(cfg)
        broker.start()
        c = PushCluster(ns, broker)
        yield c
    finally:
        if c is not None:
            c.client.close()
            if c.broker is not broker:  # a test that restarted the broker put its new one here
                c.broker.shutdown()
        if broker is not None:
            broker.shutdown()
        ns.shutdown()


FAST = dict(
    rebalance_interval_ms=200,
    heartbeat_broker_interval=500,
    poll_name_server_interval=500,
    persist_consumer_offset_interval=100,
    consume_thread_min=4,
    consume_thread_max=4,
)
