"""KVTable (rp/body/KVTable.java): a string-to-string table, the body of GET_BROKER_RUNTIME_INFO (28) and
GET_KVLIST_BY_NAMESPACE (219). Wire form (fastjson): ``{"table":{"key":"value",…}}``.

Plain data; no shared state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from rmq_core.remoting import fastjson
from rmq_core.remoting.body.route import BodyDecodeError


@dataclass
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return fastjson.dumps({"table": self.table}).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        try:
            doc: Any = fastjson.loads(data, int_keys=False)
        except ValueError as e:
            raise BodyDecodeError(f"KVTable is not JSON: {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("table", {}), dict):
            raise BodyDecodeError(f"KVTable must be {{'table': {{…}}}}: {doc!r}")
        return cls({str(k): str(v) for k, v in doc.get("table", {}).items()})
