"""CONSUME_MESSAGE_DIRECTLY's pieces shared by the consume services (4.9's consumeMessageDirectly of
ConsumeMessageConcurrentlyService / ConsumeMessageOrderlyService): the queue the message is given to the listener
with, the listener's status as a CMResult, an exception as the result's remark, and the run itself around a
listener call (``run_directly``; rmq_core.aio's services await theirs with ``run_directly_async``).

The message is consumed outside the ProcessQueues: nothing is acknowledged, no offset moves, nothing is sent back.

Pure functions; the listener runs on the calling thread (or task).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from rmq_core.client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.body.consumer_running_info import CMResult, ConsumeMessageDirectlyResult

_CONCURRENT = {
    ConsumeConcurrentlyStatus.CONSUME_SUCCESS: CMResult.CR_SUCCESS,
    ConsumeConcurrentlyStatus.RECONSUME_LATER: CMResult.CR_LATER,
}
_ORDERLY = {
    ConsumeOrderlyStatus.COMMIT: CMResult.CR_COMMIT,
    ConsumeOrderlyStatus.ROLLBACK: CMResult.CR_ROLLBACK,
    ConsumeOrderlyStatus.SUCCESS: CMResult.CR_SUCCESS,
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: CMResult.CR_LATER,
}


def directly_queue(msg: MessageExt, broker_name: str) -> MessageQueue:
    return MessageQueue(msg.topic, broker_name, msg.queue_id)


def cm_result(status: Any, orderly: bool) -> CMResult:
    """The listener's answer as a CMResult: None → CR_RETURN_NULL; a status that is none of the listener's kind
    → CR_LATER (as the consume services count it)."""
    if status is None:
        return CMResult.CR_RETURN_NULL
    table: dict[Any, CMResult] = _ORDERLY if orderly else _CONCURRENT
    kind = ConsumeOrderlyStatus if orderly else ConsumeConcurrentlyStatus
    try:
        return table[kind(status)]
    except ValueError:
        return CMResult.CR_LATER


def exception_desc(e: BaseException) -> str:
    """An exception as RemotingHelper.exceptionSimpleDesc writes it: the exception, then where it was raised."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f", {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
    return f"{type(e).__name__}: {e}{where}"


def run_directly(
    call: Callable[[], Any], orderly: bool, auto_commit: Callable[[], bool]
) -> ConsumeMessageDirectlyResult:
    """One listener call timed into a ConsumeMessageDirectlyResult (``auto_commit`` read after the call)."""
    result = ConsumeMessageDirectlyResult(order=orderly)
    begin = time.monotonic()
    try:
        result.consume_result = cm_result(call(), orderly)
    except Exception as e:
        result.consume_result = CMResult.CR_THROW_EXCEPTION
        result.remark = exception_desc(e)
    result.spent_time_mills = int((time.monotonic() - begin) * 1000)
    result.auto_commit = auto_commit()
    return result


async def run_directly_async(
    call: Callable[[], Awaitable[Any]], orderly: bool, auto_commit: Callable[[], bool]
) -> ConsumeMessageDirectlyResult:
    result = ConsumeMessageDirectlyResult(order=orderly)
    begin = time.monotonic()
    try:
        result.consume_result = cm_result(await call(), orderly)
    except Exception as e:
        result.consume_result = CMResult.CR_THROW_EXCEPTION
        result.remark = exception_desc(e)
    result.spent_time_mills = int((time.monotonic() - begin) * 1000)
    result.auto_commit = auto_commit()
    return result
