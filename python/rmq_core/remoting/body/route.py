"""Route bodies: what name servers and brokers exchange about where topics live (``rp/route/*.java``,
``rp/body/ClusterInfo.java``, ``rp/body/TopicList.java``, ``rp/body/RegisterBrokerBody.java``), and the client-side
reading of a route into MessageQueues (``MQClientInstance#topicRouteData2TopicPublishInfo`` / ``…SubscribeInfo``).

Format: standard JSON (``encode(standard_json=True)``) or fastjson's default (bare integer map keys), fields in
alphabetical order, nulls omitted; ``RegisterBrokerBody`` also in RocketMQ's zlib-compressed form.
Invariant: ``decode`` accepts both forms; anything that is not the expected shape raises ``BodyDecodeError`` naming
what is wrong (never a partly built object).
Thread-safety: plain value objects; not synchronised.
Details: docs/BROKER_DESIGN.md, 'Route bodies'.
"""

from __future__ import annotations

import json
import random
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmq_core.common import perm_name
from rmq_core.common.mix_all import MASTER_ID
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import MessageQueue
from rmq_core.remoting import fastjson
from rmq_core.remoting.command import RemotingCommandError
from rmq_core.remoting.request_limits import INFLATED_BODY_MAX


class BodyDecodeError(RemotingCommandError, ValueError):
    """A request or response body that is not the JSON document (or compressed form) it should be."""


# --- JSON helpers ---------------------------------------------------------------------------------------------
def _dumps(obj: Any, standard_json: bool) -> bytes:
    """fastjson's default (bare int keys, UTF-8 as is) or the browser-compatible standard form."""
    return fastjson.dumps(obj, unquoted_int_keys=not standard_json, ensure_ascii=standard_json).encode("utf-8")


def _inflate(data: bytes, what: str) -> bytes:
    """A zlib stream inflated a piece at a time, never past ``INFLATED_BODY_MAX`` bytes (nothing is allocated
    beyond it: a small stream of zeros can expand a thousandfold)."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, INFLATED_BODY_MAX + 1)
    except zlib.error as e:
        raise BodyDecodeError(f"compressed {what} does not inflate: {e}") from None
    if len(raw) > INFLATED_BODY_MAX or inflater.unconsumed_tail:
        raise BodyDecodeError(f"compressed {what} inflates past the limit of {INFLATED_BODY_MAX} bytes")
    if not inflater.eof:
        raise BodyDecodeError(f"compressed {what} does not inflate: the zlib stream is truncated")
    return raw


def _loads(data: bytes | str, what: str) -> dict[str, Any]:
    try:
        obj = fastjson.loads(data, int_keys=False)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BodyDecodeError(f"{what} body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise BodyDecodeError(f"{what} body is not a JSON object")
    return obj


def _obj(d: Any, what: str) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise BodyDecodeError(f"{what} is not a JSON object: {d!r}")
    return d


def _int(d: Mapping[str, Any], key: str, what: str, default: int | None = None) -> int:
    v = d.get(key)
    if v is None:
        if default is None:
            raise BodyDecodeError(f"{what} has no {key}")
        return default
    if isinstance(v, bool):
        raise BodyDecodeError(f"{what}.{key} is not a number: {v!r}")
    try:
        return int(v)
    except (TypeError, ValueError):
        raise BodyDecodeError(f"{what}.{key} is not a number: {v!r}") from None


def _str(d: Mapping[str, Any], key: str, what: str, required: bool = True) -> str | None:
    v = d.get(key)
    if v is None:
        if required:
            raise BodyDecodeError(f"{what} has no {key}")
        return None
    if not isinstance(v, str):
        raise BodyDecodeError(f"{what}.{key} is not a string: {v!r}")
    return v


def _bool(d: Mapping[str, Any], key: str, default: bool = False) -> bool:
    v = d.get(key)
    if v is None:
        return default
    if isinstance(v, str):
        return v.lower() == "true"
    return bool(v)


def _str_list(v: Any, what: str) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise BodyDecodeError(f"{what} is not a list of strings: {v!r}")
    return list(v)


def _or_empty(v: Any) -> Any:
    return {} if v is None else v


def _sorted_dict(d: Mapping[Any, Any]) -> dict[Any, Any]:
    return {k: d[k] for k in sorted(d)}


def _broker_id(k: Any, what: str) -> int:
    try:
        return int(k)
    except (TypeError, ValueError):
        raise BodyDecodeError(f"{what}: broker id {k!r} is not a number") from None


# --- QueueData ------------------------------------------------------------------------------------------------
@dataclass
class QueueData:
    """One broker's queues of a topic. Ordered by broker name (``QueueData#compareTo``)."""

    broker_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = perm_name.DEFAULT_PERM
    topic_sys_flag: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_dict(cls, d: Any) -> QueueData:
        d = _obj(d, "QueueData")
        return cls(
            broker_name=_str(d, "brokerName", "QueueData"),  # type: ignore[arg-type]
            read_queue_nums=_int(d, "readQueueNums", "QueueData", 0),
            write_queue_nums=_int(d, "writeQueueNums", "QueueData", 0),
            perm=_int(d, "perm", "QueueData", 0),
            topic_sys_flag=_int(d, "topicSysFlag", "QueueData", 0),
        )

    @classmethod
    def from_topic_config(cls, broker_name: str, tc: TopicConfig) -> QueueData:
        """``RouteInfoManager#createAndUpdateQueueData``."""
        return cls(
            broker_name=broker_name,
            read_queue_nums=tc.read_queue_nums,
            write_queue_nums=tc.write_queue_nums,
            perm=tc.perm,
            topic_sys_flag=tc.topic_sys_flag,
        )

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> QueueData:
        return cls.from_json_dict(_loads(data, "QueueData"))


