"""The blocking face of the RocketMQ RPC layer, for code that is not asyncio (the Spark source, the CLI, the pipeline,
benchmarks, tests): each method runs the same ``MQClientAPIImpl`` method on a loop thread and waits for it, so a
request is built and its answer decoded in one place for both faces. Also the admin steps made of several RPCs
(create a topic on brokers and wait until the name server routes it; the masters of a cluster).

Invariants: the answers, the errors (every failure a ``RocketMQRpcError`` with the code and remark) and the
name-server rule are ``MQClientAPIImpl``'s; ``timeout_ms`` (per call, else the one given here) bounds each request.
``close()`` closes the connections and ends the loop thread.
Thread-safety: every method may be called from any thread but the loop thread (calls are serialised onto the loop).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from rmq_core.client.client_config import ClientConfig
from rmq_core.client.exceptions import RocketMQRpcError
from rmq_core.client.mq_client_api import MQClientAPIImpl
from rmq_core.client.pull_result import PullResultExt
from rmq_core.client.send_result import SendResult
from rmq_core.common.mix_all import AUTO_CREATE_TOPIC_KEY_TOPIC
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message, MessageExt, MessageQueue
from rmq_core.remoting.body.connection import ConsumerConnection
from rmq_core.remoting.body.queue_offsets import ConsumeStats, TopicStatsTable
from rmq_core.remoting.body.route import MASTER_ID, ClusterInfo, TopicList, TopicRouteData
from rmq_core.remoting.header import (
    EndTransactionRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient, RemotingClient

T = TypeVar("T")

DEFAULT_TIMEOUT_MS = 3000


class BlockingMQClientAPI:
    """``BlockingMQClientAPI(namesrv_addr, timeout_ms, access_key=, secret_key=)``: the RPCs of ``MQClientAPIImpl``,
    blocking, signed when given credentials (RocketMQ 4.9's ACL). The loop thread
    is a ``BlockingRemotingClient``'s; the requests go through this face's own ``RemotingClient`` on it."""

    def __init__(
        self,
        namesrv_addr: str | None = None,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
        name: str = "rmq-client-api",
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.timeout_ms = timeout_ms
        config = ClientConfig(namesrv_addr=namesrv_addr or None, access_key=access_key, secret_key=secret_key)
        api = MQClientAPIImpl(RemotingClient(), config)  # (bad credentials raise before the loop thread starts)
        self._thread = BlockingRemotingClient(name=name)
        self.api = api

    def close(self) -> None:
        try:
            self._run(self.api.close(), 5000)
        finally:
            self._thread.close()

    def __enter__(self) -> BlockingMQClientAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T], timeout_ms: float) -> T:
        # name-server requests may try every address, each within timeout_ms
        bound = timeout_ms / 1000.0 * (len(self.api.namesrv_addr_list) + 1) + 5.0
        return asyncio.run_coroutine_threadsafe(coro, self._thread.loop).result(bound)

    def _t(self, timeout_ms: float | None) -> float:
        return self.timeout_ms if timeout_ms is None else timeout_ms

    # --- name server -------------------------------------------------------------------------------------------
    def get_topic_route_info_from_name_server(self, topic: str, timeout_ms: float | None = None) -> TopicRouteData:
        t = self._t(timeout_ms)
        return self._run(self.api.get_topic_route_info_from_name_server(topic, t), t)

    def get_broker_cluster_info(self, timeout_ms: float | None = None) -> ClusterInfo:
        t = self._t(timeout_ms)
        return self._run(self.api.get_broker_cluster_info(t), t)

    def get_topic_list_from_name_server(self, timeout_ms: float | None = None) -> TopicList:
        t = self._t(timeout_ms)
        return self._run(self.api.get_topic_list_from_name_server(t), t)

    @property
    def chosen_namesrv_addr(self) -> str | None:
        return self.api.chosen_namesrv_addr

    # --- send and pull -----------------------------------------------------------------------------------------
    def send_message(
        self,
        addr: str,
        broker_name: str,
        msg: Message,
        header: SendMessageRequestHeader,
        timeout_ms: float | None = None,
    ) -> SendResult:
        t = self._t(timeout_ms)
        result = self._run(self.api.send_message(addr, broker_name, msg, header, t), t)
        assert result is not None  # SYNC mode always answers
        return result

    def pull_message(
        self, addr: str, header: PullMessageRequestHeader, timeout_ms: float | None = None
    ) -> PullResultExt:
        t = self._t(timeout_ms)
        return self._run(self.api.pull_message(addr, header, t), t)

    def end_transaction(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None, timeout_ms: float | None = None
    ) -> None:
        """END_TRANSACTION, answered (MQBrokerException unless SUCCESS)."""
        t = self._t(timeout_ms)
        self._run(self.api.end_transaction(addr, header, remark, t), t)

    # --- queue offsets -----------------------------------------------------------------------------------------
    def get_min_offset(self, addr: str, topic: str, queue_id: int, timeout_ms: float | None = None) -> int:
        t = self._t(timeout_ms)
        return self._run(self.api.get_min_offset(addr, topic, queue_id, t), t)

    def get_max_offset(self, addr: str, topic: str, queue_id: int, timeout_ms: float | None = None) -> int:
        t = self._t(timeout_ms)
        return self._run(self.api.get_max_offset(addr, topic, queue_id, t), t)

    def search_offset(
        self, addr: str, topic: str, queue_id: int, timestamp: int, timeout_ms: float | None = None
    ) -> int:
        t = self._t(timeout_ms)
        return self._run(self.api.search_offset(addr, topic, queue_id, timestamp, t), t)

    # --- consumer offsets and groups ---------------------------------------------------------------------------
    def query_consumer_offset(
        self, addr: str, header: QueryConsumerOffsetRequestHeader, timeout_ms: float | None = None
    ) -> int:
        t = self._t(timeout_ms)
        return self._run(self.api.query_consumer_offset(addr, header, t), t)

    def update_consumer_offset(
        self, addr: str, header: UpdateConsumerOffsetRequestHeader, timeout_ms: float | None = None
    ) -> None:
        t = self._t(timeout_ms)
        self._run(self.api.update_consumer_offset(addr, header, t), t)

    def get_consumer_id_list_by_group(self, addr: str, group: str, timeout_ms: float | None = None) -> list[str]:
        t = self._t(timeout_ms)
        return self._run(self.api.get_consumer_id_list_by_group(addr, group, t), t)

    # --- messages by key / id ---------------------------------------------------------------------------------
    def query_message(
        self,
        addr: str,
        header: QueryMessageRequestHeader,
        is_unique_key: bool = False,
        timeout_ms: float | None = None,
    ) -> tuple[int, list[MessageExt]]:
        t = self._t(timeout_ms)
        return self._run(self.api.query_message(addr, header, t, is_unique_key), t)

    def view_message(self, addr: str, phy_offset: int, timeout_ms: float | None = None) -> MessageExt:
        t = self._t(timeout_ms)
        return self._run(self.api.view_message(addr, phy_offset, t), t)

    # --- introspection (``rmq-core admin``) -----------------------------------------------------------------
    def get_broker_runtime_info(self, addr: str, timeout_ms: float | None = None) -> dict[str, str]:
        t = self._t(timeout_ms)
        return self._run(self.api.get_broker_runtime_info(addr, t), t)

    def get_topic_stats_info(self, addr: str, topic: str, timeout_ms: float | None = None) -> TopicStatsTable:
        t = self._t(timeout_ms)
        return self._run(self.api.get_topic_stats_info(addr, topic, t), t)

    def get_consume_stats(
        self, addr: str, group: str, topic: str | None = None, timeout_ms: float | None = None
    ) -> ConsumeStats:
        t = self._t(timeout_ms)
        return self._run(self.api.get_consume_stats(addr, group, topic, t), t)

    def invoke_broker_to_reset_offset(
        self, addr: str, topic: str, group: str, timestamp: int, is_force: bool = True, timeout_ms: float | None = None
    ) -> dict[MessageQueue, int]:
        t = self._t(timeout_ms)
        return self._run(self.api.invoke_broker_to_reset_offset(addr, topic, group, timestamp, is_force, t), t)

    def create_topic(
        self,
        addr: str,
        topic_config: TopicConfig,
        timeout_ms: float | None = None,
        default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
    ) -> None:
        t = self._t(timeout_ms)
        self._run(self.api.create_topic(addr, topic_config, t, default_topic), t)

    def create_subscription_group(
        self, addr: str, config: SubscriptionGroupConfig, timeout_ms: float | None = None
    ) -> None:
        t = self._t(timeout_ms)
        self._run(self.api.create_subscription_group(addr, config, t), t)

    def delete_topic_in_broker(self, addr: str, topic: str, timeout_ms: float | None = None) -> None:
        t = self._t(timeout_ms)
        self._run(self.api.delete_topic_in_broker(addr, topic, t), t)

    def delete_topic_in_name_server(
        self, addr: str, topic: str, cluster: str | None = None, timeout_ms: float | None = None
    ) -> None:
        t = self._t(timeout_ms)
        self._run(self.api.delete_topic_in_name_server(addr, topic, t, cluster), t)

    def delete_subscription_group(
        self, addr: str, group: str, remove_offset: bool = False, timeout_ms: float | None = None
    ) -> None:
        t = self._t(timeout_ms)
        self._run(self.api.delete_subscription_group(addr, group, t, remove_offset), t)

    def get_broker_config(self, addr: str, timeout_ms: float | None = None) -> dict[str, str]:
        t = self._t(timeout_ms)
        return self._run(self.api.get_broker_config(addr, t), t)

    def update_broker_config(self, addr: str, properties: dict[str, str], timeout_ms: float | None = None) -> None:
        t = self._t(timeout_ms)
        self._run(self.api.update_broker_config(addr, properties, t), t)

    def get_consumer_connection_list(
        self, addr: str, group: str, timeout_ms: float | None = None
    ) -> ConsumerConnection:
        t = self._t(timeout_ms)
        return self._run(self.api.get_consumer_connection_list(addr, group, t), t)

    @property
    def namesrv_addr_list(self) -> list[str]:
        return self.api.namesrv_addr_list

    def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name → master address of every broker the name server knows (of ``cluster`` if given)."""
        return self.get_broker_cluster_info().master_addrs(cluster)

    def wait_for_route(
        self, topic: str, ready: Callable[[TopicRouteData], bool] | None = None, timeout_s: float = 30.0
    ) -> TopicRouteData:
        """The route of ``topic`` once the name server has one (and ``ready(route)`` holds); TimeoutError naming the
        last answer after ``timeout_s`` (a broker registers a topic with its name servers in the background)."""
        deadline = time.monotonic() + timeout_s
        while True:
            last: object
            try:
                route = self.get_topic_route_info_from_name_server(topic)
                if ready is None or ready(route):
                    return route
                last = route
            except RocketMQRpcError as e:  # TOPIC_NOT_EXIST until the broker registered it
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(f"the name server did not route {topic} as wanted within {timeout_s:g} s: {last}")
            time.sleep(0.05)

    def create_topic_and_wait(
        self, broker_addrs: Sequence[str], topic_config: TopicConfig, timeout_s: float = 30.0
    ) -> TopicRouteData:
        """UPDATE_AND_CREATE_TOPIC on every broker of ``broker_addrs``, then wait until the name server routes the
        topic to each of them with the configured read queues."""
        for addr in broker_addrs:
            self.create_topic(addr, topic_config)
        return self.wait_for_route(
            topic_config.topic_name, lambda r: routes_to(r, broker_addrs, topic_config.read_queue_nums), timeout_s
        )


def routes_to(route: TopicRouteData, broker_addrs: Sequence[str], read_queue_nums: int) -> bool:
    """Whether ``route`` lists every address of ``broker_addrs`` as a master with ``read_queue_nums`` read queues."""
    names = {bd.broker_addrs.get(MASTER_ID): bd.broker_name for bd in route.broker_datas}
    for addr in broker_addrs:
        qd = route.find_queue_data(names[addr]) if addr in names else None
        if qd is None or qd.read_queue_nums != read_queue_nums:
            return False
    return True
