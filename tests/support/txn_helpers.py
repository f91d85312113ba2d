"""Helpers for the transaction tests: a raw producer connection (heartbeat as a producer group, then requests and the
broker's own requests on the same socket), running a broker's transaction check at once, a recording
TransactionListener, and reading a queue through a broker's store."""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from typing import Any

from rmq_core.broker import Broker
from rmq_core.remoting.body.heartbeat import HeartbeatData, ProducerData
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand

from support.send_helpers import _recv_exactly, on_loop


def check_now(broker: Broker) -> None:
    """One pass of the broker's TransactionalMessageCheckService, on its loop."""
    on_loop(broker, broker.controller.transactional_message_check_service.check_now)


class RawProducerConnection:
    """One TCP connection registered (HEART_BEAT) as a producer of ``group``: ``invoke`` sends a request and waits
    for its response; the broker's requests on it (CHECK_TRANSACTION_STATE) are queued for ``next_request``."""

    def __init__(self, addr: str, group: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5.0)
        self.sock.settimeout(None)
        self._responses: dict[int, queue.Queue[RemotingCommand]] = {}
        self._lock = threading.Lock()
        self.requests: queue.Queue[RemotingCommand] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        hb = HeartbeatData(client_id=f"raw-{group}", producer_data_set=[ProducerData(group)])
        resp = self.invoke(RemotingCommand.request(RequestCode.HEART_BEAT, {}, hb.encode()))
        assert resp.code == 0, resp.remark

    def _read(self) -> None:
        try:
            while True:
                (length,) = struct.unpack(">i", _recv_exactly(self.sock, 4))
                cmd = RemotingCommand.decode_frame(_recv_exactly(self.sock, length))
                if cmd.is_response:
                    with self._lock:
                        q = self._responses.get(cmd.opaque)
                    if q is not None:
                        q.put(cmd)
                else:
                    self.requests.put(cmd)
        except (OSError, ConnectionError):
            return

    def invoke(self, req: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        q: queue.Queue[RemotingCommand] = queue.Queue()
        with self._lock:
            self._responses[req.opaque] = q
        self.sock.sendall(req.encode())
        try:
            return q.get(timeout=timeout)
        finally:
            with self._lock:
                self._responses.pop(req.opaque, None)

    def next_request(self, code: int, timeout: float = 5.0) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        while True:
            req = self.requests.get(timeout=max(0.01, deadline - time.monotonic()))
            if req.code == code:
                return req

    def no_request_within(self, seconds: float) -> bool:
        try:
            self.requests.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> RawProducerConnection:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
