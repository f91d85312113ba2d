"""RunningFlags: the message store's health bits (4.9 ``org.apache.rocketmq.store.RunningFlags``).

Bits (4.9's values): NOT_READABLE 1, NOT_WRITEABLE 2, WRITE_LOGICS_QUEUE_ERROR 4, WRITE_INDEX_FILE_ERROR 8,
DISK_FULL 16. The store takes puts only while ``is_writeable()`` (none of the bits but NOT_READABLE set); a refused put
is answered SERVICE_NOT_AVAILABLE and stores nothing (4.9 ``DefaultMessageStore#checkStoreStatus``).

Who sets them in rmq_core: DISK_FULL by the disk check of ``store_clean_service.CleanCommitLogService`` (above
``disk_space_warning_level_ratio``) and cleared by it (back at or below ``disk_space_clean_forcibly_ratio``'s band).
The other bits are kept for 4.9's layout and for callers (an operator tool may make the store not writeable or not
readable; while NOT_READABLE is set ``MessageStore.get_message`` raises StoreError, 4.9's getMessage returning null).

Thread-safety: reads are lock-free (one int attribute); every change takes a lock so concurrent makers never lose a
bit.
"""

from __future__ import annotations

import threading

NOT_READABLE_BIT = 1
NOT_WRITEABLE_BIT = 1 << 1
WRITE_LOGICS_QUEUE_ERROR_BIT = 1 << 2
WRITE_INDEX_FILE_ERROR_BIT = 1 << 3
DISK_FULL_BIT = 1 << 4

_NOT_WRITEABLE_MASK = NOT_WRITEABLE_BIT | WRITE_LOGICS_QUEUE_ERROR_BIT | DISK_FULL_BIT | WRITE_INDEX_FILE_ERROR_BIT


class RunningFlags:
    """``RunningFlags()``: all clear (readable and writeable)."""

    __slots__ = ("_lock", "flag_bits")

    def __init__(self) -> None:
        self.flag_bits = 0
        self._lock = threading.Lock()

    def _set(self, bits: int) -> int:
        with self._lock:
            old = self.flag_bits
            self.flag_bits = old | bits
            return old

    def _clear(self, bits: int) -> int:
        with self._lock:
            old = self.flag_bits
            self.flag_bits = old & ~bits
            return old

    def is_readable(self) -> bool:
        return not self.flag_bits & NOT_READABLE_BIT

    def is_writeable(self) -> bool:
        return not self.flag_bits & _NOT_WRITEABLE_MASK

    def is_disk_full(self) -> bool:
        return bool(self.flag_bits & DISK_FULL_BIT)

    def get_and_make_readable(self) -> bool:
        """Clears NOT_READABLE; True when the store was readable before."""
        return not self._clear(NOT_READABLE_BIT) & NOT_READABLE_BIT

    def get_and_make_not_readable(self) -> bool:
        """Sets NOT_READABLE (``get_message`` then raises StoreError); True when the store was readable before."""
        return not self._set(NOT_READABLE_BIT) & NOT_READABLE_BIT

    def get_and_make_not_writeable(self) -> bool:
        """Sets NOT_WRITEABLE; True when the store was writeable before."""
        return not self._set(NOT_WRITEABLE_BIT) & _NOT_WRITEABLE_MASK

    def get_and_make_writeable(self) -> bool:
        """Clears NOT_WRITEABLE; True when the store was writeable before."""
        return not self._clear(NOT_WRITEABLE_BIT) & _NOT_WRITEABLE_MASK

    def get_and_make_disk_full(self) -> bool:
        """Sets DISK_FULL; True when it was not set before (the moment to log it)."""
        return not self._set(DISK_FULL_BIT) & DISK_FULL_BIT

    def get_and_make_disk_ok(self) -> bool:
        """Clears DISK_FULL; True when it was not set before (False: the disk just became OK)."""
        return not self._clear(DISK_FULL_BIT) & DISK_FULL_BIT

    def __repr__(self) -> str:
        return f"RunningFlags(flag_bits={self.flag_bits})"
