"""``clip``: client-supplied text as it goes into a log line, cut to ``LOGGED_TEXT_MAX`` characters with its full
length said (a PUT_KV_CONFIG value, a topic name a broker registered, a remark, a subscription expression, a decode
error quoting its input: logging them whole let one client fill the disk with the log).

Thread-safety: pure function.
"""

from __future__ import annotations

LOGGED_TEXT_MAX = 256  # characters of one client-supplied value in a log line


def clip(value: object, limit: int = LOGGED_TEXT_MAX) -> str:
    """``str(value)``, cut to ``limit`` characters plus a note of its length when longer."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text)} chars)"
