"""The send-side rules of timer messages: RocketMQ 5's ``HookUtils.checkIfTimerMessage`` / ``transformTimerMessage``.

Owns the decision for a message with ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` or ``TIMER_DELIVER_MS``: refused
(MESSAGE_ILLEGAL: not a number, beyond ``timerMaxDelaySec``; SYSTEM_ERROR: ``timerWheelEnable=false``), stored at
once (due already), or redirected to ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` and
``REAL_TOPIC``/``REAL_QID``. A delay level wins; a message already carrying ``TIMER_OUT_MS`` is not a timer message.
Thread-safety: pure functions of their arguments.
Details: docs/BROKER_DESIGN.md, 'Timer messages: the send side'.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping

from rmq_core.common.mix_all import RMQ_SYS_WHEEL_TIMER
from rmq_core.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    Message,
)
from rmq_core.remoting.codes import ResponseCode

TIMER_TOPIC = RMQ_SYS_WHEEL_TIMER
TIMER_PROPERTIES = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)
PRECISION_CANDIDATES = (100, 200, 500, 1000)
_LONG = re.compile(r"[+-]?[0-9]+")


class TimerMessageRefused(Exception):
    """A timer message the broker refuses: ``code`` and ``remark`` of the send response."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def normalize_precision_ms(precision_ms: int) -> int:
    """5.x ``setTimerPrecisionMs``: the largest of 100, 200, 500, 1000 not above the value (100 below 100)."""
    for i in range(1, len(PRECISION_CANDIDATES)):
        if precision_ms < PRECISION_CANDIDATES[i]:
            return PRECISION_CANDIDATES[i - 1]
    return PRECISION_CANDIDATES[-1]


def check_if_timer_message(topic: str, properties: MutableMapping[str, str], delay_level: int) -> bool:
    """5.x ``checkIfTimerMessage`` (removes the timer properties when a delay level is set)."""
    if delay_level > 0:
        for name in TIMER_PROPERTIES:
            properties.pop(name, None)
        return False
    if topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in properties:
        return False
    return any(name in properties for name in TIMER_PROPERTIES)


def _parse_long(raw: str) -> int:
    """Java ``Long.parseLong``: an optional sign and decimal digits, nothing else."""
    if not _LONG.fullmatch(raw):
        raise ValueError(f"{raw!r} is not a long")
    value = int(raw)
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"{raw!r} is out of the long range")
    return value


def deliver_ms_of(properties: MutableMapping[str, str], now_ms: int) -> int:
    """The requested deliver time (epoch ms): ``TIMER_DELAY_SEC``, else ``TIMER_DELAY_MS``, else
    ``TIMER_DELIVER_MS``. ValueError when the property is not an integer."""
    if PROPERTY_TIMER_DELAY_SEC in properties:
        return now_ms + _parse_long(properties[PROPERTY_TIMER_DELAY_SEC]) * 1000
    if PROPERTY_TIMER_DELAY_MS in properties:
        return now_ms + _parse_long(properties[PROPERTY_TIMER_DELAY_MS])
    return _parse_long(properties[PROPERTY_TIMER_DELIVER_MS])


def illegal_remark(timer_max_delay_sec: int) -> str:
    return (
        "timer message illegal, the delay time should not be bigger than the max delay "
        f"{timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger than the current time"
    )


def transform_timer_message(
    msg: Message,
    queue_id: int,
    delay_level: int,
    *,
    timer_wheel_enable: bool,
    timer_max_delay_sec: int,
    timer_precision_ms: int,
    now_ms: int,
) -> int:
    """5.x ``handleScheduleMessage``'s timer part, applied to ``msg`` in place. Returns the queue id to store it in
    (``queue_id`` when it is not a timer message, 0 of ``rmq_sys_wheel_timer`` when it is); raises
    ``TimerMessageRefused``."""
    props = msg.properties
    if not check_if_timer_message(msg.topic, props, delay_level):
        return queue_id
    if not timer_wheel_enable:
        raise TimerMessageRefused(
            ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false"
        )
    try:
        deliver_ms = deliver_ms_of(props, now_ms)
    except (ValueError, KeyError):
        raise TimerMessageRefused(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(timer_max_delay_sec)) from None
    if deliver_ms <= now_ms:
        if PROPERTY_TIMER_DEL_UNIQKEY in props:
            raise TimerMessageRefused(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(timer_max_delay_sec))
        return queue_id  # due already: an ordinary message
    if delay_level <= 0 and deliver_ms - now_ms > timer_max_delay_sec * 1000:
        raise TimerMessageRefused(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(timer_max_delay_sec))
    precision = normalize_precision_ms(timer_precision_ms)
    if deliver_ms % precision == 0:
        deliver_ms -= precision
    else:
        deliver_ms = deliver_ms // precision * precision
    props[PROPERTY_TIMER_OUT_MS] = str(deliver_ms)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    msg.topic = TIMER_TOPIC
    return 0
