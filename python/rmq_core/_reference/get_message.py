"""The pull read path: RocketMQ 4.9 ``DefaultMessageStore#getMessage`` and ``isTheBatchFull``, exactly.

Owns: the offset checks, the one-file ConsumeQueue scan and the batch limits.
Format: reads 20-byte units from one ConsumeQueue file and whole records from the CommitLog; writes nothing.
Invariants: 1. the offset checks in 4.9's order and statuses (NO_MATCHED_LOGIC_QUEUE ... OFFSET_FOUND_NULL);
2. the scan covers one file's written units from ``offset``, bounded, next = offset + scanned/20; 3. per unit,
4.9's order (next_phy_file_start skip, batch full, tag filter, availability, ``record_matches_unit``, property
filter), a record that is not the unit's is never served; 4. "in disk" compares with ``memory_threshold()`` in
integers; 5. the tag filter compares tagsCode truncated to int32.
Thread-safety: runs under the engine lock (the property filter callback too).
Details (each invariant in full): docs/CORE_API.md, 'Pull read path'.
"""

from __future__ import annotations

from collections.abc import Callable

from rmq_core.format.cq_unit import CQ_STORE_UNIT_SIZE, UNIT, to_int32
from rmq_core.format.message import RecordFormatError, record_matches_unit, record_properties
from rmq_core.store_status import GetMessageStatus

from .commit_log import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueue

LONG_MIN = -(2**63)


def _properties_of(record: bytes) -> dict[str, str]:
    try:
        return record_properties(record)
    except RecordFormatError:
        return {}


def is_the_batch_full(
    config: StoreConfig, phy_size: int, max_msg_nums: int, buffer_total: int, msg_total: int, in_disk: bool
) -> bool:
    """4.9 ``isTheBatchFull``."""
    if buffer_total == 0 or msg_total == 0:
        return False
    if msg_total >= max_msg_nums:
        return True
    if in_disk:
        if buffer_total + phy_size > config.max_transfer_bytes_on_message_in_disk:
            return True
        if msg_total > config.max_transfer_count_on_message_in_disk - 1:
            return True
    else:
        if buffer_total + phy_size > config.max_transfer_bytes_on_message_in_memory:
            return True
        if msg_total > config.max_transfer_count_on_message_in_memory - 1:
            return True
    return False


def get_message(
    config: StoreConfig,
    commit_log: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_msg_nums: int,
    tag_codes: list[int] | None,
    property_filter: Callable[[dict[str, str]], bool] | None,
) -> tuple:
    """Returns ``(status, next_begin_offset, min_offset, max_offset, message_count, buffer_total_size,
    suggest_pulling_from_slave, body, max_phy_offset_pulling)``."""
    if cq is None:
        return (int(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE), 0, 0, 0, 0, 0, False, b"", 0)
    max_phy_offset = commit_log.max_offset
    min_offset = cq.min_offset
    max_offset = cq.max_offset

    if max_offset == 0:
        return (int(GetMessageStatus.NO_MESSAGE_IN_QUEUE), 0, min_offset, max_offset, 0, 0, False, b"", 0)
    if offset < min_offset:
        return (int(GetMessageStatus.OFFSET_TOO_SMALL), min_offset, min_offset, max_offset, 0, 0, False, b"", 0)
    if offset == max_offset:
        return (int(GetMessageStatus.OFFSET_OVERFLOW_ONE), offset, min_offset, max_offset, 0, 0, False, b"", 0)
    if offset > max_offset:
        nxt = 0 if min_offset == 0 else max_offset
        return (int(GetMessageStatus.OFFSET_OVERFLOW_BADLY), nxt, min_offset, max_offset, 0, 0, False, b"", 0)

    max_filter_bytes = max(config.max_filter_message_size, max_msg_nums * CQ_STORE_UNIT_SIZE)
    units = cq.index_buffer(offset, max_filter_bytes)
    if units is None:
        nxt = cq.roll_next_file(offset)
        return (int(GetMessageStatus.OFFSET_FOUND_NULL), nxt, min_offset, max_offset, 0, 0, False, b"", 0)

    status = GetMessageStatus.NO_MATCHED_MESSAGE
    memory = config.memory_threshold()
    codes = None if tag_codes is None else set(tag_codes)
    next_phy_file_start = LONG_MIN
    max_phy_offset_pulling = 0
    parts: list[bytes] = []
    buffer_total = 0
    msg_count = 0
    i = 0
    n = len(units)  # already capped at max_filter_bytes
    while i < n:
        phy_offset, phy_size, tags_code = UNIT.unpack_from(units, i)
        max_phy_offset_pulling = phy_offset
        if next_phy_file_start != LONG_MIN and phy_offset < next_phy_file_start:
            i += CQ_STORE_UNIT_SIZE
            continue
        in_disk = (max_phy_offset - phy_offset) > memory
        if is_the_batch_full(config, phy_size, max_msg_nums, buffer_total, msg_count, in_disk):
            break
        if codes is not None and to_int32(tags_code) not in codes:
            if buffer_total == 0:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            i += CQ_STORE_UNIT_SIZE
            continue
        record = commit_log.get_message(phy_offset, phy_size)
        if record is None:
            if buffer_total == 0:
                status = GetMessageStatus.MESSAGE_WAS_REMOVING
            next_phy_file_start = commit_log.roll_next_file(phy_offset)
            i += CQ_STORE_UNIT_SIZE
            continue
        if not record_matches_unit(
            record, phy_offset, cq.topic, cq.queue_id, offset + i // CQ_STORE_UNIT_SIZE, config.check_crc_on_recover
        ):  # a damaged record (or a unit pointing at the wrong bytes) is never served: skipped like a filter miss
            if buffer_total == 0:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            i += CQ_STORE_UNIT_SIZE
            continue
        if property_filter is not None and not property_filter(_properties_of(record)):
            if buffer_total == 0:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            i += CQ_STORE_UNIT_SIZE
            continue
        parts.append(record)
        buffer_total += len(record)
        msg_count += 1
        status = GetMessageStatus.FOUND
        next_phy_file_start = LONG_MIN
        i += CQ_STORE_UNIT_SIZE

    next_begin = offset + i // CQ_STORE_UNIT_SIZE
    suggest = (max_phy_offset - max_phy_offset_pulling) > memory
    return (
        int(status),
        next_begin,
        min_offset,
        max_offset,
        msg_count,
        buffer_total,
        suggest,
        b"".join(parts),
        max_phy_offset_pulling,
    )
