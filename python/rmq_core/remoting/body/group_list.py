"""GroupList (rp/body/GroupList.java): the body of QUERY_TOPIC_CONSUME_BY_WHO (300), ``{"groupList":["G",…]}``.

Plain data; no shared state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmq_core.remoting import fastjson


@dataclass
class GroupList:
    group_list: set[str] = field(default_factory=set)

    def encode(self) -> bytes:
        return fastjson.dumps({"groupList": sorted(self.group_list)}).encode("utf-8")
