"""SQL92 selectors (rmq_core.filter.sql92) against RocketMQ's SQL92 filter rules: precedence, literals,
three-valued logic, type conversion, and parse errors."""

from __future__ import annotations

import pytest

from rmq_core.filter import FilterParseError, MessageSelector, Sql92Filter

PROPS = {"a": "10", "b": "x", "c": "3.5", "flag": "true", "q": "it's"}


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("a > 5 AND b = 'x'", True),
        ("a > 50 OR b = 'y'", False),
        ("a = 10", True),
        ("a <> 10", False),
        ("a = 10L", True),
        ("c >= 3.5", True),
        ("c < .5E1", True),
        ("a >= 10 AND a <= 10", True),
        ("a BETWEEN 1 AND 10", True),
        ("a NOT BETWEEN 1 AND 10", False),
        ("a NOT BETWEEN 11 AND 20", True),
        ("b IN ('x', 'y')", True),
        ("b NOT IN ('x')", False),
        ("b CONTAINS 'x'", True),
        ("b NOT CONTAINS 'x'", False),
        ("b STARTSWITH 'x' AND b ENDSWITH 'x'", True),
        ("q = 'it''s'", True),
        ("missing IS NULL", True),
        ("a IS NOT NULL", True),
        ("a IS NULL", False),
        ("flag = TRUE", True),
        ("TRUE", True),
        ("FALSE OR a > 1", True),
        ("a > -1", True),
        ("-a < 0", False),  # unary minus of a string is NULL (UnaryExpression.createNegate)
        ("NOT (a > 50)", True),
        # OR < AND precedence: TRUE OR (FALSE AND FALSE)
        ("a = 10 OR a = 1 AND b = 'z'", True),
        ("(a = 10 OR a = 1) AND b = 'z'", False),
        ("a > 5 /* block */ AND b = 'x' -- trailing comment", True),
        ("A > 5 and B = 'x'", False),  # identifiers are case-sensitive: A and B are missing
        ("a > 5 and b = 'x'", True),  # keywords are not
    ],
)
def test_evaluates(expr, expected):
    assert Sql92Filter(expr)(PROPS) is expected


@pytest.mark.parametrize(
    "expr",
    [
        "missing = 1",  # NULL = 1 is NULL: no match either way
        "missing <> 1",
        "NOT (missing = 1)",  # NOT NULL is NULL
        "missing > 1 OR FALSE",
        "missing IN ('a')",
        "missing BETWEEN 1 AND 2",
    ],
)
def test_null_propagates_to_no_match(expr):
    f = Sql92Filter(expr)
    assert f.evaluate(PROPS) is None
    assert f(PROPS) is False


def test_and_is_false_dominant_or_true_dominant_over_null():
    assert Sql92Filter("missing = 1 AND a = 1").evaluate(PROPS) is False
    assert Sql92Filter("missing = 1 OR a = 10").evaluate(PROPS) is True


@pytest.mark.parametrize("expr", ["b > 1", "b = 5", "b BETWEEN 1 AND 2"])
def test_conversion_failure_is_no_match(expr):
    # 'x' is not a number: an evaluation error, which never matches
    assert Sql92Filter(expr)(PROPS) is False


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "   ",
        "a >",
        "a IN (1)",
        "'x' IN ('x')",
        "a BETWEEN 5 AND 1",
        "a = ?",
        "(a = 1",
        "a = 1)",
        "a NOT 5",
        "IS NULL",
        "a",
        "NOT a > 50",
        "a AND b = 'x'",
    ],
)
def test_parse_errors(expr):
    with pytest.raises(FilterParseError):
        Sql92Filter(expr)


def test_message_selector_by_sql_is_used_by_the_store(tmp_path):
    from rmq_core.message import Message
    from rmq_core.store import GetMessageStatus, MessageStore, StoreConfig

    with MessageStore(tmp_path / "s", StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        for i in range(20):
            store.put_message(Message("T", b"m%d" % i, tags="A", properties={"n": str(i)}), 0)
        r = store.get_message("g", "T", 0, 0, 32, MessageSelector.by_sql("n >= 15"))
        assert r.status == GetMessageStatus.FOUND
        assert [m.properties["n"] for m in r.decode()] == ["15", "16", "17", "18", "19"]
        assert r.next_begin_offset == 20
        none = store.get_message("g", "T", 0, 0, 32, MessageSelector.by_sql("n > 100"))
        assert none.status == GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 20


@pytest.mark.parametrize("expr", ["a = 3.5L", "a = 1e3L", "a > " + "9" * 5000, "a = 12L3"])
def test_malformed_numeric_literals_are_parse_errors(expr):
    """Found by fuzz/sql92: a float with a long suffix and a literal too long for int() escaped as a bare ValueError."""
    with pytest.raises(FilterParseError):
        Sql92Filter(expr)


@pytest.mark.parametrize(
    "expr",
    [
        "(" * 2000 + "a > 1" + ")" * 2000,
        "NOT " * 5000 + "a > 1",
        " AND ".join(["a > 1"] * 3000),
        "a > " + "- " * 3000 + "b",
    ],
)
def test_hostile_nesting_and_length_are_refused_not_a_crash(expr):
    """Found by fuzz/sql92: deep nesting exhausted the interpreter's stack (RecursionError) while parsing, and a long
    operator chain would while evaluating; both are refused at compile time with a FilterParseError."""
    with pytest.raises(FilterParseError, match=r"nested more than|more than .* operators"):
        Sql92Filter(expr)


def test_selectors_within_the_limits_still_compile_and_evaluate():
    deep = "(" * 40 + "a > 1" + ")" * 40
    long = " OR ".join([f"a = {i}" for i in range(200)])
    assert Sql92Filter(deep)({"a": "2"}) is True
    assert Sql92Filter(long)({"a": "150"}) is True
