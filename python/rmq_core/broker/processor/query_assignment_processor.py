"""QueryAssignmentProcessor: QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401), RocketMQ 5's broker-side
balancing for consumers started with ``setClientRebalance(false)``.

QUERY_ASSIGNMENT's body ``{topic, consumerGroup, clientId, strategyName, messageModel}`` is answered with
``{"messageQueueAssignments":[{"messageQueue":{brokerName,queueId,topic},"mode":"PULL"|"POP"}]}``: BROADCASTING gets
every queue; CLUSTERING in POP mode with popShareQueueNum ≤ 0 (or ≥ clients − 1) gets one queue of id −1 per broker
(pop from every queue), else the queues are shared out averagely among the group's clients (sorted), as Apache's
AllocateMessageQueueAveragely. Departure: the queues are this broker's (Apache asks the name server for the topic's
route across brokers), and every strategy name is averaging. SET_MESSAGE_REQUEST_MODE stores the mode
(a retry topic → NO_PERMISSION "retry topic is not allowed to set mode").
Thread-safety: the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmq_core.broker.pop.message_request_mode_manager import DEFAULT_POP_SHARE_QUEUE_NUM, MODE_POP, MODE_PULL
from rmq_core.common import mix_all
from rmq_core.remoting import fastjson
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.pop.message_request_mode_manager import MessageRequestModeManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection


def allocate_averagely(client_id: str, mq_all: list[Any], cid_all: list[str]) -> list[Any]:
    """AllocateMessageQueueAveragely.allocate."""
    if client_id not in cid_all:
        return []
    index, n, k = cid_all.index(client_id), len(mq_all), len(cid_all)
    mod = n % k
    size = (n // k + 1 if index < mod else n // k) if n > k else 1
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [mq_all[(start + i) % n] for i in range(min(size, n - start))] if start < n else []


class QueryAssignmentProcessor:
    request_codes = (RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE)

    def __init__(
        self,
        broker_config: BrokerConfig,
        topic_config_manager: TopicConfigManager,
        consumer_manager: ConsumerManager,
        mode_manager: MessageRequestModeManager,
    ) -> None:
        self.broker_config = broker_config
        self.topic_config_manager = topic_config_manager
        self.consumer_manager = consumer_manager
        self.mode_manager = mode_manager

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            body = fastjson.loads(request.body or b"null", int_keys=False)
        except (ValueError, UnicodeDecodeError) as e:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, f"malformed body: {e}")
        if not isinstance(body, dict) or not isinstance(body.get("topic"), str):
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, "the body names no topic")
        topic, group = body["topic"], str(body.get("consumerGroup") or "")
        if request.code == RequestCode.SET_MESSAGE_REQUEST_MODE:
            if topic.startswith(mix_all.RETRY_GROUP_TOPIC_PREFIX):
                return RemotingCommand.response_to(
                    request, ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode"
                )
            mode = MODE_POP if body.get("mode") == MODE_POP else MODE_PULL
            try:
                share = int(body.get("popShareQueueNum", 0) or 0)
            except (TypeError, ValueError):
                share = 0
            self.mode_manager.set(topic, group, mode, share)
            self.mode_manager.persist()
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
        stored = self.mode_manager.get(topic, group)
        if stored is not None:
            mode, share = stored.get("mode", MODE_PULL), int(stored.get("popShareQueueNum", 0) or 0)
        else:
            mode, share = MODE_PULL, DEFAULT_POP_SHARE_QUEUE_NUM
        queues = self._balance(
            topic, group, str(body.get("clientId") or ""), str(body.get("messageModel")), mode, share
        )
        assignments = None
        if queues is not None:
            assignments = [{"messageQueue": q, "mode": mode} for q in queues]
        out = fastjson.dumps({"messageQueueAssignments": assignments}, unquoted_int_keys=False).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, None, out)

    def _balance(
        self, topic: str, group: str, client_id: str, model: str, mode: str, share: int
    ) -> list[dict[str, Any]] | None:
        cfg = self.topic_config_manager.select_topic_config(topic)
        if cfg is None:
            return None
        name = self.broker_config.broker_name
        mq_all = [{"brokerName": name, "queueId": q, "topic": topic} for q in range(cfg.read_queue_nums)]
        if model == "BROADCASTING":
            return mq_all
        info = self.consumer_manager.get_consumer_group_info(group)
        cids = sorted(info.get_all_client_ids()) if info is not None else []
        if not cids:
            return None
        if mode == MODE_POP and (share <= 0 or share >= len(cids) - 1):
            return [{"brokerName": name, "queueId": -1, "topic": topic}]
        result = allocate_averagely(client_id, mq_all, cids)
        if mode == MODE_POP and client_id in cids:
            i = cids.index(client_id)
            for step in range(1, share + 1):
                result += allocate_averagely(cids[(i + step) % len(cids)], mq_all, cids)
        return result
