"""MQVersion (cm/MQVersion.java): the ordinal of RocketMQ's ``Version`` enum that clients and servers put in every
command's ``version`` field, and its name (``getVersionDesc``: 407 → ``"V4_9_7"``).

From ``V4_0_0_SNAPSHOT`` (ordinal 212) the enum is regular: for each major 4..5, minor 0..9, patch 0..9 a
``…_SNAPSHOT`` then the release; ordinals past ``V5_9_9`` (611) name ``HIGHER_VERSION``, as getVersionDesc clamps.
The 3.x names before 212 are irregular and not listed here (``version_desc`` answers ``"V3_x(<ordinal>)"``).

Pure functions.
"""

from __future__ import annotations

V4_0_0_SNAPSHOT = 212
HIGHER_VERSION = 612


def version_desc(ordinal: int) -> str:
    if ordinal >= HIGHER_VERSION:
        return "HIGHER_VERSION"
    if ordinal < V4_0_0_SNAPSHOT:
        return f"V3_x({ordinal})"
    k = ordinal - V4_0_0_SNAPSHOT
    name = f"V{4 + k // 200}_{(k % 200) // 20}_{(k % 20) // 2}"
    return name + "_SNAPSHOT" if k % 2 == 0 else name


def version_ordinal(desc: str) -> int:
    """The ordinal of ``"V4_9_7"`` / ``"V4_9_8_SNAPSHOT"`` (4.x and 5.x names only)."""
    parts = desc.removeprefix("V").split("_")
    major, minor, patch = (int(p) for p in parts[:3])
    snapshot = len(parts) > 3 and parts[3] == "SNAPSHOT"
    if not 4 <= major <= 5:
        raise ValueError(f"{desc}: only 4.x and 5.x versions are known")
    return V4_0_0_SNAPSHOT + (major - 4) * 200 + minor * 20 + patch * 2 + (0 if snapshot else 1)


V3_0_7_SNAPSHOT = 28  # clients from here on take RESET_CONSUMER_CLIENT_OFFSET / GET_CONSUMER_STATUS_FROM_CLIENT
V3_1_8_SNAPSHOT = 62  # clients from here on answer GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY
