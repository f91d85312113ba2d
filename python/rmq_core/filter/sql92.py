"""SQL92 message selectors as RocketMQ's filter module evaluates them on message properties.

Owns the parser of RocketMQ's grammar (``SelectorParser.jj``: OR/AND, comparisons, BETWEEN, IN, IS NULL, CONTAINS,
STARTSWITH, ENDSWITH; case-insensitive keywords) and the evaluation (``Sql92Filter``). Semantics:
1. Property values are strings; a missing property is NULL. Logic is three-valued: AND is false-dominant, OR
   true-dominant, NOT NULL is NULL; only a final TRUE matches.
2. A string compared with a number is converted to the number's type; a failed conversion is an evaluation error,
   and an evaluation error means "no match". ``<``/``>``/``<=``/``>=`` need numbers (two strings are parsed as floats).
3. ``IN`` needs a property on the left and string literals; a NULL or non-string left side gives NULL.
Thread-safety: a compiled ``Sql92Filter`` is immutable and may be shared.
Details (the grammar): docs/BROKER_DESIGN.md, 'SQL92 selectors'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Props = Mapping[str, str]
Node = Callable[[Props], Any]


class FilterParseError(ValueError):
    """The expression is not valid SQL92 as RocketMQ accepts it (the broker answers SUBSCRIPTION_PARSE_FAILED)."""


class _EvalError(Exception):
    pass


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<str>'(?:[^']|'')*')
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[lL]?)
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|=|>|<|\(|\)|,|\+|-)
    """,
    re.VERBOSE | re.DOTALL,
)
_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH"}


@dataclass(frozen=True)
class _Tok:
    kind: str  # "str", "num", "id", "kw", "op", "end"
    text: str
    value: Any = None
    pos: int = 0


