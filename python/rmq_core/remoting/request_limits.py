"""The bounds on what one request may make a server do, in one place (issue 28's hostile-client limits).

Owns, per body type, a size far below the 16 MiB frame (HEART_BEAT 4 MiB, LOCK/UNLOCK_BATCH_MQ 2 MiB,
CHECK_CLIENT_CONFIG and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 1 MiB; REGISTER_BROKER keeps the frame limit), the
inflated size of a compressed body (``INFLATED_BODY_MAX``) and how much text the fastjson bare-key fallback scans.
Invariant: a body over its limit is answered SYSTEM_ERROR with the sizes in the remark; nothing is registered or
changed.
Thread-safety: constants only.
Details (why each size): docs/BROKER_DESIGN.md, 'Request body limits'.
"""

from __future__ import annotations

from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import MAX_FRAME_LENGTH

KIB = 1024
MIB = 1024 * KIB

# body bytes per request code (codes not listed: the frame limit)
REQUEST_BODY_LIMITS: dict[int, int] = {
    int(RequestCode.HEART_BEAT): 4 * MIB,
    int(RequestCode.LOCK_BATCH_MQ): 2 * MIB,
    int(RequestCode.UNLOCK_BATCH_MQ): 2 * MIB,
    int(RequestCode.CHECK_CLIENT_CONFIG): 1 * MIB,
    int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP): 1 * MIB,
}

# the most a compressed request body may inflate to (REGISTER_BROKER's zlib form)
INFLATED_BODY_MAX = MAX_FRAME_LENGTH

# the most characters of a request body (or a client's answer the broker reads) the fastjson bare-key fallback
# and its field scanner take: bodies Java clients send are standard JSON and never need it
FASTJSON_FALLBACK_MAX = 1 * MIB


def body_over_limit(code: int, body: bytes | None) -> str | None:
    """Why ``body`` is too large for a request of ``code`` (the remark of the refusal), or None."""
    limit = REQUEST_BODY_LIMITS.get(code)
    if limit is None or body is None or len(body) <= limit:
        return None
    return f"the request body of {len(body)} bytes is over the {limit}-byte limit for request code {code}"
