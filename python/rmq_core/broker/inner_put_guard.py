"""InnerPutGuard: may the broker itself put a message to a topic a record names? (issue 28: no way into a forbidden
topic through an internal re-put.)

Owns ``refusal(topic, queue_id)``, asked by the timer store, the schedule service, the transaction commit and the
consumer send-back before they put to a topic read from a record; the rules are a client send's
(``SendMessageProcessor._check_topic``). What a refusal means is each caller's (log and drop, or answer it).
Thread-safety: the broker's event loop (it may create a topic through the TopicConfigManager).
Details: docs/BROKER_DESIGN.md, 'Forbidden topics'.
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
