"""Parity of a client connection's chunk splitter (``split_client_frames``, rust/rmq-py/src/remoting.rs) with its
Python twin (python/rmq_core/_reference/remoting_frames.py, which splits with ``RemotingCommand.decode_frame`` and
then picks the answers out): for any chunk and ``pending`` table, the same items (commands equal, field tuples equal
with the same waiter object), the same bytes consumed and error text, and the same ``pending`` left. A send answer's
tuple holds what ``process_send_response`` would have read from the command. Corpus: send answers as rmq_core's and
Java's brokers write them (JSON and ROCKETMQ headers), answers to other waiters, a server request in the middle,
answers nobody waits for, duplicate opaques, bad frames; then random chunks of those."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.remoting.command import (
    MAX_FRAME_LENGTH,
    RPC_TYPE_RESPONSE,
    SERIALIZE_ROCKETMQ,
    RemotingCommand,
    RemotingCommandError,
)
from rmq_core.remoting.header import SEND_ANSWER_FIELDS
from rmq_core.remoting.response_waiter import BlockingResponseWaiter, SendAnswerWaiter

RUST, PY = _backend.load("rust"), _backend.load("python")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Answer(SendAnswerWaiter):
    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def on_response(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        pass

    def on_fields(self, item: tuple[Any, ...]) -> None:
        pass


SEND_EXT = {
    "msgId": "7F00000100002A9F0000000000001234",
    "queueId": "3",
    "queueOffset": "123456",
    "MSG_REGION": "DefaultRegion",
    "TRACE_ON": "true",
}


def response(
    opaque: int, code: int = 0, ext: dict[str, str] | None = None, remark: str | None = None
) -> RemotingCommand:
    return RemotingCommand(
        code, language="JAVA", opaque=opaque, flag=RPC_TYPE_RESPONSE, remark=remark, ext_fields=dict(ext or {})
    )


def request(opaque: int) -> RemotingCommand:
    return RemotingCommand(40, language="JAVA", opaque=opaque, ext_fields={"consumerGroup": "g"})


def json_frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


FRAMES: list[bytes] = [
    response(1, ext=SEND_EXT).encode(),  # 0: an answer to a send waiter
    response(2, ext={**SEND_EXT, "transactionId": "tx"}, remark="ok").encode(SERIALIZE_ROCKETMQ),  # 1: ROCKETMQ
    response(3, code=14, remark="busy").encode(),  # 2: an error answer (no fields)
    response(4, ext={"msgId": "m", "queueId": "x"}).encode(),  # 3: fields decode_header refuses
    response(5, ext={"nextBeginOffset": "9"}).encode(),  # 4: an answer to another waiter
    request(6).encode(),  # 5: a request of the server
    response(7, ext=SEND_EXT).encode(),  # 6: after a request: a command
    response(99, ext=SEND_EXT).encode(),  # 7: nobody waits
    json_frame(
        b'{"code":0,"flag":1,"opaque":8,"extFields":{"queueId":"1","queueId":"2","msgId":null,"x":"y"},"remark":null}'
    ),  # 8: duplicates and a null, as Java never writes them
    response(1, ext=SEND_EXT, remark="again").encode(),  # 9: a second answer with opaque 1
    response(10, ext={"queueId": "1.5", "MSG_REGION": "\u00e9\U0001f600"}).encode(),  # 10
]


def pending_table() -> dict[int, Any]:
    return {
        1: Answer(1),
        2: Answer(2),
        3: Answer(3),
        4: Answer(4),
        5: BlockingResponseWaiter(),
        7: Answer(7),
        8: Answer(8),
        10: Answer(10),
    }


def split_both(chunk: bytes | bytearray) -> tuple[list[Any], int, str | None, dict[int, Any]]:
    out = []
    for impl in (RUST, PY):
        table = pending_table()
        before = dict(table)
        items, used, error = impl.split_client_frames(
            chunk,
            table,
            SendAnswerWaiter,
            SEND_ANSWER_FIELDS,
            RPC_TYPE_RESPONSE,
            RemotingCommand,
            RemotingCommand.decode_frame,
            RemotingCommandError,
            MAX_FRAME_LENGTH,
        )
        # the waiters by their key in the table before (each table has its own objects)
        names = {id(w): k for k, w in before.items()}
        shown = [("T", names[id(x[0])], *x[1:]) if isinstance(x, tuple) else x for x in items]
        out.append((shown, used, error, sorted(table)))
    assert out[0] == out[1]
    return out[0]


def test_the_answers_of_send_waiters_come_as_their_fields() -> None:
    chunk = b"".join(FRAMES)
    items, used, error, left = split_both(chunk)
    assert used == len(chunk) and error is None
    ext = SEND_EXT
    assert items[0] == ("T", 1, 0, None, ext["msgId"], "3", "123456", None, "DefaultRegion", "true")
    assert items[1] == ("T", 2, 0, "ok", ext["msgId"], "3", "123456", "tx", "DefaultRegion", "true")
    assert items[2] == ("T", 3, 14, "busy", None, None, None, None, None, None)
    assert items[3] == ("T", 4, 0, None, "m", "x", None, None, None, None)
    assert isinstance(items[4], RemotingCommand) and items[4].opaque == 5  # another kind of waiter: the command
    assert all(isinstance(x, RemotingCommand) for x in items[5:])  # from the server's request on
    assert left == [5, 7, 8, 10]  # the send waiters answered are out of pending


def test_fields_read_as_the_command_holds_them() -> None:
    chunk = FRAMES[8] + FRAMES[10] + FRAMES[9] + FRAMES[0]
    items, _, _, left = split_both(chunk)
    cmd8 = RemotingCommand.decode_frame(FRAMES[8][4:])
    assert items[0] == ("T", 8, 0, None, *[cmd8.ext_fields.get(n) for n in SEND_ANSWER_FIELDS])
    assert items[0][5] == "2"  # the later duplicate, as the command's dict holds it
    assert items[1][-2] == "\u00e9\U0001f600"
    assert items[2][:4] == ("T", 1, 0, "again") and isinstance(items[3], RemotingCommand)  # opaque 1 taken once
    assert left == [2, 3, 4, 5, 7]


@pytest.mark.parametrize("cut", [0, 3, 4, 10, len(FRAMES[0]) - 1, len(FRAMES[0]), len(FRAMES[0]) + 5])
def test_partial_chunks_and_bad_frames(cut: int) -> None:
    chunk = (FRAMES[0] + FRAMES[1])[:cut]
    split_both(chunk)
    bad = FRAMES[0] + struct.pack(">i", 2) + FRAMES[1]
    items, used, error, left = split_both(bad)
    assert len(items) == 1 and used == len(FRAMES[0]) and error is not None and 1 not in left
    undecodable = FRAMES[0] + struct.pack(">ii", 8, 4) + b"{x}!" + FRAMES[1]
    items, used, error, _ = split_both(undecodable)
    assert len(items) == 1 and error is not None


@given(st.lists(st.integers(0, len(FRAMES) - 1), max_size=12), st.integers(0, 40))
@SETTINGS
def test_random_chunks(picks: list[int], trim: int) -> None:
    chunk = b"".join(FRAMES[i] for i in picks)
    split_both(bytearray(chunk[: max(0, len(chunk) - trim)]))
