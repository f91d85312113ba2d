"""Names and constants RocketMQ keeps in MixAll.java and TopicValidator.java: retry/DLQ topics, system topics, ids."""

from __future__ import annotations

import functools
import re

MASTER_ID = 0
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RMQ_SYS_WHEEL_TIMER = SYSTEM_TOPIC_PREFIX + "wheel_timer"  # 5.x TimerMessageStore.TIMER_TOPIC
REVIVE_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"  # 5.x PopAckConstants.REVIVE_TOPIC (+ the cluster name)
REVIVE_QUEUE_NUM = 8  # 5.x BrokerConfig.reviveQueueNum: the revive topic's queues
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"  # the transaction check's consumer group (offsets of the half/op queues)
# TopicValidator.TOPIC_MAX_LENGTH, and what the store can hold: a CommitLog record written by 4.9 (and by the engine,
# which writes v1 records only) keeps the topic's length in one signed byte (Byte.MAX_VALUE). Apache HEAD allows
# 255 for %RETRY%/%DLQ% topics (written as v2 records); rmq_core does not (a longer name is refused up front).
TOPIC_MAX_LENGTH = 127
# TopicValidator.GROUP_MAX_LENGTH (HEAD): %RETRY%<group> (7 + 120) and %DLQ%<group> fit TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 120
TOPIC_GROUP_SEPARATOR = "@"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
        RMQ_SYS_WHEEL_TIMER,
    }
)

# the whole name (``fullmatch``): ``re.match`` with ``$`` accepted a trailing newline
_LEGAL = re.compile(r"[%|a-zA-Z0-9_-]+")


def get_retry_topic(consumer_group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + consumer_group


def get_dlq_topic(consumer_group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + consumer_group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_topic_or_group_illegal(name: str) -> bool:
    """TopicValidator.isTopicOrGroupIllegal: a character outside ``[%|a-zA-Z0-9_-]`` anywhere in the name."""
    return _LEGAL.fullmatch(name) is None


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def validate_topic(topic: str | None) -> str | None:
    """TopicValidator.validateTopic: None when valid, else the reason (RocketMQ's wording). Cached (a pure function
    called on every send), but only for names that may be valid: a client's longer name, of any size, is not kept."""
    if topic is not None and len(topic) > TOPIC_MAX_LENGTH:
        return _validate_topic(topic)
    return _validate_topic_cached(topic)


def _validate_topic(topic: str | None) -> str | None:
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"
    return None


_validate_topic_cached = functools.lru_cache(maxsize=8192)(_validate_topic)


def validate_group(group: str | None) -> str | None:
    if not group or not group.strip():
        return "The specified group is blank."
    if is_topic_or_group_illegal(group):
        return f"The specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
    return None
