"""BrokerController: wires a broker together (store, managers, processors, hold service, schedule service, name-server
registration) and runs it on one asyncio event loop on a background thread; ``Broker`` is the public face of it.

Start order (``start()`` returns once the broker accepts connections):
  0. decide access control (broker/acl/acl_startup.py): aclEnable loads plain_acl.yml; a configuration asking for
     access control that cannot be enforced (a bad file, RocketMQ 5's auth keys) stops the start here;
  1. bind the remoting server (port 0 → a free port) without serving yet, so the store host is known;
  2. open the MessageStore (recovering after a crash) with ``store_host = (broker_ip1, port)``;
  3. load topics.json, subscriptionGroup.json, consumerOffset.json, consumerFilter.json, delayOffset.json, and adopt
     the topics that have ConsumeQueues in the store but no config (a store written by ``MessageStore``);
  4. register the processors, hook the hold service to the store's arrivals, start the hold and schedule services
     and (``timer_wheel_enable``, not on a slave) the timer message store (``broker/timer/``, recovering first);
  5. start serving, register with the name servers (once before ``start`` returns, as 4.9), start the periodic tasks.
Shutdown reverses it: stop serving, answer parked pulls, unregister from the name servers, persist every config,
flush and close the store, stop the loop. Shutdown is idempotent and safe from any thread (e.g. a signal handler).

Invariants:
1. Every processor, manager and service runs on ``loop`` (see docs/BROKER_DESIGN.md, threading model).
2. Configs are persisted every ``flush_consumer_offset_interval`` ms and at shutdown; a failed persist is logged and
   retried at the next tick, never crashes the broker.
3. Nothing a client sends can stop the loop: processor exceptions become SYSTEM_ERROR responses (RemotingServer).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from rmq_core.broker.acl.acl_startup import build_access_validator
from rmq_core.broker.acl.plain_access_validator import PlainAccessValidator
from rmq_core.broker.broker_config import BrokerConfig
from rmq_core.broker.broker_configuration import BrokerConfiguration
from rmq_core.broker.broker_outer_api import BrokerOuterAPI
from rmq_core.broker.client.broker_to_client import BrokerToClient
from rmq_core.broker.client.consumer_manager import ConsumerManager
from rmq_core.broker.client.default_consumer_ids_change_listener import (
    DefaultConsumerIdsChangeListener,
)
from rmq_core.broker.client.producer_manager import ProducerManager
from rmq_core.broker.client.rebalance_lock_manager import RebalanceLockManager
from rmq_core.broker.consumer_filter_manager import ConsumerFilterManager
from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq_core.broker.group_commit_service import GroupCommitService
from rmq_core.broker.ha.replication import Replication
from rmq_core.broker.inner_put_guard import InnerPutGuard
from rmq_core.broker.longpolling.pull_request_hold_service import PullRequestHoldService
from rmq_core.broker.pop.consumer_order_info_manager import ConsumerOrderInfoManager
from rmq_core.broker.pop.message_request_mode_manager import MessageRequestModeManager
from rmq_core.broker.pop.pop_inflight_counter import POP_INFLIGHT_FILE
from rmq_core.broker.pop.pop_revive_service import PopReviveService
from rmq_core.broker.pop.pop_service import PopService
from rmq_core.broker.processor.ack_message_processor import AckMessageProcessor
from rmq_core.broker.processor.admin_broker_processor import AdminBrokerProcessor
from rmq_core.broker.processor.admin_consumer_processor import AdminConsumerProcessor
from rmq_core.broker.processor.admin_stats_processor import AdminStatsProcessor
from rmq_core.broker.processor.change_invisible_time_processor import ChangeInvisibleTimeProcessor
from rmq_core.broker.processor.client_manage_processor import ClientManageProcessor
from rmq_core.broker.processor.consumer_manage_processor import ConsumerManageProcessor
from rmq_core.broker.processor.end_transaction_processor import EndTransactionProcessor
from rmq_core.broker.processor.notification_processor import NotificationProcessor
from rmq_core.broker.processor.peek_message_processor import PeekMessageProcessor
from rmq_core.broker.processor.pop_message_processor import PopMessageProcessor
from rmq_core.broker.processor.pull_message_processor import PullMessageProcessor
from rmq_core.broker.processor.query_assignment_processor import QueryAssignmentProcessor
from rmq_core.broker.processor.query_message_processor import QueryMessageProcessor
from rmq_core.broker.processor.send_message_processor import SendMessageProcessor
from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
from rmq_core.broker.stats.broker_metrics import BrokerMetrics, MetricsSnapshot
from rmq_core.broker.stats.broker_runtime_stats import BrokerRuntimeStats
from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
from rmq_core.broker.timer.timer_message_store import TimerMessageStore
from rmq_core.broker.topic_config_manager import TopicConfigManager
from rmq_core.broker.transaction.transactional_message_bridge import TransactionalMessageBridge
from rmq_core.broker.transaction.transactional_message_check_listener import TransactionalMessageCheckListener
from rmq_core.broker.transaction.transactional_message_check_service import TransactionalMessageCheckService
from rmq_core.broker.transaction.transactional_message_service import TransactionalMessageService
from rmq_core.common.heap_tuning import keep_freed_heap
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.event_loop import new_event_loop
from rmq_core.remoting.frame_protocol import SERVE_BUDGET
from rmq_core.remoting.remoting_client import RemotingClient
from rmq_core.remoting.remoting_server import RemotingServer
from rmq_core.store import MessageStore, StoreConfig

log = logging.getLogger(__name__)

SCAN_NOT_ACTIVE_CHANNEL_INTERVAL_S = 10.0


class BrokerController:
    def __init__(self, broker_config: BrokerConfig, store_config: StoreConfig | None = None) -> None:
        self.broker_config = broker_config
        self._store_config_override = store_config
        self.loop: asyncio.AbstractEventLoop = new_event_loop()
        self.remoting_server = RemotingServer(
            broker_config.broker_ip1,
            broker_config.listen_port,
            max_connections=broker_config.server_max_connections,
            idle_timeout_s=broker_config.server_channel_max_idle_time_seconds,
            frame_deadline_s=broker_config.server_frame_deadline_seconds,
        )
        self.remoting_client = RemotingClient()
        self.message_store: MessageStore = None  # type: ignore[assignment]  # opened in start()
        self.message_store_config: StoreConfig = None  # type: ignore[assignment]
        self.store_host: tuple[str, int] = (broker_config.broker_ip1, broker_config.listen_port)
        self._thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._shutdown_lock = threading.Lock()
        self._stopped = False
        self._register_pending = False
        self.master_addr: str | None = None  # a slave's master, learned when registering with a name server
        self.access_validator: PlainAccessValidator | None = None  # aclEnable: built first thing in start()
        self.grpc_server: Any = None  # broker/grpc/grpc_server.py's GrpcServer when grpc_port >= 0 (started last)
        self._build_components()

    # --- wiring ---------------------------------------------------------------------------------------------
    def _build_components(self) -> None:
        cfg = self.broker_config
        config_dir = cfg.store_config_dir
        os.makedirs(config_dir, exist_ok=True)
        self.topic_config_manager = TopicConfigManager(cfg, config_dir)
        self.subscription_group_manager = SubscriptionGroupManager(cfg, config_dir)
        self.consumer_offset_manager = ConsumerOffsetManager(config_dir)
        self.consumer_filter_manager = ConsumerFilterManager(config_dir)
        self.consumer_order_info_manager = ConsumerOrderInfoManager(config_dir)  # FIFO pops' queue locks
        self.message_request_mode_manager = MessageRequestModeManager(config_dir)  # PULL/POP per topic and group
        self.consumer_manager = ConsumerManager(
            on_event=DefaultConsumerIdsChangeListener(cfg, self.consumer_filter_manager)
        )
        self.producer_manager = ProducerManager()
        self.rebalance_lock_manager = RebalanceLockManager()
        self.broker_stats_manager = BrokerStatsManager(cfg.broker_cluster_name)
        self.broker_runtime_stats = BrokerRuntimeStats(self.broker_stats_manager, self.now_ms())
        self.configuration = BrokerConfiguration(cfg)
        self.broker_metrics: BrokerMetrics | None = None  # started in start() when metrics_prom_exporter_port >= 0
        # what the broker's own re-puts (timer, schedule, transaction commit, send-back) may write
        self.inner_put_guard = InnerPutGuard(cfg, self.topic_config_manager)
        self.schedule_message_service = ScheduleMessageService(
            cfg, self.broker_stats_manager, inner_put_guard=self.inner_put_guard
        )
        self.pull_request_hold_service: PullRequestHoldService  # built in start(), once the store is open
        self.timer_message_store: TimerMessageStore | None = None  # started in start() when timer_wheel_enable
        self.pop_service: PopService  # POP consumption (broker/pop/), built in start() with the store
        self.pop_revive_service: PopReviveService | None = None  # a master with the timer wheel revives
        self.broker_outer_api = BrokerOuterAPI(self.remoting_client)
        self.replication = Replication(self)  # HA service (master) or HA client + config sync (slave): broker/ha/
        self.topic_config_manager.add_change_listener(lambda _cfg: self.register_broker_all())

    def _register_processors(self) -> None:
        server = self.remoting_server
        cfg = self.broker_config
        self.pull_message_processor = PullMessageProcessor(
            cfg,
            self.broker_addr,
            self.message_store,
            self.pull_request_hold_service,
            self.subscription_group_manager,
            self.topic_config_manager,
            self.consumer_manager,
            self.consumer_filter_manager,
            self.consumer_offset_manager,
            self.broker_stats_manager,
        )
        self.group_commit_service = GroupCommitService(self.message_store)
        self.send_message_processor = SendMessageProcessor(
            cfg,
            self.message_store,
            self.message_store_config,
            self.topic_config_manager,
            self.subscription_group_manager,
            self.broker_stats_manager,
            self.schedule_message_service,
            group_commit_service=self.group_commit_service,
            replication=self.replication,
            inner_put_guard=self.inner_put_guard,
        )
        self.consumer_manage_processor = ConsumerManageProcessor(
            self.consumer_manager,
            self.consumer_offset_manager,
            self.message_store,
            self.message_store_config,
            self.topic_config_manager,
        )
        self.client_manage_processor = ClientManageProcessor(
            cfg,
            self.subscription_group_manager,
            self.topic_config_manager,
            self.consumer_manager,
            self.producer_manager,
        )
        self.admin_broker_processor = AdminBrokerProcessor(
            cfg,
            self.message_store,
            self.topic_config_manager,
            self.subscription_group_manager,
            self.rebalance_lock_manager,
            self.register_broker_all,
            self.consumer_offset_manager,
            self.configuration,
        )
        self.admin_stats_processor = AdminStatsProcessor(
            cfg,
            self.message_store,
            self.topic_config_manager,
            self.subscription_group_manager,
            self.consumer_offset_manager,
            self.consumer_manager,
            self.producer_manager,
            self.schedule_message_service,
            self.broker_runtime_stats,
            self.now_ms,
        )
        self.broker_to_client = BrokerToClient(
            cfg,
            self.message_store,
            self.topic_config_manager,
            self.consumer_offset_manager,
            self.consumer_manager,
            self.remoting_server,
        )
        self.admin_consumer_processor = AdminConsumerProcessor(
            cfg, self.message_store, self.consumer_manager, self.broker_to_client
        )
        self.query_message_processor = QueryMessageProcessor(self.message_store, self.message_store_config)
        self._build_transaction_components()
        self.pop_service = PopService(
            cfg,
            self.message_store,
            self.topic_config_manager,
            self.subscription_group_manager,
            self.consumer_offset_manager,
            self.consumer_order_info_manager,
            self.timer_message_store,
            self.store_host,
        )
        self.pop_service.consumer_manager = self.consumer_manager
        self.broker_to_client.pop_service = self.pop_service
        self.admin_stats_processor.pop_inflight = self.pop_service.inflight
        ack_processor = AckMessageProcessor(self.pop_service)
        table: list[tuple[Any, tuple[int, ...]]] = [
            (self.pull_message_processor, (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)),
            (
                self.send_message_processor,
                (
                    RequestCode.SEND_MESSAGE,
                    RequestCode.SEND_MESSAGE_V2,
                    RequestCode.SEND_BATCH_MESSAGE,
                    RequestCode.CONSUMER_SEND_MSG_BACK,
                ),
            ),
            (
                self.consumer_manage_processor,
                (
                    RequestCode.QUERY_CONSUMER_OFFSET,
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                ),
            ),
            (
                self.client_manage_processor,
                (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.CHECK_CLIENT_CONFIG),
            ),
            (self.admin_broker_processor, AdminBrokerProcessor.request_codes),
            (self.admin_stats_processor, AdminStatsProcessor.request_codes),
            (self.admin_consumer_processor, AdminConsumerProcessor.request_codes),
            (self.query_message_processor, (RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.QUERY_MESSAGE)),
            (self.end_transaction_processor, EndTransactionProcessor.request_codes),
            (PopMessageProcessor(self.pop_service), (RequestCode.POP_MESSAGE,)),
            (ack_processor, AckMessageProcessor.request_codes),
            (ChangeInvisibleTimeProcessor(self.pop_service), (RequestCode.CHANGE_MESSAGE_INVISIBLETIME,)),
            (PeekMessageProcessor(self.pop_service), (RequestCode.PEEK_MESSAGE,)),
            (NotificationProcessor(self.pop_service), (RequestCode.NOTIFICATION,)),
            (
                QueryAssignmentProcessor(
                    cfg, self.topic_config_manager, self.consumer_manager, self.message_request_mode_manager
                ),
                QueryAssignmentProcessor.request_codes,
            ),
        ]
        # Processors that never wait run inline in the connection's read loop (no task per request): pulls (a pull
        # that finds nothing is parked, not awaited) and, under ASYNC_FLUSH, sends. SYNC_FLUSH sends await the group
        # commit, so they get a task each and a connection's pipelined sends share one flush.
        inline = {
            int(RequestCode.PULL_MESSAGE),
            int(RequestCode.LITE_PULL_MESSAGE),
            int(RequestCode.HEART_BEAT),
            int(RequestCode.QUERY_CONSUMER_OFFSET),
            int(RequestCode.UPDATE_CONSUMER_OFFSET),
            # POP (broker/pop/): a pop that must wait parks itself as a task, acks never wait
            int(RequestCode.POP_MESSAGE),
            int(RequestCode.ACK_MESSAGE),
            int(RequestCode.BATCH_ACK_MESSAGE),
            int(RequestCode.CHANGE_MESSAGE_INVISIBLETIME),
            int(RequestCode.PEEK_MESSAGE),
            int(RequestCode.NOTIFICATION),
        }
        # (SYNC_MASTER sends await a slave's acknowledgement: a task each too)
        if self.message_store_config.flush_disk_type != "SYNC_FLUSH" and not self.replication.is_sync_master:
            inline |= {
                int(RequestCode.SEND_MESSAGE),
                int(RequestCode.SEND_MESSAGE_V2),
                int(RequestCode.SEND_BATCH_MESSAGE),
            }
        for processor, codes in table:
            for code in codes:
                server.register(int(code), processor.process_request, inline=int(code) in inline)
        if self.access_validator is not None:  # every request checked before it is served (remoting invariant 9)
            server.set_access_check(self.access_validator.check)
        # the sends read from one chunk are handled together: consecutive single sends stored with one put
        server.register_batch(
            SendMessageProcessor.batch_codes,
            self.send_message_processor.process_batch,
            inline=int(RequestCode.SEND_MESSAGE) in inline,
        )
        # and so are the pulls, each as alone (its answer, or parked), SERVE_BUDGET of them a run at most (their
        # answers are large: remoting invariant 5): more connections, fewer pulls a chunk, must not cost more a pull
        server.register_batch(
            (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE),
            self.pull_message_processor.process_batch,
            inline=True,
            max_run=SERVE_BUDGET,
        )

    def _build_transaction_components(self) -> None:
        """Transactional messages: the half/op queue bridge, END_TRANSACTION, the check-back service."""
        cfg = self.broker_config
        bridge = TransactionalMessageBridge(
            self.message_store, self.topic_config_manager, self.consumer_offset_manager, self.store_host
        )
        self.transactional_message_service = TransactionalMessageService(bridge, cfg.file_reserved_time)
        self.transactional_message_check_listener = TransactionalMessageCheckListener(
            self.producer_manager, self.topic_config_manager, bridge
        )
        self.transactional_message_check_service = TransactionalMessageCheckService(
            cfg, self.transactional_message_service, self.transactional_message_check_listener
        )
        self.end_transaction_processor = EndTransactionProcessor(
            cfg,
            self.transactional_message_service,
            bridge,
            self.schedule_message_service,
            self.broker_stats_manager,
            self.message_store_config.max_message_size,
            self.inner_put_guard,
        )

    # --- facts processors rely on ---------------------------------------------------------------------------
    @property
    def broker_addr(self) -> str:
        return f"{self.broker_config.broker_ip1}:{self.remoting_server.port}"

    @property
    def is_slave(self) -> bool:
        return self.broker_config.is_slave

    @staticmethod
    def now_ms() -> int:
        return time.time_ns() // 1_000_000

    def namesrv_addrs(self) -> list[str]:
        raw = self.broker_config.namesrv_addr or ""
        return [a.strip() for a in raw.split(";") if a.strip()]

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        keep_freed_heap()  # a run of pull answers freed together is reused, not given back and faulted in again
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(self._start_on_loop())
            except BaseException as e:  # report to the caller of start(), once everything started is stopped
                failure.append(e)
                try:
                    self._close_after_failed_start()
                finally:
                    ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self.loop.close()

        self._thread = threading.Thread(target=run, name=f"rmq-broker-{self.broker_config.broker_name}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        self._started = True

    async def _start_on_loop(self) -> None:
        cfg = self.broker_config
        # access control first: a configuration asking for what cannot be enforced stops the start here
        build_access_validator(cfg)
        await self.remoting_server.start(start_serving=False)
        self.store_host = (cfg.broker_ip1, self.remoting_server.port)
        store_config = self._store_config_override or cfg.to_store_config()
        store_config.store_host = self.store_host
        self.message_store_config = store_config
        self.message_store = MessageStore(cfg.store_path_root_dir, store_config)
        self.configuration.store_config = store_config  # retention keys updated remotely reach the clean service
        # retention and the disk check (4.9 DefaultMessageStore#start's scheduled tasks; store_clean_service.py)
        self.message_store.clean_service.start()
        for manager in (
            self.topic_config_manager,
            self.subscription_group_manager,
            self.consumer_offset_manager,
            self.consumer_filter_manager,
            self.consumer_order_info_manager,
            self.message_request_mode_manager,
            self.configuration,  # UPDATE_BROKER_CONFIG's persisted updates, over the given config
        ):
            manager.load()
        # decided again over the persisted updates (aclEnable / aclFile / 5.x auth keys set remotely before a
        # restart apply now, before anything is served: never a config saying ACL while the broker serves without)
        self.access_validator = build_access_validator(cfg)
        self.topic_config_manager.adopt_store_topics(self.message_store.topics())
        if cfg.timer_wheel_enable and not self.is_slave:  # opened (and checked) before any service starts
            self.timer_message_store = TimerMessageStore.open(
                cfg, self.message_store, self.broker_stats_manager, self.inner_put_guard
            )
        self.pull_request_hold_service = PullRequestHoldService(
            cfg,
            self.message_store,
            self.loop,
            lambda conn, request: self.pull_message_processor.run_request_when_wakeup(conn, request),
            self.remoting_server,
        )
        self._register_processors()
        if self.message_store.recovery_report.get("abnormal") and self.timer_message_store is not None:
            self._recover_pop_offsets()
        self.pop_service.inflight.restore(
            self._pop_inflight_path(), trusted=not self.message_store.recovery_report.get("abnormal")
        )
        self.transactional_message_service.load()
        hold = self.pull_request_hold_service
        # asked once per put: with no pull parked anywhere the sends of a chunk skip the hold service altogether
        self.message_store.add_arrival_listener(self._on_message_arriving, active=lambda: bool(hold.pull_request_table))
        await self.replication.start()
        self.remoting_server.on_close.append(self._on_channel_close)
        self.pull_request_hold_service.start()
        if not self.is_slave:  # 4.9 handleScheduleMessageService: a slave delivers nothing (its store takes no puts)
            self.schedule_message_service.start(self.message_store)
        if not cfg.is_slave:
            self.transactional_message_check_service.start(self.loop)
        if self.timer_message_store is not None:
            self.timer_message_store.start()
            self.pop_revive_service = PopReviveService(self.pop_service, self.inner_put_guard)
            self.pop_revive_service.start()
        await self.remoting_server.begin_serving()
        if cfg.grpc_port >= 0:
            await self._start_grpc()
        interval = cfg.flush_consumer_offset_interval / 1000.0
        self._every(interval, self._persist_all, "persist configs", first_delay=interval)
        self._every(SCAN_NOT_ACTIVE_CHANNEL_INTERVAL_S, self._scan_not_active_channels, "scan channels")
        self._every(1.0, lambda: self.broker_runtime_stats.sample(self.now_ms()), "sample runtime stats", 0.0)
        if cfg.metrics_prom_exporter_port >= 0:
            self.broker_metrics = BrokerMetrics(
                cfg,
                self.message_store,
                self.broker_stats_manager,
                self.topic_config_manager,
                self.subscription_group_manager,
                self.consumer_offset_manager,
                self.consumer_manager,
                self.producer_manager,
                self._call_on_loop,
            )
            self.broker_metrics.start(cfg.broker_ip1, cfg.metrics_prom_exporter_port)
        if self.namesrv_addrs():
            # 4.9 BrokerController#start registers once before it returns, then every registerNameServerPeriod: a
            # slave started right after its master learns the master from its first registration
            try:
                await self._register_broker_all_now()
            except Exception:
                log.exception("registering with the name servers failed")
            self._every(cfg.register_name_server_period / 1000.0, self._register_broker_all_now, "register broker")
        log.info(
            "broker %s (%s) serving at %s, store %s",
            cfg.broker_name,
            cfg.broker_cluster_name,
            self.broker_addr,
            cfg.store_path_root_dir,
        )

    def _recover_pop_offsets(self) -> None:
        """After a crash the offsets file can be up to ``flushConsumerOffsetInterval`` old: the pops since then are
        read back from their checkpoints (broker/pop/), so what was popped is redelivered by the revive service
        only, not popped again as new."""
        path = self.consumer_offset_manager.config_file_path
        try:
            since = int(os.path.getmtime(path) * 1000) - 10_000
        except OSError:
            since = 0
        self.pop_service.recover_offsets(since)

    async def _start_grpc(self) -> None:
        """The gRPC endpoint (imported here: a broker without ``grpc_port`` needs no grpcio)."""
        from rmq_core.broker.grpc import require_grpc

        require_grpc()
        from rmq_core.broker.grpc.grpc_server import GrpcServer

        server = GrpcServer(self)
        await server.start(self.broker_config.broker_ip1, self.broker_config.grpc_port)
        self.grpc_server = server

    @property
    def grpc_address(self) -> str | None:
        """``ip:port`` of the gRPC endpoint, None without one."""
        server = self.grpc_server
        return None if server is None else f"{self.broker_config.broker_ip1}:{server.port}"

    def _close_after_failed_start(self) -> None:
        """Stop whatever ``_start_on_loop`` got to before it failed (each step is safe on a part never started)."""
        grpc_server = self.grpc_server
        steps: list[tuple[str, Callable[[], object]]] = [
            ("the gRPC server", lambda: grpc_server is not None and self.loop.run_until_complete(grpc_server.stop())),
            ("the remoting server", lambda: self.loop.run_until_complete(self.remoting_server.stop())),
            ("replication", lambda: self.loop.run_until_complete(self.replication.shutdown())),
            ("the remoting client", lambda: self.loop.run_until_complete(self.remoting_client.close())),
        ]
        hold: PullRequestHoldService | None = getattr(self, "pull_request_hold_service", None)
        if hold is not None:
            steps.append(("the hold service", hold.shutdown))
        steps.append(("the schedule service", self.schedule_message_service.shutdown))
        check = getattr(self, "transactional_message_check_service", None)  # made once the store opened
        if check is not None:
            steps.append(("the transaction check", lambda: self.loop.run_until_complete(check.shutdown())))
        revive = self.pop_revive_service
        if revive is not None:
            steps.append(("the POP revive service", lambda: self.loop.run_until_complete(revive.stop())))
        timer = self.timer_message_store
        if timer is not None:
            steps.append(("the timer store", lambda: self.loop.run_until_complete(timer.shutdown())))
        if self.message_store is not None:
            steps.append(("the message store", self.message_store.close))
        for what, step in steps:
            try:
                step()
            except Exception:
                log.exception("stopping %s after a failed start", what)
        self.loop.close()

    def _on_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None, properties: Mapping[str, str] | None
    ) -> None:
        self.pull_request_hold_service.notify_message_arriving(
            topic, queue_id, max_offset, tags_code, properties=properties
        )

    def _on_channel_close(self, conn: Any) -> None:
        """A client's connection closed: its consumer/producer registrations go (CHANGE → notify the group)."""
        self.consumer_manager.do_channel_close_event(conn)
        self.producer_manager.do_channel_close_event(conn)

    def _every(
        self,
        interval_s: float,
        fn: Callable[[], Coroutine[Any, Any, None] | None],
        what: str,
        first_delay: float | None = None,
    ) -> None:
        async def loop_task() -> None:
            await asyncio.sleep(interval_s if first_delay is None else first_delay)
            while True:
                try:
                    r = fn()
                    if asyncio.iscoroutine(r):
                        await r
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("periodic task '%s' failed", what)
                await asyncio.sleep(interval_s)

        self._tasks.append(self.loop.create_task(loop_task(), name=what))

    def _pop_inflight_path(self) -> str:
        return os.path.join(self.broker_config.store_config_dir, POP_INFLIGHT_FILE)

    def _persist_all(self) -> None:
        for manager in (
            self.consumer_offset_manager,
            self.topic_config_manager,
            self.subscription_group_manager,
            self.consumer_filter_manager,
            self.consumer_order_info_manager,
            self.schedule_message_service,
        ):
            try:
                manager.persist()
            except Exception:  # invariant 2
                log.exception("persisting %s failed", type(manager).__name__)

    def _scan_not_active_channels(self) -> None:
        now = self.now_ms()
        self.consumer_manager.scan_not_active_channel(now)
        self.consumer_manager.remove_expire_consumer_group_info(now)
        self.producer_manager.scan_not_active_channel(now)

    def register_broker_all(self) -> None:
        """Register with the name servers soon (coalesced); safe from the loop or any thread."""
        if not self.namesrv_addrs() or self._stopped:
            return

        def schedule() -> None:
            if self._register_pending:
                return
            self._register_pending = True
            self.loop.create_task(self._register_broker_all_now())

        if self._on_loop():
            schedule()
        else:
            self.loop.call_soon_threadsafe(schedule)

    async def _register_broker_all_now(self) -> None:
        self._register_pending = False
        cfg = self.broker_config
        wrapper = self.topic_config_manager.build_serialize_wrapper()
        perm = cfg.broker_permission
        if not (perm & PERM_READ and perm & PERM_WRITE):  # BrokerController#registerBrokerAll: the broker's perm wins
            for topic_config in wrapper["topicConfigTable"].values():
                topic_config["perm"] = perm
        results = await self.broker_outer_api.register_broker_all(
            self.namesrv_addrs(),
            cfg.broker_cluster_name,
            self.broker_addr,
            cfg.broker_name,
            cfg.broker_id,
            self.replication.ha_server_addr(),
            wrapper,
            [],
            cfg.register_broker_timeout_mills / 1000.0,
        )
        if results:  # a slave learns its master from the first name server's answer (4.9 registerBrokerAll)
            result = results[0]
            if self.is_slave and result.master_addr != self.master_addr:
                # None while the name server has no master of this broker name: SlaveSynchronize pauses (4.9
                # setMasterAddr(null)); the HA client keeps its last address and retries it
                log.info("broker %s (slave %d): master is %s", cfg.broker_name, cfg.broker_id, result.master_addr)
                self.master_addr = result.master_addr
            self.replication.on_register_result(result.ha_server_addr, result.master_addr)

    def _call_on_loop(self, fn: Callable[[], MetricsSnapshot]) -> MetricsSnapshot:
        """Run ``fn`` on the broker's loop from another thread (the metrics scrape) and return its result."""

        async def run() -> MetricsSnapshot:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    @property
    def metrics_address(self) -> str | None:
        """``host:port`` of the Prometheus endpoint, None when it is off."""
        metrics = self.broker_metrics
        return f"{self.broker_config.broker_ip1}:{metrics.port}" if metrics is not None else None

    def _on_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def shutdown(self) -> None:
        with self._shutdown_lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
        if self._on_loop():
            raise RuntimeError("shutdown() must not be called from the broker's own loop")
        fut = asyncio.run_coroutine_threadsafe(self._shutdown_on_loop(), self.loop)
        try:
            fut.result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            if self._thread is not None:
                self._thread.join(10)

    async def _shutdown_on_loop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.broker_metrics is not None:
            self.broker_metrics.stop()
        self.pull_request_hold_service.shutdown()
        self.schedule_message_service.shutdown()
        await self.transactional_message_check_service.shutdown()
        if self.pop_revive_service is not None:
            await self.pop_revive_service.stop()
        if self.timer_message_store is not None:
            await self.timer_message_store.shutdown()
        if self.namesrv_addrs():
            cfg = self.broker_config
            try:
                await self.broker_outer_api.unregister_broker_all(
                    self.namesrv_addrs(),
                    cfg.broker_cluster_name,
                    self.broker_addr,
                    cfg.broker_name,
                    cfg.broker_id,
                    cfg.register_broker_timeout_mills / 1000.0,
                )
            except Exception:
                log.exception("unregistering from the name servers failed")
        if self.grpc_server is not None:
            await self.grpc_server.stop()
        await self.remoting_server.stop()
        await self.replication.shutdown()
        await self.remoting_client.close()
        self._persist_all()
        try:
            self.pop_service.inflight.save(self._pop_inflight_path())
        except OSError:
            log.exception("saving the POP in-flight counts failed")
        self.group_commit_service.close()
        self.message_store.flush()
        self.message_store.close()
        # nothing may be left pending when the loop stops (e.g. a notification still being written)
        pending = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        log.info("broker %s shut down", self.broker_config.broker_name)


class Broker:
    """``Broker(BrokerConfig(...))``: ``start()`` serves on a background thread and returns once listening;
    ``address`` is ``"ip:port"``; ``shutdown()`` flushes the store and the configs. A context manager."""

    def __init__(self, config: BrokerConfig | None = None, store_config: StoreConfig | None = None) -> None:
        self.config = config or BrokerConfig()
        self.controller = BrokerController(self.config, store_config)

    def start(self) -> Broker:
        self.controller.start()
        return self

    @property
    def address(self) -> str:
        return self.controller.broker_addr

    @property
    def message_store(self) -> MessageStore:
        return self.controller.message_store

    def shutdown(self) -> None:
        self.controller.shutdown()

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
