"""What the gRPC endpoint needs of its broker (``BrokerController`` gives it): the configs, the managers (producers and consumers: admin sees gRPC clients), the send and
end-transaction processors it hands requests to in-process, the store, the POP service, the ACL (aclEnable) and the broker's clock.

A Protocol, so ``broker/grpc/`` sees the controller through the parts it uses and imports nothing of it (the
package-wide no-cycle contract counts type-checking imports). Read-only views; used on the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rmq_core.broker.acl.plain_access_validator import PlainAccessValidator
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.client.producer_manager import ProducerManager
    from rmq_core.broker.pop.pop_service import PopService
    from rmq_core.broker.processor.end_transaction_processor import EndTransactionProcessor
    from rmq_core.broker.processor.send_message_processor import SendMessageProcessor
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.store import MessageStore


class GrpcBroker(Protocol):
    """The broker as the gRPC endpoint sees it."""

    @property
    def broker_config(self) -> BrokerConfig: ...
    @property
    def topic_config_manager(self) -> TopicConfigManager: ...
    @property
    def subscription_group_manager(self) -> SubscriptionGroupManager: ...
    @property
    def producer_manager(self) -> ProducerManager: ...
    @property
    def consumer_manager(self) -> ConsumerManager: ...
    @property
    def send_message_processor(self) -> SendMessageProcessor: ...
    @property
    def end_transaction_processor(self) -> EndTransactionProcessor: ...
    @property
    def message_store(self) -> MessageStore: ...
    @property
    def pop_service(self) -> PopService: ...
    @property
    def access_validator(self) -> PlainAccessValidator | None: ...
    def now_ms(self) -> int: ...
