"""The bounds on what one request may make a server do, in one place (issue 28's hostile-client limits).

Apache RocketMQ 4.9.7 bounds a request only by its frame (``MAX_FRAME_LENGTH``, 16 MiB); rmq_core adds, per body
type, a size far below that, chosen from real use with a wide margin, so one request cannot hold the event loop
for seconds; the inflated size of a compressed body; and how much text the fastjson bare-key fallback scans.
A body over its limit is answered SYSTEM_ERROR with the sizes in the remark; nothing is registered or changed.

- HEART_BEAT: a Java client's ``HeartbeatData`` is one ``ConsumerData`` per consumer group of the client instance,
  with one ``SubscriptionData`` (~250 bytes of JSON: topic, expression, tags and their hash codes) per subscribed
  topic: 4 MiB holds ~15,000 subscriptions, several times the largest real instances.
- LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: one ``MessageQueue`` (~70 bytes) per queue an orderly consumer holds on that
  broker: 2 MiB holds ~30,000 queues.
- CHECK_CLIENT_CONFIG: one ``SubscriptionData`` (a SQL92 expression at most a few KiB): 1 MiB.
- UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: one ``SubscriptionGroupConfig`` (~300 bytes): 1 MiB.
- REGISTER_BROKER keeps the frame limit (a broker's whole topic table: ~200 bytes a topic, 80,000 topics fill a
  frame); its compressed form inflates to at most ``INFLATED_BODY_MAX``, the frame limit, as the uncompressed body
  must fit a frame too.

Thread-safety: constants only.
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
