"""PullSysFlag (cm/sysflag/PullSysFlag.java) and TopicSysFlag (cm/sysflag/TopicSysFlag.java)."""

from __future__ import annotations

# PullSysFlag
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL_MESSAGE = 0x10


def build_pull_sys_flag(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False) -> int:
    return (
        (FLAG_COMMIT_OFFSET if commit_offset else 0)
        | (FLAG_SUSPEND if suspend else 0)
        | (FLAG_SUBSCRIPTION if subscription else 0)
        | (FLAG_CLASS_FILTER if class_filter else 0)
    )


def clear_commit_offset_flag(sys_flag: int) -> int:
    return sys_flag & ~FLAG_COMMIT_OFFSET


def has_commit_offset_flag(sys_flag: int) -> bool:
    return bool(sys_flag & FLAG_COMMIT_OFFSET)


def has_suspend_flag(sys_flag: int) -> bool:
    return bool(sys_flag & FLAG_SUSPEND)


def has_subscription_flag(sys_flag: int) -> bool:
    return bool(sys_flag & FLAG_SUBSCRIPTION)


def has_class_filter_flag(sys_flag: int) -> bool:
    return bool(sys_flag & FLAG_CLASS_FILTER)


# TopicSysFlag
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


def build_topic_sys_flag(unit: bool, has_unit_sub: bool) -> int:
    return (FLAG_UNIT if unit else 0) | (FLAG_UNIT_SUB if has_unit_sub else 0)
