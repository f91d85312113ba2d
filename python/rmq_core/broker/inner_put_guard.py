"""InnerPutGuard: may the broker itself put a message to a topic a record names? (issue 28: no way into a forbidden
topic through an internal re-put.)

The timer store (``REAL_TOPIC`` of a due timer), the schedule service (``REAL_TOPIC`` of a due delayed message), the
transaction commit (``REAL_TOPIC`` of the half message) and the consumer send-back (``%RETRY%``/``%DLQ%<group>``) put
messages to a topic read from a record, not from a request that passed ``msgCheck``. Each asks ``refusal(topic,
queue_id)`` first; the rules are a client send's (``SendMessageProcessor._check_topic``): the name valid (the whole
name, at most 127 characters), not a topic clients may not send to (``mix_all.NOT_ALLOWED_SEND_TOPICS``), the topic
known — else created as a client's send would create it (a ``%RETRY%`` topic through the send-back method, any other
from TBW102 when ``autoCreateTopicEnable``) —, writable, and the queue id below max(read, write queue nums).

Departure from Apache (4.9.7 and 5.3.3 re-put with no such check; only 4.9.7's schedule service drops a message
whose real topic is RMQ_SYS_TRANS_HALF_TOPIC, with a "[BUG]" log line): what a refusal means is each caller's —
the timer and schedule services log and drop the message (Apache's drop), END_TRANSACTION answers the refusal and
leaves the half message to the check, the send-back answers it.

Thread-safety: the broker's event loop (it may create a topic through the TopicConfigManager).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, NamedTuple

from rmq_core.common import mix_all
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE, is_writeable
from rmq_core.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.common.topic_config import TopicConfig

log = logging.getLogger(__name__)

_INNER = "broker"  # the "remote address" a topic created here is logged with


class PutRefusal(NamedTuple):
    """Why an internal put may not write its topic: the response code and remark a client's send would get."""

    code: int
    remark: str


class InnerPutGuard:
    """``InnerPutGuard(broker_config, topic_config_manager)``; ``refusal(topic, queue_id) -> PutRefusal | None``."""

    def __init__(self, broker_config: BrokerConfig, topic_config_manager: TopicConfigManager) -> None:
        self.broker_config = broker_config
        self.topic_config_manager = topic_config_manager

    def refusal(self, topic: str, queue_id: int) -> PutRefusal | None:
        """None when the broker may put a message to ``topic``/``queue_id``, else why not."""
        reason = mix_all.validate_topic(topic)
        if reason is not None:
            return PutRefusal(ResponseCode.SYSTEM_ERROR, reason)
        if topic in mix_all.NOT_ALLOWED_SEND_TOPICS:
            return PutRefusal(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        cfg = self.topic_config_manager.select_topic_config(topic) or self._create(topic)
        if cfg is None:
            return PutRefusal(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not is_writeable(cfg.perm):
            return PutRefusal(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        if not 0 <= queue_id < max(cfg.write_queue_nums, cfg.read_queue_nums):
            return PutRefusal(ResponseCode.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal for topic[{topic}]")
        return None

    def _create(self, topic: str) -> TopicConfig | None:
        """The topic created as a client's send to it would create it, or None."""
        tcm = self.topic_config_manager
        if mix_all.is_retry_topic(topic):
            try:
                return tcm.create_topic_in_send_message_back_method(topic, 1, PERM_WRITE | PERM_READ, 0)
            except ValueError as e:
                log.warning("cannot create topic %s: %s", topic, e)
                return None
        if not self.broker_config.auto_create_topic_enable:
            return None
        return tcm.create_topic_in_send_message_method(
            topic, mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC, _INNER, self.broker_config.default_topic_queue_nums, 0
        )
