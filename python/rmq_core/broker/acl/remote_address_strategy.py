"""White remote addresses of plain_acl.yml (4.9.7 rocketmq-acl ``RemoteAddressStrategyFactory``): the forms
``globalWhiteRemoteAddresses`` and an account's ``whiteRemoteAddress`` take, and whether a client's IP matches.

Forms (IPv4; IPv6 the same with ``:`` and hex groups): blank (matches nothing); ``*``, ``*.*.*.*`` or
``*:*:*:*:*:*:*:*`` (everything); ``192.168.0.1`` (one address); ``192.168.0.1,192.168.0.2`` and
``192.168.1.{1,2,3}`` (a set); ``192.168.1.*``, ``192.168.*``-style ``192.168.*.*``, ``192.168.1.10-20``,
``192.168.10-20.*`` (the first ``*`` or ``a-b`` group is a range over that group, the groups before it must equal).
A malformed pattern raises ``AclConfigError`` at load, as Apache's factory throws AclException.

Thread-safety: strategies are immutable after construction.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from rmq_core.errors import AclConfigError

__all__ = ["AclConfigError", "AddressMatcher", "remote_address_strategy"]

AddressMatcher = Callable[[str], bool]  # the client's IP (no port) → allowed


def _valid_v4(addr: str) -> bool:
    try:
        ipaddress.IPv4Address(addr)
    except ValueError:
        return False
    return True


def _valid_v6(addr: str) -> bool:
    try:
        ipaddress.IPv6Address(addr)
    except ValueError:
        return False
    return True


def _expand_v6(addr: str) -> str:
    return ipaddress.IPv6Address(addr).exploded.upper()


def _normal(addr: str) -> str | None:
    """An address in the form sets hold: IPv4 as written, IPv6 exploded; None when it is neither."""
    if _valid_v4(addr):
        return addr
    if _valid_v6(addr):
        return _expand_v6(addr)
    return None


def _address_set(addresses: list[str]) -> AddressMatcher:
    members = set()
    for a in addresses:
        n = _normal(a.strip())
        if n is None:
            raise AclConfigError(f"Netaddress examine Exception netaddress is {a}")
        members.add(n)
    return lambda ip: _normal(ip) in members


def _range(pattern: str) -> AddressMatcher:
    v6 = ":" in pattern
    sep, base, limit = (":", 16, 0xFFFF) if v6 else (".", 10, 255)
    groups = [g.strip() for g in pattern.split(sep)]
    for i, g in enumerate(groups):
        if i == 0 or not (g == "*" or "-" in g):
            continue
        if g == "*":
            lo, hi = 0, limit
        else:
            parts = g.split("-")
            try:
                if g.startswith("-") or len(parts) != 2:
                    raise ValueError
                lo, hi = int(parts[0], base), int(parts[1], base)
            except ValueError:
                raise AclConfigError(
                    f"RangeRemoteAddressStrategy netaddress examine scope Exception value {g}"
                ) from None
            if not (0 <= lo <= hi <= limit):
                raise AclConfigError(
                    f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {lo} , end is {hi}"
                )
        if any(x == "*" or "-" in x for x in groups[:i]):
            break
        head = groups[:i]
        try:  # the groups before the range are numbers in scope (AclUtils.verify)
            if any(not 0 <= int(x, base) <= limit for x in head):
                raise ValueError
        except ValueError:
            raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}") from None
        if v6:
            head_n = [int(x, 16) for x in head]

            def match_v6(ip: str, head_n: list[int] = head_n, i: int = i, lo: int = lo, hi: int = hi) -> bool:
                if not _valid_v6(ip):
                    return False
                got = [int(x, 16) for x in _expand_v6(ip).split(":")]
                return got[:i] == head_n and lo <= got[i] <= hi

            return match_v6
        head_s = [str(int(x)) for x in head]

        def match_v4(ip: str, head_s: list[str] = head_s, i: int = i, lo: int = lo, hi: int = hi) -> bool:
            if not _valid_v4(ip):
                return False
            got = ip.split(".")
            return got[:i] == head_s and lo <= int(got[i]) <= hi

        return match_v4
    raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}")


def remote_address_strategy(pattern: str | None) -> AddressMatcher:
    """The matcher of a white-address pattern (module docstring); raises AclConfigError for a malformed one."""
    if pattern is None or not str(pattern).strip():
        return lambda ip: False
    p = str(pattern).strip()
    if p in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda ip: True
    if p.endswith("}"):
        sep = ":" if ":" in p else "."
        last = p.split(sep)[-1]
        if not last.startswith("{") or (sep == "." and len(p.split(".")) < 4):
            raise AclConfigError(f"MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {p}")
        prefix = p[: p.index("{")]
        return _address_set([prefix + x.strip() for x in last[1:-1].split(",") if x.strip()])
    if "," in p:
        return _address_set([x for x in p.split(",") if x.strip()])
    if "*" in p or "-" in p:
        return _range(p)
    n = _normal(p)
    if n is None:
        raise AclConfigError(f"Netaddress examine Exception netaddress is {p}")
    return lambda ip: _normal(ip) == n
