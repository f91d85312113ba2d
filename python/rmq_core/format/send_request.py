"""The pure-Python twin of ``rust/rmq-store/src/format/send_request.rs``: a plain send's header fields and the
properties it stores. The names it works with are the caller's (see the Rust module's header).

Invariants (the Rust module's): ``parse_decimal`` accepts only ``-?[0-9]+`` in range; ``rewrite_plain_properties``
returns what the general send path stores for the same text (4.9.7's: the map's names in Java ``HashMap`` order,
WAIT removed, no ``\x02`` after the last), or None where that path decides otherwise (a duplicate name, a name of
the ``general`` set, ``wait`` = "false", more than 16 entries, a bin Java would treeify, no ``uniq_key`` unless the
store may assign it).

Thread-safety: pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, iter_properties, java_hash_map_order

_DECIMAL = re.compile(r"-?[0-9]{1,18}", re.ASCII)
_LIMITS = {32: (-(2**31), 2**31 - 1), 64: (-(2**63), 2**63 - 1)}
MAX_PLAIN_PROPERTIES = 16


def parse_decimal(text: str, bits: int) -> int | None:
    """``-?[0-9]+`` that fits a signed ``bits``-bit integer, else None."""
    if _DECIMAL.fullmatch(text) is None:
        return None
    v = int(text)
    lo, hi = _LIMITS[bits]
    return v if lo <= v <= hi else None


def parse_java_bool(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text)


@dataclass(frozen=True)
class PlainPropertyRules:
    general: tuple[str, ...]
    wait: str
    cluster: str
    uniq_key: str


def rewrite_plain_properties(
    text: str, rules: PlainPropertyRules, cluster_name: str, assign_uniq: bool
) -> tuple[str, bool] | None:
    """What the general path stores for ``text`` (see the module header) and whether ``uniq_key`` is missing (left
    to the store when ``assign_uniq``), or None."""
    entries: list[tuple[str, str]] = []
    for k, v in iter_properties(text):
        if len(entries) == MAX_PLAIN_PROPERTIES or any(k == ek for ek, _ in entries):
            return None
        entries.append((k, v))
    if any(k in rules.general or (k == rules.wait and v == "false") for k, v in entries):
        return None
    has_uniq = any(k == rules.uniq_key for k, _ in entries)
    if not has_uniq and not assign_uniq:
        return None
    m = dict(entries)  # the map 4.9.7 fills: the header's names in order, then CLUSTER (in place when present)
    m[rules.cluster] = cluster_name
    names = list(m)
    order, exact = java_hash_map_order(names)
    if not exact:
        return None  # a treeified bin: its order is not modelled
    stored = [names[i] for i in order if names[i] != rules.wait]  # WAIT removed; its place in the table counted
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{m[k]}" for k in stored), not has_uniq