# --- BrokerData -----------------------------------------------------------------------------------------------
@dataclass
class BrokerData:
    """One broker name (a master and its slaves): ``broker_addrs`` maps broker id (0 = master) to ``"ip:port"``."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    def select_broker_addr(self, rng: random.Random | None = None) -> str | None:
        """The master's address, else a random slave's (``BrokerData#selectBrokerAddr``); None when empty."""
        master = self.broker_addrs.get(MASTER_ID)
        if master is not None:
            return master
        if not self.broker_addrs:
            return None
        addrs = list(self.broker_addrs.values())
        return (rng or random).choice(addrs)

    def copy(self) -> BrokerData:
        return BrokerData(
            self.cluster, self.broker_name, dict(self.broker_addrs), self.zone_name, self.enable_acting_master
        )

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerAddrs": _sorted_dict(self.broker_addrs),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            d["zoneName"] = self.zone_name
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> BrokerData:
        d = _obj(d, "BrokerData")
        addrs_raw = d.get("brokerAddrs")
        addrs_raw = {} if addrs_raw is None else addrs_raw
        if not isinstance(addrs_raw, dict):
            raise BodyDecodeError(f"BrokerData.brokerAddrs is not a JSON object: {addrs_raw!r}")
        addrs: dict[int, str] = {}
        for k, v in addrs_raw.items():
            if not isinstance(v, str):
                raise BodyDecodeError(f"BrokerData.brokerAddrs[{k}] is not a string: {v!r}")
            addrs[_broker_id(k, "BrokerData.brokerAddrs")] = v
        return cls(
            cluster=_str(d, "cluster", "BrokerData", required=False) or "",
            broker_name=_str(d, "brokerName", "BrokerData"),  # type: ignore[arg-type]
            broker_addrs=addrs,
            zone_name=_str(d, "zoneName", "BrokerData", required=False),
            enable_acting_master=_bool(d, "enableActingMaster"),
        )

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> BrokerData:
        return cls.from_json_dict(_loads(data, "BrokerData"))


# --- TopicRouteData -------------------------------------------------------------------------------------------
@dataclass
class TopicRouteData:
    """Where a topic lives: its queue data per broker name and the addresses of those brokers."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    topic_queue_mapping_by_broker: dict[str, Any] | None = None  # 5.x static topics: carried, not interpreted

    # -- lookups ------------------------------------------------------------------------------------------------
    def find_broker_data(self, broker_name: str) -> BrokerData | None:
        for bd in self.broker_datas:
            if bd.broker_name == broker_name:
                return bd
        return None

    def find_broker_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        bd = self.find_broker_data(broker_name)
        return None if bd is None else bd.broker_addrs.get(broker_id)

    def find_queue_data(self, broker_name: str) -> QueueData | None:
        for qd in self.queue_datas:
            if qd.broker_name == broker_name:
                return qd
        return None

    # -- route → queues (MQClientInstance) ------------------------------------------------------------------------
    def is_order_topic(self) -> bool:
        return bool(self.order_topic_conf)

    def publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a producer may send to (``topicRouteData2TopicPublishInfo``): with an ``orderTopicConf``
        (``"brokerA:4;brokerB:4"``) exactly those; otherwise, by broker name, ``writeQueueNums`` queues of every
        queue data whose perm is writable and whose broker name has a master (id 0) in the route."""
        out: list[MessageQueue] = []
        if self.order_topic_conf:
            for item in self.order_topic_conf.split(";"):
                if not item:
                    continue
                name, _, nums = item.partition(":")
                try:
                    n = int(nums)
                except ValueError:
                    raise BodyDecodeError(f"orderTopicConf item {item!r} is not brokerName:queueNums") from None
                out.extend(MessageQueue(topic, name, i) for i in range(n))
            return out
        for qd in sorted(self.queue_datas, key=lambda q: q.broker_name):
            if not perm_name.is_writeable(qd.perm):
                continue
            bd = self.find_broker_data(qd.broker_name)
            if bd is None or MASTER_ID not in bd.broker_addrs:
                continue
            out.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
        return out

    def subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """The queues a consumer reads (``topicRouteData2TopicSubscribeInfo``): ``readQueueNums`` queues of every
        queue data whose perm is readable (a broker name without a live master still counts: slaves serve reads)."""
        return {
            MessageQueue(topic, qd.broker_name, i)
            for qd in self.queue_datas
            if perm_name.is_readable(qd.perm)
            for i in range(qd.read_queue_nums)
        }

    # -- JSON -------------------------------------------------------------------------------------------------------
    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerDatas": [bd.to_json_dict() for bd in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in sorted(self.filter_server_table.items())},
        }
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        d["queueDatas"] = [qd.to_json_dict() for qd in self.queue_datas]
        if self.topic_queue_mapping_by_broker is not None:
            d["topicQueueMappingByBroker"] = self.topic_queue_mapping_by_broker
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> TopicRouteData:
        d = _obj(d, "TopicRouteData")
        qds = d.get("queueDatas")
        bds = d.get("brokerDatas")
        qds = [] if qds is None else qds
        bds = [] if bds is None else bds
        if not isinstance(qds, list) or not isinstance(bds, list):
            raise BodyDecodeError("TopicRouteData.queueDatas and brokerDatas must be lists")
        fst_raw = d.get("filterServerTable")
        fst_raw = {} if fst_raw is None else fst_raw
        if not isinstance(fst_raw, dict):
            raise BodyDecodeError("TopicRouteData.filterServerTable is not a JSON object")
        mapping = d.get("topicQueueMappingByBroker")
        return cls(
            queue_datas=[QueueData.from_json_dict(q) for q in qds],
            broker_datas=[BrokerData.from_json_dict(b) for b in bds],
            order_topic_conf=_str(d, "orderTopicConf", "TopicRouteData", required=False),
            filter_server_table={str(k): _str_list(v, f"filterServerTable[{k}]") for k, v in fst_raw.items()},
            topic_queue_mapping_by_broker=mapping if isinstance(mapping, dict) else None,
        )

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> TopicRouteData:
        return cls.from_json_dict(_loads(data, "TopicRouteData"))


