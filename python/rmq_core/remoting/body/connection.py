"""Client connection bodies (rp/body/Connection.java, ConsumerConnection.java, ProducerConnection.java):

- GET_CONSUMER_CONNECTION_LIST (203) → ConsumerConnection ``{"connectionSet":[Connection],"consumeFromWhere",
  "consumeType","messageModel","subscriptionTable":{topic: SubscriptionData}}``
- GET_PRODUCER_CONNECTION_LIST (204) → ProducerConnection ``{"connectionSet":[Connection]}``

Connection: ``{"clientAddr","clientId","language","version"}`` (``version`` the client's MQVersion ordinal).
Fields in alphabetical order, as fastjson writes them.

Plain data; no shared state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.remoting import fastjson


@dataclass(frozen=True)
class Connection:
    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }


def _connections(conns: list[Connection]) -> list[dict[str, Any]]:
    return [c.to_json_dict() for c in sorted(conns, key=lambda c: (c.client_id, c.client_addr))]


@dataclass
class ConsumerConnection:
    consume_type: str
    message_model: str
    consume_from_where: str
    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc = {
            "connectionSet": _connections(self.connection_set),
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": {t: s.to_json_dict() for t, s in sorted(self.subscription_table.items())},
        }
        return fastjson.dumps(doc).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerConnection:
        """The answer to GET_CONSUMER_CONNECTION_LIST, as rmq_core's and Apache's brokers write it."""
        doc = fastjson.loads(data, int_keys=False)
        return cls(
            consume_type=str(doc.get("consumeType") or ""),
            message_model=str(doc.get("messageModel") or ""),
            consume_from_where=str(doc.get("consumeFromWhere") or ""),
            connection_set=[
                Connection(
                    str(c.get("clientId", "")),
                    str(c.get("clientAddr", "")),
                    str(c.get("language", "")),
                    int(c.get("version", 0)),
                )
                for c in doc.get("connectionSet") or []
            ],
            subscription_table={
                t: SubscriptionData.from_json_dict(s) for t, s in (doc.get("subscriptionTable") or {}).items()
            },
        )


@dataclass
class ProducerConnection:
    connection_set: list[Connection] = field(default_factory=list)

    def encode(self) -> bytes:
        return fastjson.dumps({"connectionSet": _connections(self.connection_set)}).encode("utf-8")
