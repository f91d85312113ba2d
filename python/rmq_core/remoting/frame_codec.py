"""The remoting frame codec's batched fast path: every whole frame of a received chunk split and decoded in one call
of the backend (``split_frames``), a run of commands encoded into one buffer (``encode_frames``). Each must give what
``RemotingCommand.decode_frame`` / ``encode`` (``command.py``) give frame by frame: the same commands, bytes and
errors (tests/remoting/test_frame_codec_parity.py; docs/REMOTING_DESIGN.md, "Fast paths").

Thread-safety: pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmq_core import _backend
from rmq_core.remoting.command import MAX_FRAME_LENGTH, RemotingCommand, RemotingCommandError


def split_frames(buf: bytearray) -> tuple[list[RemotingCommand], int, RemotingCommandError | None]:
    """The whole frames at the start of ``buf``, decoded: (commands, bytes consumed, error). ``error`` is the first
    bad frame (length outside [4, MAX_FRAME_LENGTH], or a frame that does not decode); nothing after it is read.
    One call of the backend's ``split_frames`` per chunk (Rust: JSON headers in the shape Java writes decoded
    natively, every other frame by ``RemotingCommand.decode_frame``)."""
    cmds, used, error = _backend.impl.split_frames(
        buf, RemotingCommand, RemotingCommand.decode_frame, RemotingCommandError, MAX_FRAME_LENGTH
    )
    return cmds, used, None if error is None else RemotingCommandError(error)


def encode_frames(cmds: Sequence[RemotingCommand | bytes]) -> bytes:
    """The frames of ``cmds`` as one buffer (the backend's ``encode_frames``: the bytes of ``cmd.encode()`` each, a
    ``bytes`` item as it is: a frame already encoded)."""
    return _backend.impl.encode_frames(cmds, RemotingCommand.encode, MAX_FRAME_LENGTH)
