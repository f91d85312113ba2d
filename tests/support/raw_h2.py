"""A hostile HTTP/2 client for the gRPC endpoint's bad-input tests and bench: it speaks just enough HTTP/2 by hand
(the preface, SETTINGS granting the server the largest windows, HEADERS as HPACK literals, DATA carrying gRPC's
5-byte-prefixed messages) to open streams, and never reads its socket (a receive buffer of 4 KiB), so whatever the
broker answers stays with the broker. One thread."""

from __future__ import annotations

import socket
import struct

HEADERS, DATA, SETTINGS, WINDOW_UPDATE = 0x1, 0x0, 0x4, 0x8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
MAX_WINDOW = 0x7FFFFFFF
SERVICE_PATH = "/apache.rocketmq.v2.MessagingService/"


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing, new name, no Huffman (names and values < 127 bytes)."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


class RawH2:
    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.authority = address
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.next_stream = 1
        settings = struct.pack(">HI", 0x4, MAX_WINDOW)  # SETTINGS_INITIAL_WINDOW_SIZE: send me everything
        self.sock.sendall(
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
            + frame(SETTINGS, 0, 0, settings)
            + frame(SETTINGS, ACK, 0, b"")  # the server's SETTINGS acknowledged unread
            + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", MAX_WINDOW - 65535))
        )

    def open(self, rpc: str, client_id: str, message: bytes, end: bool) -> int:
        """A new stream calling ``rpc`` with one request message (``end``: the client's half closed); its id."""
        sid, self.next_stream = self.next_stream, self.next_stream + 2
        fields = (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", SERVICE_PATH + rpc),
            (":authority", self.authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("x-mq-client-id", client_id),
        )
        block = b"".join(_literal(k, v) for k, v in fields)
        self.sock.sendall(frame(HEADERS, END_HEADERS, sid, block) + self._data(sid, message, end))
        return sid

    def send(self, sid: int, message: bytes) -> None:
        self.sock.sendall(self._data(sid, message, False))

    @staticmethod
    def _data(sid: int, message: bytes, end: bool) -> bytes:
        return frame(DATA, END_STREAM if end else 0, sid, b"\x00" + struct.pack(">I", len(message)) + message)

    def close(self) -> None:
        self.sock.close()
