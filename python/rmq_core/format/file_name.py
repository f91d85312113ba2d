"""Mapped file names: the file's global start byte offset, decimal, zero-padded to 20 digits (``UtilAll.offset2FileName``).

Owns: :func:`offset_to_file_name`, :func:`parse_file_name`, :func:`infer_mapped_file_size` (a directory's mapped
file size from its files, for readers that are not given it), :func:`list_mapped_files` (a directory's store files
by their names: the one function here that reads the disk, a directory listing, for the readers that are no engine).
Format: exactly 20 ASCII digits, e.g. ``00000000001073741824``.
Invariants:
  1. A name that is not exactly 20 ASCII digits is not a store file; loaders ignore it.
Thread-safety: pure functions (``list_mapped_files``: no state of its own).
"""

from __future__ import annotations

import os
from itertools import pairwise

FILE_NAME_LEN = 20


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


def parse_file_name(name: str) -> int | None:
    if len(name) != FILE_NAME_LEN or not (name.isascii() and name.isdigit()):
        return None
    return int(name)


def list_mapped_files(d: str) -> list[tuple[int, str]]:
    """The numbered store files of ``d`` as ``(start, path)``, sorted by start (empty when ``d`` is missing)."""
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for n in names:
        start = parse_file_name(n)
        if start is not None:
            out.append((start, os.path.join(d, n)))
    out.sort()
    return out


def infer_mapped_file_size(files: list[tuple[int, int]]) -> int | None:
    """The mapped file size of one directory of store files, from ``(start, length on disk)`` pairs sorted by start:
    the smallest gap between consecutive names (files roll at exactly the file size and only the oldest are deleted),
    else the one file's length. None when nothing tells (no file, or one file of length 0: being created)."""
    gaps = [b[0] - a[0] for a, b in pairwise(files) if b[0] > a[0]]
    if gaps:
        return min(gaps)
    longest = max((length for _start, length in files), default=0)
    return longest if longest > 0 else None
