"""The one error hierarchy of RocketMQ RPCs (``MQClientAPIImpl`` and its blocking face): every failed request raises
a ``RocketMQRpcError``, as RocketMQ's client raises them, and the client error codes (``ClientErrorCode``).

Owns: ``RocketMQRpcError`` (response_code, remark, addr) and its subclasses ``MQClientException``,
``MQBrokerException`` and ``RemotingError`` (``RemotingConnectError``, ``RemotingTimeoutError``,
``RemotingTooMuchRequestError``).
Invariants: ``response_code`` is a broker ResponseCode or a ClientErrorCode (or -1 when neither, and for every
``RemotingError``); ``remark`` is the broker's remark (or the client's message); ``addr`` is where the request went
(None when it is not one address). Messages follow RocketMQ's wording.
Thread-safety: plain exception classes.
Details (the tree, what each class means): docs/CLIENT_DESIGN.md, 'RPC errors'.
"""

from __future__ import annotations

from rmq_core.errors import RmqError

FAQ_URL = "http://rocketmq.apache.org/docs/faq/"


class ClientErrorCode:
    CONNECT_BROKER_EXCEPTION = 10001
    ACCESS_BROKER_TIMEOUT = 10002
    BROKER_NOT_EXIST_EXCEPTION = 10003
    NO_NAME_SERVER_EXCEPTION = 10004
    NOT_FOUND_TOPIC_EXCEPTION = 10005
    REQUEST_TIMEOUT_EXCEPTION = 10006
    CREATE_REPLY_MESSAGE_EXCEPTION = 10007


class RocketMQRpcError(RmqError):
    """A RocketMQ RPC failed: ``response_code`` (-1 when there was no answer), ``remark``, ``addr``."""

    response_code: int = -1
    remark: str | None = None
    addr: str | None = None


class MQClientException(RocketMQRpcError):
    """``MQClientException(code, message)``; ``response_code`` is the code, ``error_message`` (= ``remark``) the bare
    message."""

    def __init__(
        self, code: int, message: str | None, cause: BaseException | None = None, addr: str | None = None
    ) -> None:
        self.response_code = code
        self.error_message = message
        self.remark = message
        self.addr = addr
        text = f"CODE: {code}  DESC: {message}" if code != -1 else str(message)
        super().__init__(text)
        if cause is not None:
            self.__cause__ = cause

    @classmethod
    def of(cls, message: str, cause: BaseException | None = None) -> MQClientException:
        """``new MQClientException(message, cause)``: no code (-1)."""
        return cls(-1, message, cause)


class MQBrokerException(RocketMQRpcError):
    """A broker (or name server) answered with a response code the client cannot treat as success."""

    def __init__(self, response_code: int, remark: str | None, broker_addr: str | None = None) -> None:
        self.response_code = response_code
        self.remark = remark
        self.broker_addr = broker_addr
        self.addr = broker_addr
        text = f"CODE: {response_code}  DESC: {remark}"
        if broker_addr:
            text += f" BROKER: {broker_addr}"
        super().__init__(text)

    @property
    def error_message(self) -> str | None:
        return self.remark


class RemotingError(RocketMQRpcError):
    """A request did not get a response: the connection failed or the wait timed out (``response_code`` -1)."""


class RemotingConnectError(RemotingError, ConnectionError):
    def __init__(self, addr: str | None, cause: BaseException | None = None) -> None:
        super().__init__(f"connect to {addr} failed" + (f": {cause}" if cause else ""))
        self.addr = addr


class RemotingTimeoutError(RemotingError, TimeoutError):
    def __init__(self, addr: str | None, timeout_ms: int | float) -> None:
        super().__init__(f"wait response on the channel <{addr}> timeout, {int(timeout_ms)}(ms)")
        self.addr = addr
        self.timeout_ms = timeout_ms


class RemotingTooMuchRequestError(RemotingError):
    """RemotingTooMuchRequestException: what RocketMQ raises when a call ran out of its total time budget."""


def suggest_todo(url: str = FAQ_URL) -> str:
    return f"\nSee {url} for further details."
