"""The timer's files as RocketMQ 5 lays them out (broker/timer/, layout in format/timer.py): 52-byte
timer log units that never straddle files (a blank fills a file's tail), recovery that keeps the valid units and drops
a torn tail, the wheel's 32-byte slots twice round 7 days (a slot of another time reads empty; a file of another
length is refused), and the checkpoint page."""

from __future__ import annotations

import os

import pytest

from rmq_core.broker.timer.timer_checkpoint import TimerCheckpoint
from rmq_core.broker.timer.timer_log import TimerLog
from rmq_core.broker.timer.timer_wheel import TimerWheel
from rmq_core.errors import StoreError
from rmq_core.format import timer as fmt


def _unit(prev: int, i: int) -> bytes:
    return fmt.encode_unit(prev, fmt.MAGIC_DEFAULT, 1000, 2000, i * 100, 80, fmt.topic_hash("T"), 3500)


def test_constants_are_5x():
    assert fmt.UNIT_SIZE == 52 and fmt.SLOT_SIZE == 32 and fmt.WHEEL_LENGTH == 7 * 86400 * 2 * 32
    assert fmt.BLANK_MAGIC_CODE == -875286124  # Java: 0xBBCCDDEE ^ 1880681586 + 8
    assert fmt.offset_for_last_unit(100 * 1024 * 1024) == 104857532  # TimerLog.getOffsetForLastUnit
    assert fmt.topic_hash("TopicTest") == -1902610879  # "TopicTest".hashCode()
    assert fmt.is_magic_ok(1) and fmt.is_magic_ok(3) and not fmt.is_magic_ok(16) and not fmt.is_magic_ok(0x11)


def test_timer_log_rolls_files_with_a_blank_and_recovers(tmp_path):
    d = str(tmp_path / "timerlog")
    size = 52 * 4 + 30  # four units, then 30 bytes: too few for another unit + a blank → a blank, next file
    tl = TimerLog(d, size)
    pos = [tl.append(_unit(-1 if i == 0 else (i - 1) * 52, i)) for i in range(6)]
    assert pos == [0, 52, 104, 156, size, size + 52]
    assert sorted(os.listdir(d)) == [f"{0:020d}", f"{size:020d}"]
    with open(os.path.join(d, f"{0:020d}"), "rb") as f:
        f.seek(208)
        assert fmt.BLANK_UNIT.unpack(f.read(16)) == (30, 0, fmt.BLANK_MAGIC_CODE)
    u = tl.read_unit(size + 52)
    assert u is not None and (u.offset_py, u.size_py, u.reserved, u.delayed_time_ms) == (500, 80, 3500, 3000)
    assert [p for p, _ in tl.units_in(0, 1 << 40)] == pos
    # a torn unit after the fifth: recovery keeps five, zeroes the rest
    tl.files[-1].write(52, b"\x00\x00\x00\x34" + b"\xff" * 10)
    tl.close()
    tl = TimerLog(d, size)
    tl.load()
    end, units = tl.scan_valid(0)
    assert end == size + 52 and [p for p, _ in units] == pos[:5]
    tl.truncate_dirty(end)
    assert tl.write_pos == size + 52
    assert tl.append(_unit(-1, 9)) == size + 52
    tl.close()
    tl = TimerLog(d, 1000)
    with pytest.raises(StoreError, match="expected mappedFileSizeTimerLog 1000"):
        tl.load()


def test_timer_wheel_slots_and_file_length(tmp_path):
    p = str(tmp_path / "timerwheel")
    w = TimerWheel(p, 1000)
    t = 1_700_000_123_456
    assert not os.path.exists(p) and w.get_slot(t) == fmt.EMPTY_SLOT  # no file before the first slot is written
    w.put_slot(t, 52, 104, 2, 0)
    assert os.path.getsize(p) == fmt.WHEEL_LENGTH
    assert os.stat(p).st_blocks * 512 >= fmt.WHEEL_LENGTH  # preallocated, not sparse: no SIGBUS on a full disk
    assert w.get_slot(t + 500) == fmt.Slot(t // 1000 * 1000, 52, 104, 2, 0)  # same slot within the precision
    later = t + fmt.SLOTS_TOTAL * 2 * 1000  # once round the wheel: the same position, another time
    assert w.get_slot(later) == fmt.EMPTY_SLOT
    w.revise_slot(t, fmt.IGNORE, 156, False)
    assert w.get_slot(t).last_pos == 156 and w.get_slot(t).first_pos == 52
    w.revise_slot(later, fmt.IGNORE, 208, False)  # not forced: the slot of another time stays
    assert w.get_slot(t).last_pos == 156
    w.revise_slot(later, fmt.IGNORE, 208, True)
    assert w.get_slot(later) == fmt.Slot(later // 1000 * 1000, 208, 208, 0, 0)
    with open(p, "rb") as f:  # 5.x's bytes: time / precision, first, last, num, magic
        f.seek(fmt.slot_index(later, 1000) * 32)
        assert fmt.SLOT.unpack(f.read(32)) == (later // 1000, 208, 208, 0, 0)
    w.close()
    with open(p, "r+b") as f:
        f.truncate(1000)
    with pytest.raises(StoreError, match="Timer wheel length:1000"):
        TimerWheel(p, 1000)


def test_timer_checkpoint_page(tmp_path):
    p = str(tmp_path / "config" / "timercheck")
    cp = TimerCheckpoint(p)
    assert cp.data == fmt.TimerCheckpointData()
    cp.update(5000, 520, 10, now_ms=77)
    cp.close()
    assert os.path.getsize(p) == 4096
    with open(p, "rb") as f:
        raw = f.read()
    assert fmt.CHECKPOINT.unpack_from(raw) == (5000, 520, 10, 10, 0, 77, 1)
    assert TimerCheckpoint(p).data.last_timer_queue_offset == 10
