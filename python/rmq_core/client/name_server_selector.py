"""Which name server a request goes to: RocketMQ's rule (4.9 ``NettyRemotingClient#getAndCreateNameserverChannel``),
the one rule every name-server RPC of ``MQClientAPIImpl`` (and so of its blocking face) follows.

The rule: 1. a chosen address is kept while it can be reached; 2. else the next address round robin (from a
random start, one step per choice) that can be reached becomes the chosen one, and when none can the request fails
with the last connect error; 3. only a failed connect (or a connection lost during the request) moves the choice.
Invariants: ``chosen`` is None or an address that answered; ``rotation`` yields each address of the list once.
Thread-safety: used from one event loop (the owning ``MQClientAPIImpl``'s).
Details (the rule in full): docs/CLIENT_DESIGN.md, 'Name server choice'.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

# RocketMQ's initial index: a random value below 999 (NettyRemotingClient#initValueIndex)
INDEX_SEED_BOUND = 999


class NameServerSelector:
    def __init__(self, index: int | None = None) -> None:
        """``index``: where the round robin starts (the first choice is the address after it); random by default."""
        self._index = random.randrange(INDEX_SEED_BOUND) if index is None else index
        self.chosen: str | None = None

    def current(self, addrs: Sequence[str]) -> str | None:
        """The chosen address while it is still in ``addrs`` (a new list without it drops the choice)."""
        if self.chosen is not None and self.chosen not in addrs:
            self.chosen = None
        return self.chosen

    def rotation(self, addrs: Sequence[str]) -> Iterator[str]:
        """The next address round robin, each of ``addrs`` once; the caller ``choose``s the one that answers."""
        for _ in range(len(addrs)):
            self._index += 1
            yield addrs[self._index % len(addrs)]

    def choose(self, addr: str) -> None:
        self.chosen = addr

    def forget(self, addr: str) -> None:
        """``addr`` could not be reached: it is no longer the choice."""
        if self.chosen == addr:
            self.chosen = None
