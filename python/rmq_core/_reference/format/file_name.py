"""Mapped file names: the file's global start byte offset, decimal, zero-padded to 20 digits (``UtilAll.offset2FileName``).

Owns: :func:`offset_to_file_name`, :func:`parse_file_name`.
Format: exactly 20 ASCII digits, e.g. ``00000000001073741824``.
Invariants:
  1. A name that is not exactly 20 ASCII digits is not a store file; loaders ignore it.
Thread-safety: pure functions.
"""

from __future__ import annotations

FILE_NAME_LEN = 20


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


def parse_file_name(name: str) -> int | None:
    if len(name) != FILE_NAME_LEN or not (name.isascii() and name.isdigit()):
        return None
    return int(name)
