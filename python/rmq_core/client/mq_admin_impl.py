"""MQAdminImpl (4.9 ``org.apache.rocketmq.client.impl.MQAdminImpl``), its message lookups: query by key / UNIQ_KEY over
every broker of a topic's route, and view by offset msg id. The producer (and any admin face) delegates here.

- ``query_message``: QUERY_MESSAGE to one address of each broker of the topic's route (master first, as
  ``BrokerData.selectBrokerAddr``), all at once; by key keeps the messages whose KEYS hold the key; by UNIQ_KEY keeps
  only the earliest stored message whose UNIQ_KEY is the key (4.9's filtering). The result is
  ``QueryResult(index_last_update_timestamp, messages)``; no route → MQClientException(TOPIC_NOT_EXIST).
- ``view_message``: an offset msg id names the broker address and CommitLog offset → VIEW_MESSAGE_BY_ID there.

Invariants: no message is returned that does not carry the key (the broker's index is a hash index).
Thread-safety: coroutines on the client instance's loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmq_core.client.exceptions import MQClientException
from rmq_core.message import KEY_SEPARATOR, UNIQ_KEY, MessageExt, decode_offset_msg_id
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import QueryMessageRequestHeader

if TYPE_CHECKING:
    from rmq_core.client.mq_client_instance import MQClientInstance


@dataclass
class QueryResult:
    """4.9's ``QueryResult``: the newest ``indexLastUpdateTimestamp`` of the brokers asked, and the messages."""

    index_last_update_timestamp: int = 0
    messages: list[MessageExt] = field(default_factory=list)


async def query_message(
    instance: MQClientInstance,
    topic: str,
    key: str,
    max_num: int,
    begin_ms: int,
    end_ms: int,
    is_unique_key: bool = False,
) -> QueryResult:
    route = instance.topic_route_table.get(topic)
    if route is None:
        await instance.update_topic_route_info_from_name_server(topic)
        route = instance.topic_route_table.get(topic)
    if route is None:
        raise MQClientException(ResponseCode.TOPIC_NOT_EXIST, f"The topic[{topic}] not matched route info")
    addrs = [a for a in (bd.select_broker_addr() for bd in route.broker_datas) if a is not None]
    header = QueryMessageRequestHeader(
        topic=topic, key=key, maxNum=max_num, beginTimestamp=begin_ms, endTimestamp=end_ms
    )
    timeout = instance.client_config.mq_client_api_timeout * 3
    api = instance.mq_client_api
    answers = await asyncio.gather(
        *(api.query_message(a, header, timeout, is_unique_key) for a in addrs), return_exceptions=True
    )
    result = QueryResult()
    errors = [a for a in answers if isinstance(a, BaseException)]
    for answer in answers:
        if isinstance(answer, BaseException):
            continue
        keep_matching(result, answer, key, is_unique_key)
    if not result.messages and errors and len(errors) == len(answers):
        raise errors[0]
    return result


def keep_matching(result: QueryResult, answer: tuple[int, list[MessageExt]], key: str, is_unique_key: bool) -> None:
    """Adds one broker's QUERY_MESSAGE ``answer`` to ``result`` as 4.9 does: by key the messages whose KEYS hold
    ``key``; by UNIQ_KEY only the earliest stored message whose UNIQ_KEY is ``key``."""
    ts, msgs = answer
    result.index_last_update_timestamp = max(result.index_last_update_timestamp, ts)
    for m in msgs:
        if is_unique_key:
            if m.properties.get(UNIQ_KEY) != key:
                continue
            if result.messages and result.messages[0].store_timestamp <= m.store_timestamp:
                continue
            result.messages = [m]
        elif key in (m.keys or "").split(KEY_SEPARATOR):
            result.messages.append(m)


async def view_message(instance: MQClientInstance, msg_id: str) -> MessageExt:
    """The message an offset msg id names (ValueError when ``msg_id`` is not one)."""
    (ip, port), offset = decode_offset_msg_id(msg_id)
    addr = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    return await instance.mq_client_api.view_message(addr, offset, instance.client_config.mq_client_api_timeout)
