"""rmq_core: a RocketMQ core for Python with a Rust hot path.

Import from the submodules (``rmq_core.store``, ``rmq_core.message``, ``rmq_core.filter``); the native module
``rmq_core._core`` is private.
"""

from rmq_core._backend import backend
from rmq_core.message import Message, MessageExt, MessageQueue, decode_messages, tags_hash

__version__ = "0.1.0"
__all__ = ["Message", "MessageExt", "MessageQueue", "__version__", "backend", "decode_messages", "tags_hash"]
