"""TransactionalMessageCheckListener (4.9 ``AbstractTransactionalMessageCheckListener`` +
``DefaultTransactionalMessageCheckListener``): what the check does with a half message.

- ``resolve_half_msg(msg_ext)``: CHECK_TRANSACTION_STATE (39), oneway, to one live connection of the producer group
  named by the message's ``PGROUP`` (``ProducerManager.get_available_channel``); header ``commitLogOffset`` /
  ``tranStateTableOffset`` = the (put back) half record's, ``offsetMsgId`` = its offset msg id, ``msgId`` =
  ``transactionId`` = its UNIQ_KEY; body = the message encoded as a stored record (``MessageDecoder.encode``) with
  topic and queue id the real ones (``REAL_TOPIC`` / ``REAL_QID``). No connection → logged, nothing sent.
- ``resolve_discard_msg(msg_ext)``: a message checked ``transactionCheckMax`` times goes to
  ``TRANS_CHECK_MAX_TIME_TOPIC`` (1 queue, created RW on first use) as it is, half-message properties included.

Byte format: the request body is a v1 record (``format/message.py``'s layout).
Thread-safety: the broker's event loop only (``Connection.send``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rmq_core.common import mix_all
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.format.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    encode_host,
    encode_properties,
    encode_record,
)
from rmq_core.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    UNIQ_KEY,
    Message,
    MessageExt,
)
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import CheckTransactionStateRequestHeader, encode_header
from rmq_core.store_status import PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.client.producer_manager import ProducerManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.broker.transaction.transactional_message_bridge import TransactionalMessageBridge

log = logging.getLogger(__name__)

TCMT_QUEUE_NUMS = 1


def encode_message_ext(msg: MessageExt) -> bytes:
    """``MessageDecoder.encode(msgExt, false)``: ``msg`` as one v1 stored record (store size recomputed)."""
    sys_flag = msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if ":" in msg.born_host[0]:
        sys_flag |= BORNHOST_V6_FLAG
    if ":" in msg.store_host[0]:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    return bytes(
        encode_record(
            queue_id=msg.queue_id,
            flag=msg.flag,
            queue_offset=msg.queue_offset,
            physical_offset=msg.commitlog_offset,
            sys_flag=sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host_raw=encode_host(msg.born_host),
            store_timestamp=msg.store_timestamp,
            store_host_raw=encode_host(msg.store_host),
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            body=msg.body,
            topic=msg.topic.encode(),
            properties=encode_properties(msg.properties),
        )
    )


class TransactionalMessageCheckListener:
    def __init__(
        self,
        producer_manager: ProducerManager,
        topic_config_manager: TopicConfigManager,
        bridge: TransactionalMessageBridge,
    ) -> None:
        self.producer_manager = producer_manager
        self.topic_config_manager = topic_config_manager
        self.bridge = bridge
        self.checks_sent = 0  # CHECK_TRANSACTION_STATE requests sent (tests, stats)
        self.discarded = 0

    def resolve_half_msg(self, msg_ext: MessageExt) -> None:
        try:
            self.send_check_message(msg_ext)
        except Exception:
            log.exception("send check message failed")

    def send_check_message(self, msg_ext: MessageExt) -> None:
        uniq = msg_ext.properties.get(UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            tranStateTableOffset=msg_ext.queue_offset,
            commitLogOffset=msg_ext.commitlog_offset,
            msgId=uniq,
            transactionId=uniq,
            offsetMsgId=msg_ext.msg_id,
        )
        msg_ext.topic = msg_ext.properties.get(PROPERTY_REAL_TOPIC, msg_ext.topic)
        try:
            msg_ext.queue_id = int(msg_ext.properties.get(PROPERTY_REAL_QUEUE_ID, msg_ext.queue_id))
        except ValueError:
            pass
        msg_ext.store_size = 0
        group = msg_ext.properties.get(PROPERTY_PRODUCER_GROUP)
        conn: Any = self.producer_manager.get_available_channel(group)
        if conn is None:
            log.warning("check transaction failed, no connection of producer group %s", group)
            return
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, encode_header(header), encode_message_ext(msg_ext)
        ).mark_oneway()
        conn.send(request)
        self.checks_sent += 1

    def resolve_discard_msg(self, msg_ext: MessageExt) -> None:
        log.error(
            "half message %s has been checked too many times, so discard it by moving it to system topic %s",
            msg_ext.msg_id,
            mix_all.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        )
        try:
            topic = mix_all.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
            self.topic_config_manager.create_topic_in_send_message_back_method(
                topic, TCMT_QUEUE_NUMS, PERM_READ | PERM_WRITE, 0
            )
            msg = Message(topic, msg_ext.body, flag=msg_ext.flag)
            msg.properties = dict(msg_ext.properties)
            result = self.bridge.put_message(
                msg, 0, msg_ext.born_host, msg_ext.born_timestamp, msg_ext.sys_flag, msg_ext.reconsume_times
            )
            if result.status == PutMessageStatus.PUT_OK:
                self.discarded += 1
            else:
                log.error("put checked-too-many-times half message to %s failed: %s", topic, result.status.name)
        except Exception:
            log.exception("put checked-too-many-times half message failed")
