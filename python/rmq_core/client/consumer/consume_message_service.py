"""What the consume services (``ConsumeMessageConcurrentlyService``, ``ProcessQueue.clean_expired_msg``) need of
the push consumer, as typed seams: 4.9 passes ``DefaultMQPushConsumerImpl`` itself; here they see these Protocols,
which ``PushConsumer`` / ``DefaultMQPushConsumerImpl`` satisfy structurally, so the services do not import
``push_consumer`` (which imports them) and a test can hand them a small fake.

Thread-safety: none of its own; see the implementing classes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from rmq_core.client.consumer.consumer_stats import ConsumerStatsManager
from rmq_core.client.consumer.listener import MessageModel
from rmq_core.message import MessageExt


class ExpiredMessageSender(Protocol):
    """What ``ProcessQueue.clean_expired_msg`` needs: the consume timeout (minutes) and a way to send a message back."""

    @property
    def consume_timeout(self) -> int: ...

    def send_message_back(self, msg: MessageExt, delay_level: int) -> None: ...


class PushConsumerSettings(ExpiredMessageSender, Protocol):
    """DefaultMQPushConsumer's settings read by the consume services."""

    @property
    def consumer_group(self) -> str: ...

    @property
    def message_model(self) -> MessageModel: ...

    @property
    def consume_thread_min(self) -> int: ...

    @property
    def consume_message_batch_max_size(self) -> int: ...


class PushConsumerImplView(Protocol):
    """DefaultMQPushConsumerImpl as the concurrent consume service uses it."""

    @property
    def push_consumer(self) -> PushConsumerSettings: ...

    @property
    def stats(self) -> ConsumerStatsManager: ...

    @property
    def offset_store(self) -> Any: ...

    @property
    def rebalance_impl(self) -> Any: ...

    def reset_retry_and_namespace(self, msgs: Sequence[MessageExt], consumer_group: str) -> None: ...

    def execute_task_later(self, task: Callable[[], Any], time_delay_ms: int) -> None: ...

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None: ...