# --- ClusterInfo ----------------------------------------------------------------------------------------------
@dataclass
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: every broker name's BrokerData and the broker names of every cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def retrieve_all_addr_by_cluster(self, cluster: str) -> list[str]:
        """Every broker address (masters and slaves) of the named cluster (``ClusterInfo#retrieveAllAddrByCluster``)."""
        out: list[str] = []
        for name in sorted(self.cluster_addr_table.get(cluster, ())):
            bd = self.broker_addr_table.get(name)
            if bd is not None:
                out.extend(bd.broker_addrs[i] for i in sorted(bd.broker_addrs))
        return out

    def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name → master address, by name, of every broker (of ``cluster`` if given) that has a master."""
        names = self.cluster_addr_table.get(cluster, set()) if cluster is not None else self.broker_addr_table
        out: dict[str, str] = {}
        for name in sorted(names):
            bd = self.broker_addr_table.get(name)
            addr = bd.broker_addrs.get(MASTER_ID) if bd is not None else None
            if addr:
                out[name] = addr
        return out

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_json_dict() for k, v in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {k: sorted(v) for k, v in sorted(self.cluster_addr_table.items())},
        }

    @classmethod
    def from_json_dict(cls, d: Any) -> ClusterInfo:
        d = _obj(d, "ClusterInfo")
        bat = _obj(_or_empty(d.get("brokerAddrTable")), "ClusterInfo.brokerAddrTable")
        cat = _obj(_or_empty(d.get("clusterAddrTable")), "ClusterInfo.clusterAddrTable")
        return cls(
            broker_addr_table={str(k): BrokerData.from_json_dict(v) for k, v in bat.items()},
            cluster_addr_table={str(k): set(_str_list(v, f"clusterAddrTable[{k}]")) for k, v in cat.items()},
        )

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> ClusterInfo:
        return cls.from_json_dict(_loads(data, "ClusterInfo"))


# --- TopicList ------------------------------------------------------------------------------------------------
@dataclass
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: ``{"topicList": [...], "brokerAddr": ...}`` (brokerAddr omitted when null)."""

    topic_list: set[str] = field(default_factory=set)
    broker_addr: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.broker_addr is not None:
            d["brokerAddr"] = self.broker_addr
        d["topicList"] = sorted(self.topic_list)
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> TopicList:
        d = _obj(d, "TopicList")
        return cls(
            topic_list=set(_str_list(d.get("topicList"), "TopicList.topicList")),
            broker_addr=_str(d, "brokerAddr", "TopicList", required=False),
        )

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> TopicList:
        return cls.from_json_dict(_loads(data, "TopicList"))


