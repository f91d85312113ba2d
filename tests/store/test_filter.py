"""Filtering (4.9 FilterAPI.buildSubscriptionData; the tagsCode of a ConsumeQueue unit): SubscriptionData from tag expressions and
selectors, the broker-side hash match and the client-side re-filter, tags_hash against values computed here from
Java's String.hashCode (UTF-16 code units, int32 wrap).
"""

from __future__ import annotations

import pytest

from rmq_core import _backend
from rmq_core.filter import ExpressionType, MessageSelector, SubscriptionData, build_subscription_data
from rmq_core.message import tags_hash

from support import spec_parser as sp

KNOWN = [
    ("TagA", 2598919),
    ("TagB", 2598920),
    ("", 0),
    ("*", 42),
    ("hello", 99162322),
    ("polygenelubricants", -2147483648),
    ("日本", 835047),
    ("😀", 1772899),
]


def test_known_values_agree_with_the_reference_algorithm():
    for s, v in KNOWN:
        assert sp.java_string_hash(s) == v


@pytest.mark.parametrize("name", ["rust", "python"])
@pytest.mark.both_backends
def test_tags_hash_known_values(name):
    impl = _backend.load(name)
    for s, v in KNOWN:
        assert impl.tags_hash(s) == v, s
    long = "TagWithAVeryLongName-" * 50
    assert impl.tags_hash(long) == sp.java_string_hash(long)
    assert -(2**31) <= impl.tags_hash(long) < 2**31


def test_facade_tags_hash():
    for s, v in KNOWN:
        assert tags_hash(s) == v


@pytest.mark.parametrize("expr", [None, "", "   ", "*", " * ", "||", " || "])
def test_select_all(expr):
    sub = build_subscription_data("T", expr)
    assert sub.sub_string == "*"
    assert sub.tags_set == set() and sub.code_set == set()
    assert sub.selects_all
    assert sub.expression_type == ExpressionType.TAG
    assert sub.is_matched_by_tags_code(12345) and sub.is_matched_by_tags_code(None)
    assert sub.is_matched_by_tag(None) and sub.is_matched_by_tag("anything")


def test_tag_expression_split_trim_and_codes():
    sub = build_subscription_data("T", " TagA ||  || TagB||标签 ")
    assert sub.tags_set == {"TagA", "TagB", "标签"}
    assert sub.code_set == {2598919, 2598920, sp.java_string_hash("标签")}
    assert sub.sub_string == " TagA ||  || TagB||标签 "
    assert not sub.selects_all
    assert sub.is_matched_by_tags_code(2598919)
    assert not sub.is_matched_by_tags_code(2598921)
    assert sub.is_matched_by_tags_code(None)  # ExpressionMessageFilter: a null tagsCode matches
    assert sub.is_matched_by_tag("TagA") and not sub.is_matched_by_tag("TagC")
    assert not sub.is_matched_by_tag(None)  # the client drops messages without tags


def test_sign_extended_code_matches_as_int32():
    sub = build_subscription_data("T", "polygenelubricants")
    assert sub.code_set == {-2147483648}
    assert sub.is_matched_by_tags_code(-2147483648)
    assert sub.is_matched_by_tags_code(0x80000000)  # the same 32 bits seen as an unsigned long
    assert not sub.is_matched_by_tags_code(2147483647)


def test_selectors():
    assert MessageSelector.by_tag(None).selects_all
    assert MessageSelector.by_tag(" * ").selects_all
    assert MessageSelector.by_tag("").expression == "*"
    sel = MessageSelector.by_tag(" TagA || TagB ")
    assert sel.expression == "TagA || TagB" and not sel.selects_all
    sub = build_subscription_data("T", sel)
    assert sub.tags_set == {"TagA", "TagB"}
    sql = MessageSelector.by_sql("a > 5 AND b = 'x'")
    sub = build_subscription_data("T", sql)
    assert sub.expression_type == ExpressionType.SQL92
    assert sub.sub_string == "a > 5 AND b = 'x'"
    assert not sub.selects_all
    with pytest.raises(ValueError):
        MessageSelector.by_sql("  ")


def test_json_dict_uses_rocketmq_names():
    sub = build_subscription_data("T", "TagB || TagA")
    d = sub.to_json_dict()
    assert d["topic"] == "T" and d["subString"] == "TagB || TagA"
    assert d["tagsSet"] == ["TagA", "TagB"] and d["codeSet"] == [2598919, 2598920]
    assert d["expressionType"] == "TAG" and d["classFilterMode"] is False
    assert isinstance(d["subVersion"], int)
    assert isinstance(SubscriptionData("T").sub_version, int)
