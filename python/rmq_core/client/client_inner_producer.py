"""ClientInnerProducer: the instance's own producer registration, group CLIENT_INNER_PRODUCER (4.9's
``MQClientInstance.defaultMQProducer``).

Java's instance starts a whole DefaultMQProducer of that group; what it does there is what this class does: it is in
the instance's producer table, so heartbeats name the group, and it asks for the default topic's (TBW102) route as a
started producer does. Nothing sends through it here (a consumer's send-back fallback sends its RPC itself, with this
group's name). A class of its own, below the instance, so that the instance imports nothing of the producer package
(the import-linter contract ``client-acyclic``).

Thread-safety: as a producer's table: written on the instance's loop, read anywhere (replaced entries, not mutated).
"""

from __future__ import annotations

from typing import Protocol

from rmq_core.client.exceptions import MQClientException
from rmq_core.client.topic_publish_info import PublishInfoTable, TopicPublishInfo
from rmq_core.common import mix_all


class ProducerRegistry(Protocol):
    """What the inner producer needs of its instance."""

    def register_producer(self, group: str, producer: object) -> bool: ...
    def unregister_producer(self, group: str) -> None: ...


class ClientInnerProducer(PublishInfoTable):
    """Registered with an already running instance (startFactory=false) and unregistered before it stops; its
    MQProducerInner side is ``PublishInfoTable``'s."""

    def __init__(self, group: str = mix_all.CLIENT_INNER_PRODUCER_GROUP) -> None:
        self.group = group
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self._instance: ProducerRegistry | None = None

    def start_with_instance(self, instance: ProducerRegistry) -> None:
        if not instance.register_producer(self.group, self):
            raise MQClientException.of(f"The producer group[{self.group}] has been created before")
        self._instance = instance
        self.topic_publish_info_table[mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC] = TopicPublishInfo()

    def shutdown_with_instance(self) -> None:
        if self._instance is not None:
            self._instance.unregister_producer(self.group)
            self._instance = None
