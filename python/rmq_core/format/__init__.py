"""The format layer: byte layouts and file names; every magic number of the store lives in this package.

Mirrors ``rust/rmq-store/src/format/`` module for module (``message``, ``batch``, ``columns``, ``cq_unit``,
``file_name``, ``gather``, ``index``, ``send_request``; ``remoting.rs``'s frames are ``rmq_core.remoting.command``'s);
``timer`` (5.x's timer files) is Python only. Public to the package: the store facade, the broker, the CLI and the
pure-Python engine twin (``_reference``) read the layouts here. Owns the checkpoint layout and the store's directory
and file name constants below.
Format: all integers big-endian (Java ByteBuffer).
Invariants: constants mirror RocketMQ 4.9 (``CommitLog``, ``MessageDecoder``, ``ConsumeQueue``, ``StoreCheckpoint``).
Thread-safety: pure functions and constants.
"""

# <root>/checkpoint is this many bytes (RocketMQ maps one OS page); i64 BE fields at these offsets.
CHECKPOINT_FILE_SIZE = 4096
CHECKPOINT_PHYSIC_MSG_TIMESTAMP = 0
CHECKPOINT_LOGICS_MSG_TIMESTAMP = 8
CHECKPOINT_INDEX_MSG_TIMESTAMP = 16  # see checkpoint.py
CHECKPOINT_MASTER_FLUSHED_OFFSET = 24  # always 0: no HA
CHECKPOINT_CONFIRM_PHY_OFFSET = 32
CHECKPOINT_USED_BYTES = 40

COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
# exists while a store is open (4.9: empty, only its existence is read); rmq_core writes the machine's boot id in it,
# so a reopen after a process crash within the same boot knows the mapped files are as the process left them
ABORT_FILE = "abort"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def decode_abort_boot_id(data: bytes) -> str | None:
    """The boot id an abort file's bytes name (None: empty, or not a boot id)."""
    try:
        s = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    ok = len(s) == 36 and all(c in "0123456789abcdefABCDEF-" for c in s)
    return s if ok else None


LOCK_FILE = "lock"

# RocketMQ's normal recovery scans this many CommitLog files from the end.
RECOVER_NORMAL_FILE_COUNT = 3
# Async flush wake-ups flush the CommitLog only when this many OS pages are dirty (flushPhysicQueueLeastPages).
FLUSH_LEAST_PAGES = 4
# The flush thread's tick msyncs a ConsumeQueue only when this many OS pages of it are dirty
# (flushConsumeQueueLeastPages), except every FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS, when it msyncs all of them
# (flushConsumeQueueThoroughInterval); explicit flushes and close msync all of them.
FLUSH_CONSUME_QUEUE_LEAST_PAGES = 2
FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS = 60_000
OS_PAGE_SIZE = 4096
