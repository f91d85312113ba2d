"""TimerWheel: the slots of the timing wheel, RocketMQ 5's ``store/timer/TimerWheel.java``.

Owns: ``<root>/timerwheel`` (38 707 200 bytes: 7 days of slots × 2, 32 bytes each), slot reads and writes, on the
shared mapping itself (5.x: an in-memory copy). Created with the first timer, preallocated. Byte layout:
``rmq_core.format.timer``.
Invariants: the file is exactly ``WHEEL_LENGTH`` bytes (another length is refused, as 5.x does); a slot is valid for
time t only when its stored time equals ``t // precision``; before the file exists every slot reads empty.
Thread-safety: none; owned by the broker's event loop.
Details: docs/BROKER_DESIGN.md, 'Timer wheel'.
"""

from __future__ import annotations

import mmap
import os

from rmq_core.errors import StoreError
from rmq_core.format import timer as fmt


class TimerWheel:
    """``TimerWheel(path, precision_ms)``: ``get_slot(t)``, ``put_slot(t, first, last, num, magic)``,
    ``revise_slot(t, first, last, force)``, ``check_phy_pos(t, max_offset)``, ``get_all_num(t)``, ``flush()``."""

    def __init__(self, path: str, precision_ms: int) -> None:
        self.path = path
        self.precision_ms = precision_ms
        self.slots_total = fmt.SLOTS_TOTAL
        self._mm: mmap.mmap | None = None
        if os.path.exists(path):
            self._map(create=False)

    @property
    def exists(self) -> bool:
        return self._mm is not None

    def ensure(self) -> None:
        """Create the file (preallocated: a full disk fails here with a clear error, never SIGBUS on a mapped
        write) if this broker never had one."""
        if self._mm is None:
            self._map(create=True)

    def _map(self, create: bool) -> None:
        path, length = self.path, fmt.WHEEL_LENGTH
        try:
            if create:
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        except OSError as e:
            raise StoreError(f"cannot open timer wheel {path}: {e}") from e
        try:
            size = os.fstat(fd).st_size
            if size not in (0, length) or (size == 0 and not create):
                raise StoreError(f"Timer wheel length:{size} != expected:{length} ({path})")
            if size == 0:
                try:
                    os.posix_fallocate(fd, 0, length)
                except OSError as e:
                    os.ftruncate(fd, 0)
                    raise StoreError(f"cannot allocate timer wheel {path} ({length} bytes): {e}") from e
            self._mm = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            raise StoreError(f"cannot map timer wheel {path}: {e}") from e
        finally:
            os.close(fd)

    def _pos(self, time_ms: int) -> int:
        return fmt.slot_index(time_ms, self.precision_ms) * fmt.SLOT_SIZE

    def get_raw_slot(self, time_ms: int) -> fmt.Slot:
        if self._mm is None:
            return fmt.EMPTY_SLOT
        return fmt.decode_slot(self._mm, self._pos(time_ms), self.precision_ms)

    def get_slot(self, time_ms: int) -> fmt.Slot:
        """The slot of ``time_ms``, or ``EMPTY_SLOT`` when the wheel position holds another time."""
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return fmt.EMPTY_SLOT
        return slot

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int = 0, magic: int = 0) -> None:
        self.ensure()
        assert self._mm is not None
        pos = self._pos(time_ms)
        self._mm[pos : pos + fmt.SLOT_SIZE] = fmt.encode_slot(
            time_ms, first_pos, last_pos, num, magic, self.precision_ms
        )

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """5.x ``reviseSlot``: set the slot's positions (``IGNORE`` leaves one as it is); a slot of another time is
        replaced only when ``force``."""
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            if force:
                self.put_slot(time_ms, first_pos if first_pos != fmt.IGNORE else last_pos, last_pos)
            return
        self.put_slot(
            time_ms,
            slot.first_pos if first_pos == fmt.IGNORE else first_pos,
            slot.last_pos if last_pos == fmt.IGNORE else last_pos,
            slot.num,
            slot.magic,
        )

    def _live_slots(self, time_start_ms: int) -> list[fmt.Slot]:
        """Every slot from ``time_start_ms`` round the wheel whose stored time is the one expected there."""
        out: list[fmt.Slot] = []
        if self._mm is None:
            return out
        p = self.precision_ms
        start = time_start_ms // p
        n = self.slots_total * 2
        first_index = start % n
        mm = self._mm
        unpack = fmt.SLOT.unpack_from
        for i in range(n):
            t, first, last, num, magic = unpack(mm, ((first_index + i) % n) * fmt.SLOT_SIZE)
            if t == start + i:
                out.append(fmt.Slot(t * p, first, last, num, magic))
        return out

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """5.x ``checkPhyPos``: the smallest first position among live slots whose last position is past
        ``max_offset`` (2**63 − 1 when none)."""
        min_first = (1 << 63) - 1
        for s in self._live_slots(time_start_ms):
            if s.last_pos > max_offset and s.first_pos < min_first:
                min_first = s.first_pos
        return min_first

    def get_all_num(self, time_start_ms: int) -> int:
        return sum(s.num for s in self._live_slots(time_start_ms))

    def flush(self) -> None:
        if self._mm is None:
            return
        try:
            self._mm.flush()
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot flush timer wheel {self.path}: {e}") from e

    def close(self) -> None:
        if self._mm is not None and not self._mm.closed:
            self.flush()
            self._mm.close()
