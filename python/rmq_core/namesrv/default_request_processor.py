"""The name server's request processor (``namesrv/processor/DefaultRequestProcessor.java`` and, for routes, 5.x's
``ClientRequestProcessor``): registration, routes, cluster info, topic lists and the KV config of 4.9.7.

Invariants:
1. A request is fully validated (header fields, body CRC32, body JSON) before any table changes; a bad one answers
   SYSTEM_ERROR with a remark saying what is wrong and leaves the tables as they were.
2. Routes are answered in standard JSON when the request version ≥ V4_9_4 (401) or ``acceptStandardJsonOnly``;
   otherwise in fastjson's form (bare integer broker-id keys). Cluster info and topic lists are written as Java's
   name server writes them (fastjson's default form).
Thread-safety: runs on the name server's event loop only (the RouteInfoManager is not synchronised).
Details (the request codes): docs/BROKER_DESIGN.md, 'Name server requests'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rmq_core.common.log_text import clip
from rmq_core.format.message import body_crc
from rmq_core.namesrv.kv_config_manager import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rmq_core.namesrv.route_info_manager import RouteInfoManager
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.kv_table import KVTable
from rmq_core.remoting.body.route import BodyDecodeError, RegisterBrokerBody
from rmq_core.remoting.codes import VERSION_V4_9_4, RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    HeaderError,
    PutKVConfigRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    decode_header,
    encode_header,
)

log = logging.getLogger(__name__)

VERSION_V3_0_11 = 39  # MQVersion ordinal: older brokers sent a bare TopicConfigSerializeWrapper as the body
ZONE_NAME = "__ZONE_NAME"  # MixAll.ZONE_NAME, an extField of 5.x REGISTER_BROKER
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def suggest_todo(url: str) -> str:
    """``FAQUrl#suggestTodo``."""
    return f"\nSee {url} for further details."


def body_crc32(body: bytes | None) -> int:
    """``UtilAll#crc32``: java.util.zip.CRC32 of the body, masked to a non-negative int (0 for no body)."""
    return 0 if body is None else body_crc(body)


