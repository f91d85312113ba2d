"""The one way a test creates a topic or a subscription group, or waits for a route: through the RPC layer's
blocking face (``BlockingMQClientAPI``), as an admin tool does: UPDATE_AND_CREATE_TOPIC on each broker, then, given a
name server, wait until it routes the topic to each of them with the topic's read queues (a broker registers a new
topic with its name servers in the background); UPDATE_AND_CREATE_SUBSCRIPTIONGROUP. Where no RPC can do it (a
slave refuses UPDATE_AND_CREATE_TOPIC; a test that needs the topic before the broker registers), ``add_topic_config``
puts the config straight into the broker's TopicConfigManager on its loop. Tests of the admin processor itself send
their raw requests instead.

Invariants: a refused creation raises the ``RocketMQRpcError`` carrying the broker's code and remark; a route not
there in time raises TimeoutError naming the last answer. Thread-safety: each call opens and closes its own client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from rmq_core.broker import Broker
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.client.exceptions import MQClientException
from rmq_core.common.perm_name import DEFAULT_PERM
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.remoting.body.route import TopicRouteData
from rmq_core.remoting.codes import ResponseCode

TIMEOUT_MS = 5000


def create_topic(
    broker_addrs: str | Sequence[str],
    topic: str,
    queues: int = 4,
    *,
    perm: int = DEFAULT_PERM,
    order: bool = False,
    namesrv: str | None = None,
    timeout: float = 10.0,
) -> None:
    """``topic`` with ``queues`` read and write queues on each broker; with ``namesrv``, returns once that name
    server routes it to every one of them."""
    addrs = [broker_addrs] if isinstance(broker_addrs, str) else list(broker_addrs)
    config = TopicConfig(topic, queues, queues, perm, order=order)
    with BlockingMQClientAPI(namesrv, TIMEOUT_MS) as api:
        if namesrv is None:
            for addr in addrs:
                api.create_topic(addr, config)
        else:
            api.create_topic_and_wait(addrs, config, timeout)


def add_topic_config(broker: Broker, config: TopicConfig) -> None:
    """``config`` straight into ``broker``'s TopicConfigManager, on the broker's loop (no RPC, no registration)."""

    async def put() -> None:
        broker.controller.topic_config_manager.update_topic_config(config)

    asyncio.run_coroutine_threadsafe(put(), broker.controller.loop).result(10)


def create_subscription_group(broker_addr: str, config: SubscriptionGroupConfig) -> None:
    with BlockingMQClientAPI(None, TIMEOUT_MS) as api:
        api.create_subscription_group(broker_addr, config)


def wait_for_route(
    namesrv: str, topic: str, ready: Callable[[TopicRouteData], bool] | None = None, timeout: float = 10.0
) -> TopicRouteData:
    """The route of ``topic`` once ``namesrv`` has one (and ``ready(route)`` holds)."""
    with BlockingMQClientAPI(namesrv, TIMEOUT_MS) as api:
        return api.wait_for_route(topic, ready, timeout)


def route_of(namesrv: str, topic: str) -> TopicRouteData | None:
    """The route of ``topic`` now, None while the name server has none (TOPIC_NOT_EXIST)."""
    with BlockingMQClientAPI(namesrv, TIMEOUT_MS) as api:
        try:
            return api.get_topic_route_info_from_name_server(topic)
        except MQClientException as e:
            if e.response_code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            return None