# --- DataVersion (as the register body carries it) -------------------------------------------------------------
def data_version_equals(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """``DataVersion#equals``: same stateVersion (5.x; absent = 0), timestamp and counter."""
    if a is None or b is None:
        return a is None and b is None
    return all(int(a.get(k) or 0) == int(b.get(k) or 0) for k in ("stateVersion", "timestamp", "counter"))


def _data_version(d: Any, what: str) -> dict[str, int]:
    if d is None:
        return {"counter": 0, "timestamp": 0}
    d = _obj(d, what)
    out = {"counter": _int(d, "counter", what, 0), "timestamp": _int(d, "timestamp", what, 0)}
    if d.get("stateVersion") is not None:
        out["stateVersion"] = _int(d, "stateVersion", what)
    return out


def _topic_config(name: Any, v: Any) -> TopicConfig:
    if isinstance(v, TopicConfig):
        return v
    v = _obj(v, f"topicConfigTable[{name}]")
    if v.get("topicName") is None:
        v = dict(v, topicName=str(name))
    what = f"topicConfigTable[{name}]"
    for k in ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag"):
        if k in v:
            _int(v, k, what)
    attrs = v.get("attributes")
    if attrs is not None and not isinstance(attrs, dict):
        raise BodyDecodeError(f"{what}.attributes is not a JSON object")
    try:
        return TopicConfig.from_json_dict(v)
    except (TypeError, ValueError, KeyError) as e:
        raise BodyDecodeError(f"{what} is not a TopicConfig: {e}") from None


# --- RegisterBrokerBody ---------------------------------------------------------------------------------------
@dataclass
class RegisterBrokerBody:
    """REGISTER_BROKER body: the broker's topic configs with their data version, and its filter servers.

    ``topic_config_table`` maps topic name → TopicConfig; ``data_version`` is ``{"timestamp", "counter"}`` (5.x adds
    ``stateVersion``). ``extra_wrapper_fields`` keeps 5.x wrapper fields we do not interpret
    (``topicQueueMappingInfoMap``, ``topicQueueMappingDetailMap``, ``mappingDataVersion``) so a round trip keeps them.
    """

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: dict[str, int] = field(default_factory=lambda: {"counter": 0, "timestamp": 0})
    filter_server_list: list[str] = field(default_factory=list)
    extra_wrapper_fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_wrapper(
        cls, topic_config_wrapper: Mapping[str, Any], filter_server_list: Iterable[str] = ()
    ) -> RegisterBrokerBody:
        """From a TopicConfigSerializeWrapper-shaped dict (``TopicConfigManager.build_serialize_wrapper()``), whose
        table values may be TopicConfig objects or their JSON dicts."""
        return cls.from_json_dict(
            {"topicConfigSerializeWrapper": dict(topic_config_wrapper), "filterServerList": list(filter_server_list)}
        )

    def wrapper_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"dataVersion": dict(sorted(self.data_version.items()))}
        d.update(self.extra_wrapper_fields)
        d["topicConfigTable"] = {k: v.to_json_dict() for k, v in self.topic_config_table.items()}
        return dict(sorted(d.items()))

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.wrapper_json_dict(),
        }

    @classmethod
    def wrapper_from_json_dict(cls, w: Any, filter_server_list: list[str] | None = None) -> RegisterBrokerBody:
        """A bare TopicConfigSerializeWrapper (what brokers older than V3_0_11 sent as the whole body)."""
        w = _obj(w, "topicConfigSerializeWrapper")
        table_raw = w.get("topicConfigTable")
        table_raw = _obj({} if table_raw is None else table_raw, "topicConfigSerializeWrapper.topicConfigTable")
        table = {str(k): _topic_config(k, v) for k, v in table_raw.items()}
        extra = {k: v for k, v in w.items() if k not in ("topicConfigTable", "dataVersion")}
        return cls(
            topic_config_table=table,
            data_version=_data_version(w.get("dataVersion"), "topicConfigSerializeWrapper.dataVersion"),
            filter_server_list=list(filter_server_list or []),
            extra_wrapper_fields=extra,
        )

    @classmethod
    def from_json_dict(cls, d: Any) -> RegisterBrokerBody:
        d = _obj(d, "RegisterBrokerBody")
        fsl = _str_list(d.get("filterServerList"), "RegisterBrokerBody.filterServerList")
        return cls.wrapper_from_json_dict(_or_empty(d.get("topicConfigSerializeWrapper")), fsl)

    def encode(self, standard_json: bool = True, compressed: bool = False) -> bytes:
        if compressed:
            return self._encode_compressed()
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str, compressed: bool = False) -> RegisterBrokerBody:
        if compressed:
            if isinstance(data, str):
                raise BodyDecodeError("a compressed RegisterBrokerBody must be bytes")
            return cls._decode_compressed(data)
        return cls.from_json_dict(_loads(data, "RegisterBrokerBody"))

    # -- RocketMQ's compressed form (RegisterBrokerBody#encode(true) / #decode(data, true)) -----------------------
    def _encode_compressed(self) -> bytes:
        parts: list[bytes] = []

        def chunk(b: bytes) -> None:
            parts.append(struct.pack(">i", len(b)))
            parts.append(b)

        chunk(_dumps(dict(sorted(self.data_version.items())), False))
        parts.append(struct.pack(">i", len(self.topic_config_table)))
        for tc in self.topic_config_table.values():
            text = " ".join(
                [tc.topic_name, str(tc.read_queue_nums), str(tc.write_queue_nums), str(tc.perm), tc.topic_filter_type]
            )
            if tc.attributes:
                text += " " + json.dumps(tc.attributes, separators=(",", ":"), ensure_ascii=False)
            chunk(text.encode("utf-8"))
        chunk(json.dumps(list(self.filter_server_list), separators=(",", ":")).encode("utf-8"))
        # 5.x trailer (ignored by 4.9 name servers): the static-topic queue mapping infos
        mappings = self.extra_wrapper_fields.get("topicQueueMappingInfoMap") or {}
        parts.append(struct.pack(">i", len(mappings)))
        for info in mappings.values():
            chunk(_dumps(info, False))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def _decode_compressed(cls, data: bytes) -> RegisterBrokerBody:
        raw = _inflate(data, "RegisterBrokerBody")
        pos = 0

        def read_int() -> int:
            nonlocal pos
            if pos + 4 > len(raw):
                raise BodyDecodeError("compressed RegisterBrokerBody ends inside a length field")
            (n,) = struct.unpack_from(">i", raw, pos)
            pos += 4
            return int(n)

        def read_bytes() -> bytes:
            nonlocal pos
            n = read_int()
            if n < 0 or pos + n > len(raw):
                raise BodyDecodeError(f"compressed RegisterBrokerBody: chunk of {n} bytes overruns the data")
            b = raw[pos : pos + n]
            pos += n
            return b

        data_version = _data_version(_loads(read_bytes(), "DataVersion"), "DataVersion")
        count = read_int()
        if count < 0:
            raise BodyDecodeError(f"compressed RegisterBrokerBody: negative topic count {count}")
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            try:
                text = read_bytes().decode("utf-8")
            except UnicodeDecodeError as e:
                raise BodyDecodeError(f"compressed RegisterBrokerBody: topic config is not UTF-8: {e}") from None
            fields = text.split(" ")
            if len(fields) < 5:
                raise BodyDecodeError(f"compressed RegisterBrokerBody: bad topic config {text!r}")
            attrs: Any = None
            if len(fields) > 5 and fields[5]:
                try:  # as TopicConfig#decode: unparsable attributes (a value with a space) are ignored
                    attrs = json.loads(fields[5])
                except ValueError:
                    attrs = None
            try:
                tc = TopicConfig(
                    topic_name=fields[0],
                    read_queue_nums=int(fields[1]),
                    write_queue_nums=int(fields[2]),
                    perm=int(fields[3]),
                    topic_filter_type=fields[4],
                    attributes={str(k): str(v) for k, v in attrs.items()}
                    if isinstance(attrs, dict) and attrs
                    else None,
                )
            except ValueError as e:
                raise BodyDecodeError(f"compressed RegisterBrokerBody: bad topic config {text!r}: {e}") from None
            table[tc.topic_name] = tc
        try:
            fsl_obj = json.loads(read_bytes().decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise BodyDecodeError(f"compressed RegisterBrokerBody: bad filter server list: {e}") from None
        extra: dict[str, Any] = {}
        if pos < len(raw):  # 5.x brokers append their static-topic queue mapping infos
            mappings: dict[str, Any] = {}
            for _ in range(read_int()):
                info = _loads(read_bytes(), "TopicQueueMappingInfo")
                mappings[str(info.get("topic"))] = info
            if mappings:
                extra["topicQueueMappingInfoMap"] = mappings
        return cls(
            topic_config_table=table,
            data_version=data_version,
            filter_server_list=_str_list(fsl_obj, "filterServerList"),
            extra_wrapper_fields=extra,
        )


# --- RegisterBrokerResult --------------------------------------------------------------------------------------
@dataclass
class RegisterBrokerResult:
    """What a name server answers a registering broker (``RegisterBrokerResult``): for a slave, its master's HA
    server address and address (None for masters or when the master is not registered); the order-topic KV table."""

    ha_server_addr: str | None = None
    master_addr: str | None = None
    kv_table: dict[str, str] | None = None
    namesrv_addr: str | None = None  # which name server answered (set by BrokerOuterAPI)
