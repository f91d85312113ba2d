"""PullAPIWrapper (cl/impl/consumer/PullAPIWrapper.java): builds and sends PULL_MESSAGE for a consumer group and
turns the answer into messages.

- ``pull_from_which_node_table``: the broker id each queue should be pulled from next (the broker's
  ``suggestWhichBrokerId``), MASTER_ID by default.
- ``pull_kernel_impl``: broker address from the route (that broker id, else any), PullMessageRequestHeader with the
  sys flag (commit-offset flag cleared for a slave), the subscription string, subVersion, expressionType,
  ``suspendTimeoutMillis``; awaits ``MQClientAPIImpl.pull_message``.
- ``process_pull_result``: decode the body in Rust, client-side tag re-filter (tagsSet, exact tag string), the
  ``MIN_OFFSET``/``MAX_OFFSET`` properties and the broker name on every message; drops the binary. Java's
  ``setTransactionId`` for a TRAN_MSG=true message is ``MessageExt.transaction_id``, derived from the same
  properties (message.py), so it costs the decode nothing.

Runs on the client instance's loop; the node table is a plain dict (single-key sets and gets only).
"""

from __future__ import annotations

import logging
from typing import Any

from rmq_core.client.pull_result import PullResultExt, PullStatus
from rmq_core.common import sys_flag as pull_sys_flag
from rmq_core.common.mix_all import MASTER_ID
from rmq_core.filter.message_selector import ExpressionType
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.message import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET, PROPERTY_TAGS, MessageQueue, decode_messages
from rmq_core.remoting.header import PullMessageRequestHeader

log = logging.getLogger(__name__)


class PullAPIWrapper:
    def __init__(self, instance: Any, consumer_group: str, unit_mode: bool = False) -> None:
        self.instance = instance
        self.consumer_group = consumer_group
        self.unit_mode = unit_mode
        self.pull_from_which_node_table: dict[MessageQueue, int] = {}
        self.connect_broker_by_user = False
        self.default_broker_id = MASTER_ID

    def update_pull_from_which_node(self, mq: MessageQueue, broker_id: int) -> None:
        self.pull_from_which_node_table[mq] = broker_id

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        if self.connect_broker_by_user:
            return self.default_broker_id
        return self.pull_from_which_node_table.get(mq, MASTER_ID)

    def process_pull_result(
        self, mq: MessageQueue, pull_result: PullResultExt, subscription_data: SubscriptionData
    ) -> PullResultExt:
        self.update_pull_from_which_node(mq, pull_result.suggest_which_broker_id)
        if pull_result.pull_status is PullStatus.FOUND:
            msgs = decode_messages(pull_result.message_binary or b"")
            tags_set = subscription_data.tags_set
            if tags_set and not subscription_data.class_filter_mode:
                msgs = [m for m in msgs if m.properties.get(PROPERTY_TAGS) in tags_set]
            min_s, max_s, broker = str(pull_result.min_offset), str(pull_result.max_offset), mq.broker_name
            for m in msgs:
                props = m.properties
                props[PROPERTY_MIN_OFFSET] = min_s
                props[PROPERTY_MAX_OFFSET] = max_s
                m.broker_name = broker
            pull_result.msg_found_list = msgs
        pull_result.message_binary = None
        return pull_result

    async def pull_kernel_impl(
        self,
        mq: MessageQueue,
        sub_expression: str | None,
        expression_type: str,
        sub_version: int,
        offset: int,
        max_nums: int,
        sys_flag: int,
        commit_offset: int,
        broker_suspend_max_time_millis: int,
        timeout_millis: int,
    ) -> PullResultExt:
        inst = self.instance
        found = inst.find_broker_address_in_subscribe(mq.broker_name, self.recalculate_pull_from_which_node(mq), False)
        if found is None:
            await inst.update_topic_route_info_from_name_server(mq.topic)
            found = inst.find_broker_address_in_subscribe(
                mq.broker_name, self.recalculate_pull_from_which_node(mq), False
            )
        if found is None:
            from rmq_core.client.exceptions import MQClientException

            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
        if pull_sys_flag.has_class_filter_flag(sys_flag):
            from rmq_core.client.exceptions import MQClientException

            raise MQClientException(-1, "class filter (filter servers) is not supported")
        flag = pull_sys_flag.clear_commit_offset_flag(sys_flag) if found.slave else sys_flag
        header = PullMessageRequestHeader(
            consumerGroup=self.consumer_group,
            topic=mq.topic,
            queueId=mq.queue_id,
            queueOffset=offset,
            maxMsgNums=max_nums,
            sysFlag=flag,
            commitOffset=commit_offset,
            suspendTimeoutMillis=broker_suspend_max_time_millis,
            subscription=sub_expression,
            subVersion=sub_version,
            expressionType=expression_type or ExpressionType.TAG,
        )
        result: PullResultExt = await inst.mq_client_api.pull_message(found.broker_addr, header, timeout_millis)
        return result
