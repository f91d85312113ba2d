"""The HA wire format (4.9 ``HAConnection`` / ``HAService.HAClient``), stated once.

Slave → master: the slave's max CommitLog offset, 8 bytes big-endian (``reportSlaveMaxOffset``); the master reads the
last whole 8-byte report in what it received (earlier ones in the same read are superseded).
Master → slave: frames ``[physical offset: i64][body size: i32][body: size bytes of CommitLog]``; size 0 is a
heartbeat (``haSendHeartbeatInterval``); a body never crosses a CommitLog file end.
Defaults are 4.9's MessageStoreConfig: haTransferBatchSize 32 KiB, haSendHeartbeatInterval 5 s,
haHousekeepingInterval 20 s, haSlaveFallbehindMax 256 MiB.
"""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
FRAME_HEADER = struct.Struct(">qi")
FRAME_HEADER_SIZE = FRAME_HEADER.size  # 12

DEFAULT_HA_TRANSFER_BATCH_SIZE = 32 * 1024
DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS = 5000
DEFAULT_HA_HOUSEKEEPING_INTERVAL_MS = 20000
DEFAULT_HA_SLAVE_FALLBEHIND_MAX = 256 * 1024 * 1024
# a frame body larger than this is garbage (4.9's slave reads into a 4 MiB buffer)
MAX_FRAME_BODY = 4 * 1024 * 1024


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_frame_header(offset: int, size: int) -> bytes:
    return FRAME_HEADER.pack(offset, size)
