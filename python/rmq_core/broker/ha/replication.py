"""Replication: what a broker runs for its role (4.9 ``BrokerController`` + ``DefaultMessageStore``'s HA parts).

- a master (ASYNC_MASTER / SYNC_MASTER) runs the ``HAService`` on ``ha_listen_port`` (-1 → listenPort + 1, the port
  4.9 registers as ``haServerAddr``; 0, or -1 on a broker listening on a free port → a free one; -1 when listenPort + 1
  is taken → a free one, with a warning: the registered ``haServerAddr`` names it) and, as SYNC_MASTER, lets sends wait for a slave
  (``wait_for_slave``);
- a slave (SLAVE, brokerId > 0) runs the ``HAClient`` towards ``haMasterAddress`` (else the ``haServerAddr`` of the
  name server's answer to REGISTER_BROKER, 4.9's ``updateMasterHAServerAddrPeriodically``) and ``SlaveSynchronize``
  every 10 s (first after 3 s, 4.9's schedule) once it knows its master's address.

Invariants: the controller calls ``start`` after the store is open and before serving, ``shutdown`` before the store
closes; a slave never runs an HA server, a master never an HA client.
Thread-safety: the broker's loop only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from rmq_core.broker.ha.ha_client import HAClient
from rmq_core.broker.ha.ha_service import HAService
from rmq_core.broker.ha.slave_synchronize import SYNC_INTERVAL_S, SlaveSynchronize
from rmq_core.store_status import PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.broker_outer_api import BrokerOuterAPI
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.remoting_server import RemotingServer
    from rmq_core.store import MessageStore, StoreConfig

log = logging.getLogger(__name__)

SYNC_MASTER = "SYNC_MASTER"


class ReplicatedBroker(Protocol):
    """What replication needs of its broker (the ``BrokerController``): a Protocol, so that ha/ imports nothing of
    the controller that owns it (the import-linter contract ``broker-acyclic``)."""

    broker_config: BrokerConfig
    message_store: MessageStore
    message_store_config: StoreConfig
    remoting_server: RemotingServer
    broker_outer_api: BrokerOuterAPI
    topic_config_manager: TopicConfigManager
    consumer_offset_manager: ConsumerOffsetManager
    schedule_message_service: ScheduleMessageService
    subscription_group_manager: SubscriptionGroupManager
    master_addr: str | None

    def register_broker_all(self) -> None: ...


class Replication:
    def __init__(self, controller: ReplicatedBroker) -> None:
        self.controller = controller
        cfg = controller.broker_config
        self.is_slave = cfg.is_slave
        self.is_sync_master = cfg.broker_role == SYNC_MASTER
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.slave_synchronize: SlaveSynchronize | None = None
        self._sync_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        c = self.controller
        cfg = c.broker_config
        store = c.message_store
        if not self.is_slave:
            port = cfg.ha_listen_port
            if port < 0:  # 4.9: listenPort + 1; a broker on a free port (listenPort 0) gets a free HA port too
                port = c.remoting_server.port + 1 if cfg.listen_port > 0 else 0
            self.ha_service = HAService(
                store,
                cfg.broker_ip1,
                port,
                mapped_file_size_commit_log=c.message_store_config.mapped_file_size_commit_log,
                ha_transfer_batch_size=cfg.ha_transfer_batch_size,
                ha_send_heartbeat_interval=cfg.ha_send_heartbeat_interval,
                ha_housekeeping_interval=cfg.ha_housekeeping_interval,
                ha_slave_fallbehind_max=cfg.ha_slave_fallbehind_max,
                sync_flush_timeout=cfg.sync_flush_timeout,
            )
            try:
                await self.ha_service.start()
            except OSError as e:
                if cfg.ha_listen_port >= 0:
                    raise
                # listenPort + 1 taken (another process): a free port, registered as haServerAddr all the same
                log.warning("HA port %d unavailable (%s): listening on a free port instead", port, e)
                self.ha_service.port = 0
                await self.ha_service.start()
            return
        if cfg.broker_id <= 0:  # 4.9's BrokerStartup exits (-3); `rmq-core broker` does too, an embedded broker warns
            log.warning("Slave's brokerId must be > 0 (broker %s has %d)", cfg.broker_name, cfg.broker_id)
        self.ha_client = HAClient(
            store,
            ha_send_heartbeat_interval=cfg.ha_send_heartbeat_interval,
            ha_housekeeping_interval=cfg.ha_housekeeping_interval,
        )
        if len(cfg.ha_master_address) >= 6:
            self.ha_client.update_master_address(cfg.ha_master_address)
        self.ha_client.start()
        self.slave_synchronize = SlaveSynchronize(
            c.broker_outer_api,
            c.topic_config_manager,
            c.consumer_offset_manager,
            c.schedule_message_service,
            c.subscription_group_manager,
            lambda: c.master_addr,
            c.register_broker_all,
        )
        self._sync_task = asyncio.get_running_loop().create_task(self._sync_loop(), name="slave synchronize")

    async def _sync_loop(self) -> None:
        await asyncio.sleep(3.0)
        while True:
            assert self.slave_synchronize is not None
            try:
                await self.slave_synchronize.sync_all()
            except Exception:
                log.exception("ScheduledTask SlaveSynchronize syncAll error.")
            await asyncio.sleep(SYNC_INTERVAL_S)

    def ha_server_addr(self) -> str:
        """What REGISTER_BROKER carries as ``haServerAddr``."""
        c = self.controller
        port = self.ha_service.port if self.ha_service is not None else None
        if port is None:
            p = c.broker_config.ha_listen_port
            port = p if p > 0 else c.remoting_server.port + 1  # (a slave: 4.9 registers listenPort + 1)
        return f"{c.broker_config.broker_ip1}:{port}"

    def on_register_result(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """A name server answered REGISTER_BROKER: a slave follows its master's HA address unless configured."""
        if self.ha_client is None:
            return
        if ha_server_addr and len(self.controller.broker_config.ha_master_address) < 6:
            self.ha_client.update_master_address(ha_server_addr)
        if master_addr and self._sync_task is not None and self.slave_synchronize is not None:
            if self.slave_synchronize.rounds == 0:  # first sight of the master: copy its configs now
                asyncio.get_running_loop().create_task(self.slave_synchronize.sync_all())

    async def wait_for_slave(self, upto: int) -> PutMessageStatus:
        """SYNC_MASTER (4.9 ``submitReplicaRequest``): PUT_OK once a slave acknowledged ``upto``,
        FLUSH_SLAVE_TIMEOUT after ``syncFlushTimeout``, SLAVE_NOT_AVAILABLE at once when no slave is in range."""
        svc = self.ha_service
        if svc is None or not self.is_sync_master:
            return PutMessageStatus.PUT_OK
        if not svc.is_slave_ok(upto):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        ok = await svc.wait_for_slave(upto)
        return PutMessageStatus.PUT_OK if ok else PutMessageStatus.FLUSH_SLAVE_TIMEOUT

    async def shutdown(self) -> None:
        if self._sync_task is not None:
            self._sync_task.cancel()
            await asyncio.gather(self._sync_task, return_exceptions=True)
            self._sync_task = None
        if self.ha_client is not None:
            await self.ha_client.shutdown()
        if self.ha_service is not None:
            await self.ha_service.shutdown()
