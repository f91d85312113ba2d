"""What a send comes to, shared by SendMessageProcessor's general path and its plain-send fast path
(``send_plain_fast_path.py``), so that both answer from one table: ``SendRefused`` (a check failed: its code and
remark, nothing stored), ``SEND_OK`` (the put statuses answered with a success-like code, 4.9
``handlePutMessageResult``), ``REFUSED_BY_VALIDATION``, ``ANSWER_KEYS`` (a stored single send's answer extFields, in
order) and ``parse_address`` (the born host of a connection's sends). Pure values and functions: any thread.
"""

from __future__ import annotations

import functools

from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH
from rmq_core.store_status import PutMessageStatus

SEND_OK = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
# a single send's answer: extFields in this order (MSG_REGION, TRACE_ON, then SendMessageResponseHeader's fields)
ANSWER_KEYS = (PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH, "msgId", "queueId", "queueOffset")
# a put of many sends that one of them fails validation appends none of them, each answered with that status: the
# sends are then put one by one, so that each gets its own verdict (as 4.9 puts each send on its own)
REFUSED_BY_VALIDATION = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)


class SendRefused(Exception):
    """A check failed: answer ``code`` with ``remark`` (nothing stored)."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@functools.lru_cache(maxsize=4096)
def parse_address(address: str) -> tuple[str, int]:
    """``"ip:port"`` (IPv6 ``"::1:port"`` or ``"[::1]:port"``) → (ip, port)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        return host, int(port)
    except ValueError:
        raise ValueError(f"not an ip:port address: {address!r}") from None