class DefaultRequestProcessor:
    """``DefaultRequestProcessor(route_info_manager, now_ms=None)``; ``register_to(server)`` wires its codes."""

    CODES = (
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.GET_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.GET_KVLIST_BY_NAMESPACE,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.GET_TOPICS_BY_CLUSTER,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.GET_NAMESRV_CONFIG,
    )
    # 4.9.7 requests this name server does not serve, and why (answered REQUEST_CODE_NOT_SUPPORTED)
    UNSUPPORTED = {
        int(RequestCode.WIPE_WRITE_PERM_OF_BROKER): "wiping a broker's write permission on the name server is not "
        "supported by rmq_core; use updateBrokerConfig -k brokerPermission on the broker",
        int(RequestCode.UPDATE_NAMESRV_CONFIG): "the rmq_core name server has no runtime configuration to update",
        int(RequestCode.GET_NAMESRV_CONFIG): "the rmq_core name server has no runtime configuration to report",
    }

    def __init__(
        self,
        route_info_manager: RouteInfoManager,
        now_ms: Callable[[], int] | None = None,
        kv_config_manager: KVConfigManager | None = None,
    ) -> None:
        self.route_info_manager = route_info_manager
        self.kv_config_manager = kv_config_manager or KVConfigManager()
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._admin: dict[int, Callable[[Any, RemotingCommand], RemotingCommand]] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list_from_ns,
        }

    def register_to(self, server: Any) -> None:
        for code in self.CODES:
            server.register(int(code), self.process_request)

    async def process_request(self, conn: Any, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        try:
            if code == RequestCode.REGISTER_BROKER:
                return self.register_broker(conn, request)
            if code == RequestCode.UNREGISTER_BROKER:
                return self.unregister_broker(conn, request)
            if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
                return self.get_route_info_by_topic(conn, request)
            if code == RequestCode.GET_BROKER_CLUSTER_INFO:
                return self.get_broker_cluster_info(conn, request)
            if code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
                return self.get_all_topic_list_from_nameserver(conn, request)
            handler = self._admin.get(code)
            if handler is not None:
                return handler(conn, request)
            if code in self.UNSUPPORTED:
                return RemotingCommand.response_to(
                    request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=self.UNSUPPORTED[code]
                )
        except HeaderError as e:
            log.warning("request %d from %s: %s", code, _peer(conn), clip(e))
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=str(e))
        return RemotingCommand.response_to(
            request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {code} not supported"
        )

    # --- REGISTER_BROKER (103) ---------------------------------------------------------------------------------
    def register_broker(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(RegisterBrokerRequestHeader, request.ext_fields)
        if header.bodyCrc32 and body_crc32(request.body) != header.bodyCrc32:
            log.warning("receive registerBroker request,crc32 not match,from %s", _peer(conn))
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark="crc32 not match")

        try:
            if request.body is None:
                body = RegisterBrokerBody()
                with_filter_servers = request.version >= VERSION_V3_0_11
            elif request.version >= VERSION_V3_0_11:
                body = RegisterBrokerBody.decode(request.body, compressed=bool(header.compressed))
                with_filter_servers = True
            else:
                body = RegisterBrokerBody.wrapper_from_json_dict(_json_object(request.body))
                with_filter_servers = False
        except BodyDecodeError as e:
            log.warning("registerBroker from %s (%s): bad body: %s", _peer(conn), clip(header.brokerAddr), clip(e))
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark=f"Failed to decode RegisterBrokerBody: {e}"
            )

        result = self.route_info_manager.register_broker(
            header.clusterName,
            header.brokerAddr,
            header.brokerName,
            header.brokerId,
            header.haServerAddr,
            body.topic_config_table,
            body.data_version,
            body.filter_server_list if with_filter_servers else None,
            conn,
            now_ms=self._now_ms(),
            zone_name=request.ext_fields.get(ZONE_NAME),
            enable_acting_master=header.enableActingMaster,
            heartbeat_timeout_millis=header.heartbeatTimeoutMillis,
        )
        resp_header = RegisterBrokerResponseHeader(haServerAddr=result.ha_server_addr, masterAddr=result.master_addr)
        order_topics = self.kv_config_manager.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields=encode_header(resp_header),
            body=KVTable(order_topics).encode() if order_topics is not None else None,
        )

    # --- UNREGISTER_BROKER (104) -------------------------------------------------------------------------------
    def unregister_broker(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(UnRegisterBrokerRequestHeader, request.ext_fields)
        self.route_info_manager.unregister_broker(
            header.clusterName, header.brokerAddr, header.brokerName, header.brokerId
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    # --- GET_ROUTEINFO_BY_TOPIC (105) --------------------------------------------------------------------------
    def get_route_info_by_topic(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(GetRouteInfoRequestHeader, request.ext_fields)
        route = self.route_info_manager.pick_up_topic_route_data(header.topic)
        if route is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                remark="No topic route info in name server for the topic: " + header.topic + suggest_todo(FAQ_URL),
            )
        standard = request.version >= VERSION_V4_9_4 or bool(header.acceptStandardJsonOnly)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=route.encode(standard_json=standard))

    # --- GET_BROKER_CLUSTER_INFO (106) -------------------------------------------------------------------------
    def get_broker_cluster_info(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        info = self.route_info_manager.get_all_cluster_info()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=info.encode(standard_json=False))

    # --- GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) --------------------------------------------------------------
    def get_all_topic_list_from_nameserver(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        topics = self.route_info_manager.get_all_topic_list()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=topics.encode(standard_json=False))

    # --- KV config (100, 101, 102, 219) ------------------------------------------------------------------------
    def put_kv_config(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(PutKVConfigRequestHeader, request.ext_fields)
        self.kv_config_manager.put(h.namespace, h.key, h.value)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def get_kv_config(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetKVConfigRequestHeader, request.ext_fields)
        value = self.kv_config_manager.get(h.namespace, h.key)
        if value is None:
            return RemotingCommand.response_to(
                request, ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {h.namespace} Key: {h.key}"
            )
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields=encode_header(GetKVConfigResponseHeader(value=value))
        )

    def delete_kv_config(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(DeleteKVConfigRequestHeader, request.ext_fields)
        self.kv_config_manager.delete(h.namespace, h.key)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def get_kv_list_by_namespace(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetKVListByNamespaceRequestHeader, request.ext_fields)
        table = self.kv_config_manager.get_kv_list_by_namespace(h.namespace)
        if table is None:
            return RemotingCommand.response_to(
                request, ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {h.namespace}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=KVTable(table).encode())

    # --- topics (216, 224, 304) --------------------------------------------------------------------------------
    def delete_topic_in_namesrv(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(DeleteTopicFromNamesrvRequestHeader, request.ext_fields)
        self.route_info_manager.delete_topic(h.topic, h.clusterName)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def get_topics_by_cluster(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetTopicsByClusterRequestHeader, request.ext_fields)
        topics = self.route_info_manager.get_topics_by_cluster(h.cluster)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=topics.encode(standard_json=False))

    def get_system_topic_list_from_ns(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        topics = self.route_info_manager.get_system_topic_list()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=topics.encode(standard_json=False))


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        obj = fastjson.loads(body, int_keys=False)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BodyDecodeError(f"TopicConfigSerializeWrapper body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise BodyDecodeError("TopicConfigSerializeWrapper body is not a JSON object")
    return obj


def _peer(conn: Any) -> str:
    return str(getattr(conn, "remote_address", "?"))