def _tokenize(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m:
            raise FilterParseError(f"unexpected character {src[pos]!r} at position {pos} in {src!r}")
        kind = m.lastgroup
        text = m.group()
        if kind == "str":
            toks.append(_Tok("str", text, text[1:-1].replace("''", "'"), pos))
        elif kind == "num":
            toks.append(_Tok("num", text, _number(text), pos))
        elif kind == "id":
            up = text.upper()
            toks.append(_Tok("kw", up, None, pos) if up in _KEYWORDS else _Tok("id", text, text, pos))
        elif kind == "op":
            toks.append(_Tok("op", text, None, pos))
        pos = m.end()
    toks.append(_Tok("end", "", None, pos))
    return toks


def _number(text: str) -> int | float:
    """A numeric literal's value. A ``L`` suffix only follows an integer (Java's DECIMAL_LITERAL); integers are Java
    longs; anything else that does not convert is a FilterParseError (never a bare ValueError)."""
    try:
        if text[-1] in "lL":
            if not text[:-1].lstrip("+-").isdigit():
                raise FilterParseError(f"malformed long literal: {text}")
            v = int(text[:-1])
        elif any(c in text for c in ".eE"):
            return float(text)
        else:
            v = int(text)
    except ValueError as e:  # e.g. more digits than int() converts
        raise FilterParseError(f"malformed numeric literal {text[:40]!r}: {e}") from None
    if not -(1 << 63) <= v < (1 << 63):
        raise FilterParseError(f"integer literal out of long range: {text}")
    return v
    if any(c in text for c in ".eE"):
        return float(text)
    v = int(text)
    if not -(1 << 63) <= v < (1 << 63):
        raise FilterParseError(f"integer literal out of long range: {text}")
    return v


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _coerce_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Make two non-null values comparable the way ComparisonExpression does; raise _EvalError if impossible."""
    if type(a) is type(b) or (_is_num(a) and _is_num(b)):
        return a, b
    if isinstance(a, str) and _is_num(b):
        return _to_num(a, b), b
    if _is_num(a) and isinstance(b, str):
        return a, _to_num(b, a)
    if isinstance(a, str) and isinstance(b, bool):
        return _to_bool(a), b
    if isinstance(a, bool) and isinstance(b, str):
        return a, _to_bool(b)
    raise _EvalError(f"cannot compare {type(a).__name__} with {type(b).__name__}")


def _to_num(s: str, like: Any) -> int | float:
    try:
        return int(s.strip()) if isinstance(like, int) else float(s.strip())
    except ValueError:
        raise _EvalError(f"{s!r} is not a number") from None


def _to_bool(s: str) -> bool:
    low = s.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise _EvalError(f"{s!r} is not a boolean")


def _equal(a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    a, b = _coerce_pair(a, b)
    return a == b


def _order(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    if isinstance(a, str) and isinstance(b, str):
        a, b = _to_num(a, 0.0), _to_num(b, 0.0)
    elif isinstance(a, bool) or isinstance(b, bool):
        raise _EvalError("booleans cannot be ordered")
    else:
        a, b = _coerce_pair(a, b)
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    if op == "<":
        return a < b
    return a <= b


def _and(a: Any, b: Any) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return bool(a) and bool(b)


def _or(a: Any, b: Any) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not(a: Any) -> bool | None:
    if a is None:
        return None
    if not isinstance(a, bool):
        raise _EvalError("NOT needs a boolean")
    return not a


#: Limits that keep a hostile selector from exhausting the interpreter's stack (a parse descends a few frames per
#: nesting level; a compiled selector evaluates one frame per operator on its longest path). Real selectors are far
#: smaller; past a limit the selector is refused with a FilterParseError (found by fuzz/sql92).
MAX_NESTING = 64
MAX_OPERATORS = 512


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.toks = _tokenize(src)
        self.i = 0
        self.nesting = 0
        self.operators = 0
        self.booleans: set[int] = set()  # ids of nodes that yield booleans (asBooleanExpression)
        self.keep: list[Node] = []  # keeps every node alive so ids stay unique while parsing

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, kind: str, text: str | None = None) -> _Tok | None:
        t = self.peek()
        if t.kind == kind and (text is None or t.text == text):
            self.i += 1
            return t
        return None

    def expect(self, kind: str, text: str | None = None) -> _Tok:
        t = self.accept(kind, text)
        if t is None:
            got = self.peek()
            raise FilterParseError(
                f"expected {text or kind} at position {got.pos} in {self.src!r}, found {got.text or 'end of input'!r}"
            )
        return t

    def nest(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise FilterParseError(f"selector nested more than {MAX_NESTING} deep: {self.src[:80]!r}")

    def operator(self) -> None:
        self.operators += 1
        if self.operators > MAX_OPERATORS:
            raise FilterParseError(f"selector has more than {MAX_OPERATORS} operators: {self.src[:80]!r}")

    def boolean(self, node: Node) -> Node:
        self.operator()
        self.keep.append(node)
        self.booleans.add(id(node))
        return node

    def need_boolean(self, node: Node, where: str) -> Node:
        if id(node) not in self.booleans:
            raise FilterParseError(f"{where} needs a boolean expression in {self.src!r}")
        return node

    def parse(self) -> Node:
        node = self.need_boolean(self.or_expr(), "a selector")
        if self.peek().kind != "end":
            t = self.peek()
            raise FilterParseError(f"unexpected {t.text!r} at position {t.pos} in {self.src!r}")
        return node

    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.accept("kw", "OR"):
            self.need_boolean(left, "OR")
            right = self.need_boolean(self.and_expr(), "OR")
            left = self.boolean((lambda l, r: lambda p: _or(l(p), r(p)))(left, right))
        return left

    def and_expr(self) -> Node:
        left = self.equality()
        while self.accept("kw", "AND"):
            self.need_boolean(left, "AND")
            right = self.need_boolean(self.equality(), "AND")
            left = self.boolean((lambda l, r: lambda p: _and(l(p), r(p)))(left, right))
        return left

    def equality(self) -> Node:
        left = self.comparison()
        while True:
            if self.accept("op", "="):
                right = self.comparison()
                left = self.boolean((lambda l, r: lambda p: _equal(l(p), r(p)))(left, right))
            elif self.accept("op", "<>"):
                right = self.comparison()
                left = self.boolean((lambda l, r: lambda p: _not(_equal(l(p), r(p))))(left, right))
            elif self.accept("kw", "IS"):
                negate = bool(self.accept("kw", "NOT"))
                self.expect("kw", "NULL")
                left = self.boolean((lambda l, n: lambda p: (l(p) is None) != n)(left, negate))
            else:
                return left

    def comparison(self) -> Node:
        left_tok = self.peek()
        left = self.unary()
        while True:
            t = self.peek()
            if t.kind == "op" and t.text in (">", ">=", "<", "<="):
                self.take()
                right = self.unary()
                left = self.boolean((lambda op, l, r: lambda p: _order(op, l(p), r(p)))(t.text, left, right))
                continue
            negate = False
            if (
                t.kind == "kw"
                and t.text == "NOT"
                and self.peek(1).kind == "kw"
                and self.peek(1).text in ("BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH")
            ):
                self.take()
                negate = True
                t = self.peek()
            if self.accept("kw", "BETWEEN"):
                lo_tok = self.peek()
                lo = self.unary()
                self.expect("kw", "AND")
                hi_tok = self.peek()
                hi = self.unary()
                if lo_tok.kind == hi_tok.kind == "num" and lo_tok.value > hi_tok.value:
                    raise FilterParseError(
                        f"BETWEEN {lo_tok.text} AND {hi_tok.text}: the low bound is above the high one"
                    )
                if negate:
                    left = (lambda x, a, b: lambda p: _or(_order("<", x(p), a(p)), _order(">", x(p), b(p))))(
                        left, lo, hi
                    )
                else:
                    left = (lambda x, a, b: lambda p: _and(_order(">=", x(p), a(p)), _order("<=", x(p), b(p))))(
                        left, lo, hi
                    )
                self.boolean(left)
                continue
            if self.accept("kw", "IN"):
                if left_tok.kind != "id":
                    raise FilterParseError(
                        f"IN needs a property on its left at position {left_tok.pos} in {self.src!r}"
                    )
                self.expect("op", "(")
                values = [self.expect("str").value]
                while self.accept("op", ","):
                    values.append(self.expect("str").value)
                self.expect("op", ")")
                left = self.boolean((lambda x, vs, n: lambda p: _in(x(p), vs, n))(left, frozenset(values), negate))
                continue
            for kw, fn in (("CONTAINS", str.__contains__), ("STARTSWITH", str.startswith), ("ENDSWITH", str.endswith)):
                if self.accept("kw", kw):
                    arg = self.expect("str").value
                    left = self.boolean((lambda x, f, a, n: lambda p: _str_op(x(p), f, a, n))(left, fn, arg, negate))
                    break
            else:
                if negate:
                    raise FilterParseError("NOT must be followed by BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH here")
                return left

    def unary(self) -> Node:
        if self.accept("op", "+"):
            self.nest()
            self.operator()
            inner = self.unary()
            self.nesting -= 1
            return lambda p: _numeric(inner(p))
        if self.accept("op", "-"):
            if self.peek().kind == "num":
                return _constant(-self.take().value)
            self.nest()
            self.operator()
            inner = self.unary()
            self.nesting -= 1
            return lambda p: _negate(inner(p))
        if self.accept("kw", "NOT"):
            self.nest()
            inner = self.need_boolean(self.unary(), "NOT")
            self.nesting -= 1
            return self.boolean(lambda p: _not(inner(p)))
        return self.primary()

    def primary(self) -> Node:
        t = self.take()
        if t.kind in ("str", "num"):
            return _constant(t.value)
        if t.kind == "kw" and t.text in ("TRUE", "FALSE"):
            return self.boolean(_constant(t.text == "TRUE"))
        if t.kind == "kw" and t.text == "NULL":
            return _constant(None)
        if t.kind == "id":
            return _property(t.value)
        if t.kind == "op" and t.text == "(":
            self.nest()
            node = self.or_expr()
            self.expect("op", ")")
            self.nesting -= 1
            return node  # keeps its boolean-ness
        raise FilterParseError(f"unexpected {t.text or 'end of input'!r} at position {t.pos} in {self.src!r}")


def _numeric(v: Any) -> Any:
    if v is None or _is_num(v):
        return v
    raise _EvalError("unary + needs a number")


def _negate(v: Any) -> Any:
    if v is None:
        return None
    return -v if _is_num(v) else None


def _in(v: Any, values: frozenset[str], negate: bool) -> bool | None:
    if not isinstance(v, str):
        return None
    return (v in values) != negate


def _str_op(v: Any, fn: Callable[[str, str], bool], arg: str, negate: bool) -> bool | None:
    if not isinstance(v, str):
        return None
    return fn(v, arg) != negate


def _constant(value: Any) -> Node:
    def node(p: Mapping[str, str]) -> Any:
        return value

    return node


def _property(name: Any) -> Node:
    def node(p: Mapping[str, str]) -> Any:
        return p.get(name)

    return node


class Sql92Filter:
    """A compiled selector: ``Sql92Filter("a > 5 AND b = 'x'")(properties) -> bool``."""

    __slots__ = ("_root", "expression")

    def __init__(self, expression: str) -> None:
        if not expression or not expression.strip():
            raise FilterParseError("an SQL92 selector needs an expression")
        self.expression = expression
        self._root = _Parser(expression).parse()

    def evaluate(self, properties: Props) -> bool | None:
        """The three-valued result (None = NULL); raises nothing: an evaluation error is reported as None."""
        try:
            v = self._root(properties)
        except _EvalError:
            return None
        return v if isinstance(v, bool) or v is None else None

    def __call__(self, properties: Props) -> bool:
        return self.evaluate(properties) is True

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


def compile_sql92(expression: str) -> Sql92Filter:
    return Sql92Filter(expression)
