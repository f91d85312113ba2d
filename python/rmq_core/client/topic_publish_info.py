"""TopicPublishInfo (4.9 ``org.apache.rocketmq.client.impl.producer.TopicPublishInfo``): the queues a producer may
send a topic to, from a route (``MQClientInstance.topicRouteData2TopicPublishInfo``), and the round-robin queue choice
that avoids the broker of the last failed attempt.

Invariants: ``message_queue_list`` is the route's writable queues of brokers with a master, by broker name (or exactly
the ``orderTopicConf`` queues, then ``order_topic`` is true); ``ok()`` iff it is non-empty.
Thread-safety: replaced wholesale on route updates (never mutated in place after publication); the send index is an
atomic counter under the GIL, so any thread may select. ``PublishInfoTable``: the part of 4.9's MQProducerInner that
the instance's route updates call, over a producer's ``topic_publish_info_table`` (Producer, ClientInnerProducer).
"""

from __future__ import annotations

import itertools
import random

from rmq_core.message import MessageQueue
from rmq_core.remoting.body.route import TopicRouteData


class ThreadLocalIndex:
    """A counter starting at a random point (RocketMQ's ThreadLocalIndex, shared here: the GIL makes it atomic)."""

    def __init__(self) -> None:
        self._counter = itertools.count(random.randrange(1 << 16))

    def increment_and_get(self) -> int:
        return next(self._counter) & 0x7FFFFFFF


class TopicPublishInfo:
    def __init__(
        self,
        message_queue_list: list[MessageQueue] | None = None,
        order_topic: bool = False,
        topic_route_data: TopicRouteData | None = None,
    ) -> None:
        self.order_topic = order_topic
        self.have_topic_router_info = False
        self.message_queue_list: list[MessageQueue] = list(message_queue_list or [])
        self.send_which_queue = ThreadLocalIndex()
        self.topic_route_data = topic_route_data

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        """topicRouteData2TopicPublishInfo (orderTopicConf honoured)."""
        return cls(route.publish_message_queues(topic), order_topic=route.is_order_topic(), topic_route_data=route)

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin; with ``last_broker_name`` the next queue on another broker when there is one."""
        mqs = self.message_queue_list
        if not mqs:
            raise IndexError("no message queue to select")
        if last_broker_name is not None:
            for _ in range(len(mqs)):
                mq = mqs[self.send_which_queue.increment_and_get() % len(mqs)]
                if mq.broker_name != last_broker_name:
                    return mq
        return mqs[self.send_which_queue.increment_and_get() % len(mqs)]

    def get_queue_id_by_broker(self, broker_name: str) -> int:
        """The write queue count of ``broker_name`` in the route, -1 when absent."""
        if self.topic_route_data is None:
            return -1
        qd = self.topic_route_data.find_queue_data(broker_name)
        return qd.write_queue_nums if qd is not None else -1

    def __repr__(self) -> str:
        return (
            f"TopicPublishInfo [orderTopic={self.order_topic}, messageQueueList={self.message_queue_list}, "
            f"haveTopicRouterInfo={self.have_topic_router_info}]"
        )


class PublishInfoTable:
    """MQProducerInner's route side over ``topic_publish_info_table`` (the subclass sets it): the topics it publishes
    to, a route's new publish info, and whether a topic's needs one."""

    topic_publish_info_table: dict[str, TopicPublishInfo]

    def get_publish_topic_list(self) -> list[str]:
        return list(self.topic_publish_info_table)

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        if topic and info is not None:
            self.topic_publish_info_table[topic] = info

    def is_publish_topic_need_update(self, topic: str) -> bool:
        prev = self.topic_publish_info_table.get(topic)
        return prev is None or not prev.ok()
