"""PermName (cm/constant/PermName.java): topic and broker permission bits."""

from __future__ import annotations

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
DEFAULT_PERM = PERM_READ | PERM_WRITE


def is_readable(perm: int) -> bool:
    return (perm & PERM_READ) == PERM_READ


def is_writeable(perm: int) -> bool:
    return (perm & PERM_WRITE) == PERM_WRITE


def is_inherited(perm: int) -> bool:
    return (perm & PERM_INHERIT) == PERM_INHERIT


def perm_to_string(perm: int) -> str:
    return (
        ("R" if is_readable(perm) else "-")
        + ("W" if is_writeable(perm) else "-")
        + ("X" if is_inherited(perm) else "-")
    )
