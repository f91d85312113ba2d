"""``BrokerOuterAPI``: the broker's calls to name servers (``broker/out/BrokerOuterAPI.java``): REGISTER_BROKER to every
name server concurrently (the broker does this every 30 s and after topic changes) and UNREGISTER_BROKER on shutdown.

Invariants:
1. One body is built per registration round and sent to every name server, with ``bodyCrc32`` = CRC32 of the bytes
   sent (masked to a non-negative int, as ``UtilAll#crc32``).
2. A name server that fails (refused connection, timeout, error code) is logged and skipped; the others' results are
   returned. Nothing raises for a partial failure.

Thread-safety: coroutines for the broker's event loop; the RemotingClient is used from that loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from rmq_core.format.message import body_crc
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.route import RegisterBrokerBody, RegisterBrokerResult
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    decode_header,
    encode_header,
)
from rmq_core.remoting.remoting_client import RemotingClient

log = logging.getLogger(__name__)


class BrokerOuterAPIError(Exception):
    """A name server answered a broker request with an error code."""

    def __init__(self, code: int, remark: str | None, addr: str) -> None:
        super().__init__(f"CODE: {code} DESC: {remark} BROKER: {addr}")
        self.code = code
        self.remark = remark


class BrokerOuterAPI:
    def __init__(self, remoting_client: RemotingClient) -> None:
        self.remoting_client = remoting_client

    # --- register ----------------------------------------------------------------------------------------------
    async def register_broker_all(
        self,
        namesrv_addrs: Iterable[str],
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: Mapping[str, Any],
        filter_server_list: Iterable[str] = (),
        timeout_s: float = 6.0,
        *,
        oneway: bool = False,
        compressed: bool = False,
        enable_acting_master: bool | None = None,
        heartbeat_timeout_millis: int | None = None,
    ) -> list[RegisterBrokerResult]:
        """Register with every name server at once; returns the results of those that answered SUCCESS (none for
        oneway). ``topic_config_wrapper`` is ``{"topicConfigTable": {name: TopicConfig | json dict},
        "dataVersion": {"timestamp", "counter"}}`` (``TopicConfigManager.build_serialize_wrapper()``)."""
        addrs = list(dict.fromkeys(namesrv_addrs))
        if not addrs:
            return []
        body = RegisterBrokerBody.from_wrapper(topic_config_wrapper, filter_server_list).encode(
            standard_json=False, compressed=compressed
        )
        header = RegisterBrokerRequestHeader(
            brokerName=broker_name,
            brokerAddr=broker_addr,
            clusterName=cluster_name,
            haServerAddr=ha_server_addr,
            brokerId=broker_id,
            compressed=compressed,
            bodyCrc32=body_crc(body),
            heartbeatTimeoutMillis=heartbeat_timeout_millis,
            enableActingMaster=enable_acting_master,
        )
        ext = encode_header(header)

        async def one(addr: str) -> RegisterBrokerResult | None:
            try:
                result = await self._register_broker(addr, ext, body, oneway, timeout_s)
                log.info("register broker[%d] to name server %s OK", broker_id, addr)
                return result
            except Exception as e:
                log.warning("registerBroker to %s failed: %s: %s", addr, type(e).__name__, e)
                return None

        results = await asyncio.gather(*(one(a) for a in addrs))
        return [r for r in results if r is not None]

    async def _register_broker(
        self, namesrv_addr: str, ext: dict[str, str], body: bytes, oneway: bool, timeout_s: float
    ) -> RegisterBrokerResult | None:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)
        if oneway:
            await self.remoting_client.invoke_oneway(namesrv_addr, request, timeout_s)
            return None
        response = await self.remoting_client.invoke(namesrv_addr, request, timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerOuterAPIError(response.code, response.remark, ext.get("brokerAddr", ""))
        rh = decode_header(RegisterBrokerResponseHeader, response.ext_fields)
        kv_table: dict[str, str] | None = None
        if response.body:
            try:
                kv = fastjson.loads(response.body, int_keys=False)
                table = kv.get("table") if isinstance(kv, dict) else None
                kv_table = {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else None
            except ValueError:
                log.warning("name server %s answered a register body that is not a KVTable", namesrv_addr)
        return RegisterBrokerResult(
            ha_server_addr=rh.haServerAddr, master_addr=rh.masterAddr, kv_table=kv_table, namesrv_addr=namesrv_addr
        )

    # --- unregister --------------------------------------------------------------------------------------------
    async def unregister_broker_all(
        self,
        namesrv_addrs: Iterable[str],
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        timeout_s: float = 3.0,
    ) -> list[str]:
        """Unregister from every name server at once; returns the addresses that answered SUCCESS."""
        addrs = list(dict.fromkeys(namesrv_addrs))

        async def one(addr: str) -> str | None:
            try:
                await self.unregister_broker(addr, cluster_name, broker_addr, broker_name, broker_id, timeout_s)
                log.info("unregisterBroker OK, NamesrvAddr: %s", addr)
                return addr
            except Exception as e:
                log.warning("unregisterBroker from %s failed: %s: %s", addr, type(e).__name__, e)
                return None

        done = await asyncio.gather(*(one(a) for a in addrs))
        return [a for a in done if a is not None]

    async def unregister_broker(
        self,
        namesrv_addr: str,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        timeout_s: float = 3.0,
    ) -> None:
        header = UnRegisterBrokerRequestHeader(
            brokerName=broker_name, brokerAddr=broker_addr, clusterName=cluster_name, brokerId=broker_id
        )
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, encode_header(header))
        response = await self.remoting_client.invoke(namesrv_addr, request, timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerOuterAPIError(response.code, response.remark, broker_addr)

    # --- a slave's copy of its master's configs (SlaveSynchronize) -------------------------------------------------
    async def get_master_config_text(self, master_addr: str, code: int, timeout_s: float = 3.0) -> str:
        """The body of GET_ALL_TOPIC_CONFIG / GET_ALL_CONSUMER_OFFSET / GET_ALL_DELAY_OFFSET /
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG from the master (4.9 ``getAllTopicConfig`` and friends), as text."""
        response = await self.remoting_client.invoke(master_addr, RemotingCommand.request(code, {}), timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerOuterAPIError(response.code, response.remark, master_addr)
        return (response.body or b"").decode("utf-8")
