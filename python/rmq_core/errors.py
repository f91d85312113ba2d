"""Exceptions raised by rmq_core. The Rust bindings import these classes, so one definition serves both backends."""

from __future__ import annotations


class RmqError(Exception):
    """Base class of every rmq_core error."""


class AclConfigError(RmqError):
    """Access control the broker's configuration asks for that cannot be enforced as written (a missing or invalid
    plain_acl.yml, PyYAML missing, RocketMQ 5 auth keys): the broker does not start."""


class StoreError(RmqError):
    """The message store failed: I/O, a held lock, a closed store, an unreadable layout."""


class IllegalTopicError(StoreError, ValueError):
    """A topic name RocketMQ would refuse: empty, longer than 127 characters, or outside [A-Za-z0-9%|_-]."""


class CorruptRecordError(StoreError):
    """Bytes that should be a CommitLog record are not one. ``offset`` is where the bad record starts."""

    def __init__(self, message: str, offset: int = -1) -> None:
        super().__init__(message)
        self.offset = offset
