"""MQClientInstance (4.9 ``org.apache.rocketmq.client.impl.factory.MQClientInstance``): the one client per client id
that the producers and consumers of a process share.

Owns the event loop all network I/O runs on (a daemon thread ``rmq-client-<client_id>``, or the caller's loop for
``rmq_core.aio``), the ``MQClientAPIImpl``, the pull and rebalance services, the inner producer, the route tables
and the scheduled tasks (route refresh, clean offline brokers + heartbeat, persist consumer offsets).
Invariants: 1. the route tables are written on the loop only and published whenever they change or are asked for;
2. at most one producer and one consumer per group; ``shutdown()`` does nothing while one is registered;
3. ``run_sync`` refuses the loop thread; handed-over coroutines and jobs start in submission order, one wake-up per
burst; 4. an unknown topic gets TBW102's route for a producer (queues capped at ``default_topic_queue_nums``).
Thread-safety: registration tables under a lock; everything else on the loop; blocking calls go through
``run_sync`` from other threads.
Details (the invariants in full, the parts and the acyclic imports): docs/CLIENT_DESIGN.md, 'Client instance'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, cast

from rmq_core.client.client_config import ClientConfig
from rmq_core.client.client_inner_producer import ClientInnerProducer
from rmq_core.client.client_remoting_processor import ClientRemotingProcessor
from rmq_core.client.exceptions import MQBrokerException, MQClientException, RemotingError, RemotingTimeoutError
from rmq_core.client.mq_client_api import MQClientAPIImpl
from rmq_core.client.pull_message_service import PullMessageService
from rmq_core.client.rebalance_service import RebalanceService
from rmq_core.client.topic_publish_info import TopicPublishInfo
from rmq_core.common import mix_all
from rmq_core.common.light_future import LightFuture
from rmq_core.common.mix_all import MASTER_ID
from rmq_core.common.mq_version import version_desc
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.filter.message_selector import ExpressionType
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.body.consumer_running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_NAMESERVER_ADDR,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rmq_core.remoting.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
)
from rmq_core.remoting.body.route import TopicRouteData
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import DEFAULT_VERSION
from rmq_core.remoting.event_loop import new_event_loop
from rmq_core.remoting.remoting_client import RemotingClient

log = logging.getLogger(__name__)

T = TypeVar("T")

LOCK_TIMEOUT_S = 3.0


CREATE_JUST, RUNNING, SHUTDOWN_ALREADY, START_FAILED = "CREATE_JUST", "RUNNING", "SHUTDOWN_ALREADY", "START_FAILED"


class MQConsumerInner(Protocol):
    """What a consumer registered with the instance offers (docs/CLIENT_DESIGN.md)."""

    group_name: str
    message_model: MessageModel
    consume_type: ConsumeType | str
    consume_from_where: ConsumeFromWhere

    def subscriptions(self) -> list[SubscriptionData]: ...
    def do_rebalance(self) -> Any: ...
    def persist_consumer_offset(self) -> Any: ...
    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...
    def is_subscribe_topic_need_update(self, topic: str) -> bool: ...
    def is_unit_mode(self) -> bool: ...


class LoopJob(Protocol):
    """Work handed to the loop with ``MQClientInstance.submit_job``."""

    def run(self) -> None: ...
    def fail(self, error: BaseException) -> None: ...


class MQProducerInner(Protocol):
    group: str

    def get_publish_topic_list(self) -> list[str]: ...
    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...
    def is_publish_topic_need_update(self, topic: str) -> bool: ...


@dataclass
class FindBrokerResult:
    broker_addr: str
    slave: bool
    broker_version: int = 0


def _sorted_route(route: TopicRouteData) -> TopicRouteData:
    r = copy.deepcopy(route)
    r.queue_datas.sort(key=lambda q: q.broker_name)
    r.broker_datas.sort(key=lambda b: b.broker_name)
    return r


def topic_route_data_is_change(old: TopicRouteData | None, new: TopicRouteData | None) -> bool:
    if old is None or new is None:
        return True
    return _sorted_route(old) != _sorted_route(new)


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class MQClientInstance:
    # resetOffset's wait between dropping the process queues and moving the offsets (4.9 sleeps 10 s): pulls and
    # listener calls in flight see the drop and commit nothing (both check ``dropped`` before they touch offsets)
    RESET_OFFSET_SETTLE_S: ClassVar[float] = 1.0

    def __init__(
        self,
        client_config: ClientConfig,
        instance_index: int = 0,
        client_id: str | None = None,
        on_shutdown: Callable[[MQClientInstance], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.client_config = client_config
        self.instance_index = instance_index
        self.client_id = client_id or client_config.build_mq_client_id()
        self._on_shutdown = on_shutdown  # the MQClientManager forgets the instance (remove_client_factory)
        self.boot_timestamp = int(time.time() * 1000)
        # the caller's loop (rmq_core.aio: no thread of ours) or a loop of our own run on a daemon thread
        self.on_caller_loop = loop is not None
        self.loop = loop if loop is not None else new_event_loop()
        self.remoting_client = RemotingClient(request_handler=ClientRemotingProcessor(self).process_request)
        self.mq_client_api = MQClientAPIImpl(self.remoting_client, client_config)
        self.producer_table: dict[str, Any] = {}
        self.consumer_table: dict[str, Any] = {}
        self.topic_route_table: dict[str, TopicRouteData] = {}
        # why the last route lookup got no answer from a name server (None once one answered): the producer's
        # "No route info" names it, as the name server is what failed
        self.namesrv_error: str | None = None
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, dict[str, int]] = {}
        self.pull_message_service: Any = None
        self.rebalance_service: Any = None
        self.default_mq_producer: ClientInnerProducer | None = None
        self.service_state = CREATE_JUST
        self._state_lock = threading.RLock()
        self._table_lock = threading.Lock()
        self._lock_namesrv = asyncio.Lock()
        self._lock_heartbeat = asyncio.Lock()
        self._thread: threading.Thread | None = None
        self._loop_thread_id: int | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.heartbeat_count = 0
        self._submit_lock = threading.Lock()
        # coroutines with their futures, and LoopJobs (future None), in submission order
        self._submitted: list[tuple[Coroutine[Any, Any, Any] | LoopJob, concurrent.futures.Future[Any] | None]] = []
        self._drain_scheduled = False

    # --- loop plumbing -----------------------------------------------------------------------------------------
    def _run_loop(self) -> None:
        self._loop_thread_id = threading.get_ident()
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread_id

    def _check_caller_loop(self) -> None:
        """An instance on the caller's loop is used from that loop only (await its methods there)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            raise RuntimeError(f"the client instance {self.client_id} runs on another event loop than the caller's")

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the instance loop and block for its result (RemotingTimeoutError after ``timeout_s``)."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError(
                "MQClientInstance.run_sync called on the client's event-loop thread: a blocking "
                "client call (send, pull, ...) must not be made from a callback running on the loop"
            )
        if self._thread is None or self.loop.is_closed():
            coro.close()
            raise MQClientException.of(
                f"The client instance {self.client_id} is not running (state {self.service_state})"
            )
        fut = self._submit(coro)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            if fut.done() and fut.exception() is not None:
                raise
            fut.cancel()
            raise RemotingTimeoutError(None, (timeout_s or 0) * 1000) from None

    def run_async(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the instance loop from any thread; its result as a concurrent Future."""
        if self._thread is None or self.loop.is_closed():
            coro.close()
            raise MQClientException.of(f"The client instance {self.client_id} is not running")
        return self._submit(coro)

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """``asyncio.run_coroutine_threadsafe`` for many submitters: the coroutine is queued and the loop woken only
        when no wake-up is pending, so a burst of sends costs one ``call_soon_threadsafe`` (one self-pipe write);
        cancelling the returned future cancels the task, as with ``run_coroutine_threadsafe``."""
        cfut: concurrent.futures.Future[T] = LightFuture()
        self._enqueue(coro, cfut)
        return cfut

    def submit_job(self, job: LoopJob) -> None:
        """Run ``job.run()`` on the loop, in order with the coroutines handed over (``run_sync``, ``run_async``) and
        woken as they are (invariant 3); ``job.fail(error)`` instead when the loop is gone. From any thread but the
        loop's own it costs no task: the producer's send fast path starts its requests this way."""
        if self._thread is None or self.loop.is_closed():
            raise MQClientException.of(f"The client instance {self.client_id} is not running")
        self._enqueue(job, None)

    def _enqueue(self, item: Coroutine[Any, Any, Any] | LoopJob, cfut: concurrent.futures.Future[Any] | None) -> None:
        with self._submit_lock:
            self._submitted.append((item, cfut))
            wake = not self._drain_scheduled
            self._drain_scheduled = True
        if wake:
            try:
                self.loop.call_soon_threadsafe(self._start_submitted)
            except RuntimeError as e:  # the loop closed meanwhile: nothing will run what is queued
                self._fail_submitted(e)

    def _fail_submitted(self, error: BaseException) -> None:
        with self._submit_lock:
            items, self._submitted = self._submitted, []
            self._drain_scheduled = False
        for item, cfut in items:
            if cfut is None:
                cast(LoopJob, item).fail(error)
                continue
            cast(Coroutine[Any, Any, Any], item).close()
            if cfut.set_running_or_notify_cancel():
                cfut.set_exception(error)

    def _start_submitted(self) -> None:
        """On the loop: a task for each queued coroutine, in submission order, its outcome copied to its future;
        each queued job run in its turn."""
        with self._submit_lock:
            items, self._submitted = self._submitted, []
            self._drain_scheduled = False
        for item, cfut in items:
            if cfut is None:
                try:
                    item.run()  # type: ignore[union-attr]  # a LoopJob (no cast() call per job)
                except Exception:
                    log.exception("a job handed to the client loop raised")
                continue
            coro = cast(Coroutine[Any, Any, Any], item)
            if cfut.cancelled():
                coro.close()
                continue
            self.start_task(coro, cfut)

    def start_task(self, coro: Coroutine[Any, Any, T], cfut: concurrent.futures.Future[T]) -> None:
        """On the loop: ``coro`` as a task whose outcome goes to ``cfut`` (cancelling ``cfut`` cancels the task)."""
        loop = self.loop
        task = loop.create_task(coro)
        task.add_done_callback(functools.partial(_copy_outcome, cfut))
        cfut.add_done_callback(functools.partial(_cancel_task_on_cancel, loop, task))

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the loop: now when on the loop thread, else as soon as the loop gets to it."""
        if self.in_loop_thread():
            fn()
        elif self._thread is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        task = self.loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self.on_caller_loop:
            raise RuntimeError(f"the client instance {self.client_id} runs on the caller's loop: await start_async()")
        with self._state_lock:
            if self.service_state == RUNNING:
                return
            if self.service_state != CREATE_JUST:
                raise MQClientException.of(f"The Factory object[{self.client_id}] has been created before, and failed.")
            self._thread = threading.Thread(target=self._run_loop, name=f"rmq-client-{self.client_id}", daemon=True)
            self._thread.start()
            self.service_state = RUNNING
            try:
                self.run_sync(self._start_async(), 30.0)
            except BaseException:
                self.service_state = START_FAILED
                self._stop_loop()
                raise
            self._start_inner_producer()

    async def start_async(self) -> None:
        """Start on the caller's loop (an instance made with ``loop=``): the same services and scheduled tasks as
        ``start()``, as tasks of that loop. Idempotent."""
        if not self.on_caller_loop:
            raise RuntimeError(f"the client instance {self.client_id} has a loop thread of its own: call start()")
        self._check_caller_loop()
        if self.service_state == RUNNING:
            return
        if self.service_state != CREATE_JUST:
            raise MQClientException.of(f"The Factory object[{self.client_id}] has been created before, and failed.")
        self._loop_thread_id = threading.get_ident()
        self.service_state = RUNNING
        try:
            await self._start_async()
        except BaseException:
            self.service_state = START_FAILED
            await self._shutdown_async()
            raise
        self._start_inner_producer()

    async def _start_async(self) -> None:
        if self.pull_message_service is None:
            self.pull_message_service = PullMessageService(self)
        if self.rebalance_service is None:
            self.rebalance_service = RebalanceService(self)
        for svc in (self.pull_message_service, self.rebalance_service):
            if svc is not None:
                await _maybe_await(svc.start())
        self._start_scheduled_task()

    def _start_inner_producer(self) -> None:
        """The instance's own producer registration (CLIENT_INNER_PRODUCER): heartbeats name it."""
        producer = ClientInnerProducer(mix_all.CLIENT_INNER_PRODUCER_GROUP)
        producer.start_with_instance(self)
        self.default_mq_producer = producer

    def _start_scheduled_task(self) -> None:
        cfg = self.client_config
        self.spawn(
            self._periodic(
                10, lambda: cfg.poll_name_server_interval, self.update_topic_route_info_from_name_server_all
            ),
            "route-refresh",
        )
        self.spawn(self._periodic(1000, lambda: cfg.heartbeat_broker_interval, self._clean_and_heartbeat), "heartbeat")
        self.spawn(
            self._periodic(10000, lambda: cfg.persist_consumer_offset_interval, self.persist_all_consumer_offset),
            "persist-offsets",
        )

    async def _periodic(
        self, initial_delay_ms: int, period_ms: Callable[[], int], fn: Callable[[], Awaitable[Any]]
    ) -> None:
        await asyncio.sleep(initial_delay_ms / 1000)
        task = asyncio.current_task()
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduled task %s failed", getattr(fn, "__name__", fn))
            if task is not None and task.cancelling():
                # a cancel that landed as fn's await completed (3.11's wait_for may swallow it): honour it
                raise asyncio.CancelledError
            await asyncio.sleep(max(period_ms(), 10) / 1000)

    async def _clean_and_heartbeat(self) -> None:
        self.clean_offline_broker()
        await self.send_heartbeat_to_all_broker_with_lock()

    def shutdown(self) -> None:
        """Stops the instance once no consumer and no producer (other than the inner one) is registered."""
        with self._state_lock:
            if self.consumer_table:
                return
            if any(g != mix_all.CLIENT_INNER_PRODUCER_GROUP for g in self.producer_table):
                return
            if self.service_state != RUNNING:
                return
            if self.in_loop_thread():
                raise RuntimeError("MQClientInstance.shutdown must not be called on the client's loop thread")
            if self.default_mq_producer is not None:
                self.default_mq_producer.shutdown_with_instance()
            try:
                self.run_sync(self._shutdown_async(), 15.0)
            except Exception:
                log.exception("client instance %s shutdown failed", self.client_id)
            self.service_state = SHUTDOWN_ALREADY
            self._stop_loop()
        if self._on_shutdown is not None:
            self._on_shutdown(self)

    async def shutdown_async(self) -> None:
        """``shutdown()`` for an instance on the caller's loop: once no consumer and no producer (other than the
        inner one) is registered, stop the services and cancel and await every task of the instance."""
        self._check_caller_loop()
        if self.consumer_table or any(g != mix_all.CLIENT_INNER_PRODUCER_GROUP for g in self.producer_table):
            return
        if self.service_state != RUNNING:
            return
        self.service_state = SHUTDOWN_ALREADY
        if self.default_mq_producer is not None:
            self.default_mq_producer.shutdown_with_instance()
        try:
            await self._shutdown_async()
        finally:
            if self._on_shutdown is not None:
                self._on_shutdown(self)

    async def _shutdown_async(self) -> None:
        await self.persist_all_consumer_offset()
        for svc in (self.pull_message_service, self.rebalance_service):
            if svc is not None:
                try:
                    stop = getattr(svc, "shutdown_async", None) or svc.shutdown
                    await _maybe_await(stop())
                except Exception:
                    log.exception("service shutdown failed")
        await cancel_and_wait(list(self._tasks))
        await self.mq_client_api.close()
        await asyncio.sleep(0)

    def _stop_loop(self) -> None:
        if self._thread is None:
            return

        async def drain() -> None:
            pending = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(drain(), self.loop).result(5.0)
        except Exception:
            log.exception("draining client loop failed")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        self._thread = None
        self.loop.close()

    # --- registration ------------------------------------------------------------------------------------------
    def register_consumer(self, group: str, consumer: Any) -> bool:
        if not group or consumer is None:
            return False
        with self._table_lock:
            if group in self.consumer_table:
                log.warning("the consumer group[%s] exist already.", group)
                return False
            self.consumer_table[group] = consumer
        return True

    def unregister_consumer(self, group: str) -> None:
        with self._table_lock:
            self.consumer_table.pop(group, None)
        self._unregister_client_with_lock(None, group)

    async def unregister_consumer_async(self, group: str) -> None:
        """unregister_consumer on the instance's loop, awaiting the UNREGISTER_CLIENT requests."""
        with self._table_lock:
            self.consumer_table.pop(group, None)
        if self.service_state == RUNNING:
            await self._unregister_client(None, group)

    async def unregister_producer_async(self, group: str) -> None:
        with self._table_lock:
            self.producer_table.pop(group, None)
        if self.service_state == RUNNING:
            await self._unregister_client(group, None)

    def register_producer(self, group: str, producer: Any) -> bool:
        if not group or producer is None:
            return False
        with self._table_lock:
            if group in self.producer_table:
                log.warning("the producer group[%s] exist already.", group)
                return False
            self.producer_table[group] = producer
        return True

    def unregister_producer(self, group: str) -> None:
        with self._table_lock:
            self.producer_table.pop(group, None)
        self._unregister_client_with_lock(group, None)

    def select_consumer(self, group: str) -> Any:
        return self.consumer_table.get(group)

    def select_producer(self, group: str) -> Any:
        return self.producer_table.get(group)

    def _unregister_client_with_lock(self, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT to every known broker (blocking when called off the loop, a task when on it)."""
        if self.service_state != RUNNING or (self._thread is None and not self.on_caller_loop):
            return
        coro = self._unregister_client(producer_group, consumer_group)
        if self.in_loop_thread():
            self.spawn(coro, "unregister-client")
            return
        try:
            self.run_sync(coro, self.client_config.mq_client_api_timeout / 1000 * 2 + 1)
        except Exception as e:
            log.warning("unregister client %s failed: %s", self.client_id, e)

    async def _unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        async with self._lock_heartbeat:
            for broker_name, addrs in list(self.broker_addr_table.items()):
                for _bid, addr in list(addrs.items()):
                    try:
                        await self.mq_client_api.unregister_client(
                            addr,
                            self.client_id,
                            producer_group,
                            consumer_group,
                            self.client_config.mq_client_api_timeout,
                        )
                        log.info(
                            "unregister client[Producer: %s Consumer: %s] from broker[%s %s] success",
                            producer_group,
                            consumer_group,
                            broker_name,
                            addr,
                        )
                    except (RemotingError, MQBrokerException, MQClientException) as e:
                        log.warning("unregister client from broker %s failed: %s", addr, e)

    # --- routes ------------------------------------------------------------------------------------------------
    async def update_topic_route_info_from_name_server_all(self) -> None:
        topics: set[str] = set()
        for consumer in list(self.consumer_table.values()):
            try:
                topics.update(s.topic for s in consumer.subscriptions())
            except Exception:
                log.exception("reading subscriptions of a consumer failed")
        for producer in list(self.producer_table.values()):
            topics.update(producer.get_publish_topic_list())
        for topic in topics:
            await self.update_topic_route_info_from_name_server(topic)

    async def update_topic_route_info_from_name_server(
        self, topic: str, is_default: bool = False, producer: Any = None
    ) -> bool:
        try:
            await asyncio.wait_for(self._lock_namesrv.acquire(), LOCK_TIMEOUT_S)
        except TimeoutError:
            log.warning("updateTopicRouteInfoFromNameServer tryLock timeout %dms", int(LOCK_TIMEOUT_S * 1000))
            return False
        try:
            timeout = self.client_config.mq_client_api_timeout
            if is_default and producer is not None:
                route = await self.mq_client_api.get_default_topic_route_info_from_name_server(
                    mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC, timeout
                )
                for qd in route.queue_datas:
                    n = min(producer.default_topic_queue_nums, qd.read_queue_nums)
                    qd.read_queue_nums = n
                    qd.write_queue_nums = n
            else:
                route = await self.mq_client_api.get_topic_route_info_from_name_server(topic, timeout)
            self.namesrv_error = None
            old = self.topic_route_table.get(topic)
            changed = topic_route_data_is_change(old, route)
            if not changed:
                changed = self._is_need_update_topic_route_info(topic)
            else:
                log.info("the topic[%s] route info changed, old[%s] ,new[%s]", topic, old, route)
            if changed:
                for bd in route.broker_datas:
                    self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
                if self.producer_table:
                    info = TopicPublishInfo.from_route(topic, route)
                    info.have_topic_router_info = True
                    for p in list(self.producer_table.values()):
                        p.update_topic_publish_info(topic, info)
                if self.consumer_table:
                    sub = route.subscribe_message_queues(topic)
                    for c in list(self.consumer_table.values()):
                        try:
                            c.update_topic_subscribe_info(topic, sub)
                        except Exception:
                            log.exception("updating subscribe info of %s failed", topic)
                self.topic_route_table[topic] = copy.deepcopy(route)
            return True
        except MQClientException as e:
            self.namesrv_error = None
            # a topic the name server does not know yet (a new topic before its first send creates it, a group's
            # retry topic before anything is retried) is first use, not a problem
            first_use = e.response_code == ResponseCode.TOPIC_NOT_EXIST
            if not mix_all.is_retry_topic(topic) and topic != mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC:
                log.log(
                    logging.DEBUG if first_use else logging.WARNING,
                    "updateTopicRouteInfoFromNameServer Exception: %s",
                    e,
                )
            return False
        except (RemotingError, ValueError) as e:
            where = self.client_config.namesrv_addr or "-"
            self.namesrv_error = f"name server {where}: {e}"
            log.warning("updateTopicRouteInfoFromNameServer Exception: %s", e)
            return False
        finally:
            self._lock_namesrv.release()

    def _is_need_update_topic_route_info(self, topic: str) -> bool:
        for p in list(self.producer_table.values()):
            if p.is_publish_topic_need_update(topic):
                return True
        for c in list(self.consumer_table.values()):
            try:
                if c.is_subscribe_topic_need_update(topic):
                    return True
            except Exception:
                log.exception("is_subscribe_topic_need_update failed")
        return False

    def clean_offline_broker(self) -> None:
        for name, addrs in list(self.broker_addr_table.items()):
            live = {bid: a for bid, a in addrs.items() if self._is_broker_addr_exist_in_topic_route_table(a)}
            if len(live) != len(addrs):
                log.info("the broker addr[%s] is offline, remove it", set(addrs.values()) - set(live.values()))
            if live:
                self.broker_addr_table[name] = live
            else:
                self.broker_addr_table.pop(name, None)
                log.info("the broker[%s] name's host is offline, remove it", name)

    def _is_broker_addr_exist_in_topic_route_table(self, addr: str) -> bool:
        for route in list(self.topic_route_table.values()):
            for bd in route.broker_datas:
                if addr in bd.broker_addrs.values():
                    return True
        return False

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        addrs = self.broker_addr_table.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int, only_this_broker: bool
    ) -> FindBrokerResult | None:
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MASTER_ID
        found = addr is not None
        if not found and slave:
            addr = addrs.get(broker_id + 1)
            found = addr is not None
        if not found and not only_this_broker:  # any broker of the name: 4.9 takes its HashMap's first, the lowest id
            bid = min(addrs)
            addr = addrs[bid]
            slave = bid != MASTER_ID
            found = True
        if not found or addr is None:
            return None
        return FindBrokerResult(addr, slave, self.find_broker_version(broker_name, addr))

    def find_broker_address_in_admin(self, broker_name: str) -> FindBrokerResult | None:
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        bid = min(addrs)  # the master when there is one, else the lowest slave id (4.9's HashMap order)
        addr = addrs[bid]
        return FindBrokerResult(addr, bid != MASTER_ID, self.find_broker_version(broker_name, addr))

    def find_broker_version(self, broker_name: str, addr: str) -> int:
        return self.broker_version_table.get(broker_name, {}).get(addr, 0)

    def get_any_broker_addr_for_topic(self, topic: str) -> str | None:
        """findBrokerAddrByTopic: a broker (master first) of one of the topic's broker names."""
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        bd = route.broker_datas[int(time.monotonic_ns()) % len(route.broker_datas)]
        return bd.select_broker_addr()

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        """The client ids of ``group`` as a broker of ``topic`` knows them; None when no broker answers."""
        addr = self.get_any_broker_addr_for_topic(topic)
        if addr is None:
            await self.update_topic_route_info_from_name_server(topic)
            addr = self.get_any_broker_addr_for_topic(topic)
        if addr is None:
            return None
        try:
            return await self.mq_client_api.get_consumer_id_list_by_group(
                addr, group, self.client_config.mq_client_api_timeout
            )
        except (RemotingError, MQBrokerException, ValueError) as e:
            # the broker knows no consumer of the group (its last one left, as every consumer does at shutdown):
            # an answer, not a fault
            gone = isinstance(e, MQBrokerException) and (e.remark or "").startswith("no consumer for this group")
            log.log(
                logging.DEBUG if gone else logging.WARNING,
                "getConsumerIdListByGroup exception, %s %s: %s",
                addr,
                group,
                e,
            )
            return None

    # --- heartbeat ---------------------------------------------------------------------------------------------
    def prepare_heartbeat_data(self) -> HeartbeatData:
        data = HeartbeatData(client_id=self.client_id)
        for group, c in list(self.consumer_table.items()):
            ct = c.consume_type
            data.consumer_data_set.append(
                ConsumerData(
                    group_name=group,
                    consume_type=ct if isinstance(ct, ConsumeType) else ConsumeType(str(ct)),
                    message_model=MessageModel(c.message_model),
                    consume_from_where=ConsumeFromWhere(c.consume_from_where),
                    subscription_data_set=list(c.subscriptions()),
                    unit_mode=bool(c.is_unit_mode()),
                )
            )
        for group in list(self.producer_table):
            data.producer_data_set.append(ProducerData(group))
        return data

    async def check_client_in_broker(self) -> None:
        """Each consumer's subscriptions that are not TAG (SQL92) checked by a broker of their topic
        (``check_subscription_in_broker``), as 4.9's ``checkClientInBroker`` at a consumer's start."""
        for group, consumer in list(self.consumer_table.items()):
            subscriptions = consumer.subscriptions()
            if not subscriptions:
                return  # as 4.9's loop does
            for sd in subscriptions:
                await self.check_subscription_in_broker(group, sd)

    async def check_subscription_in_broker(self, group: str, sd: SubscriptionData) -> None:
        """CHECK_CLIENT_CONFIG of one subscription that is not TAG, asked of a broker of its topic (none known:
        nothing asked): a broker that refuses the filter raises MQClientException with its code and remark; a
        failure to ask it, an MQClientException saying the broker may not support the filter (4.9's text)."""
        if ExpressionType.is_tag_type(sd.expression_type):
            return
        addr = self.get_any_broker_addr_for_topic(sd.topic)
        if addr is None:
            return
        timeout = self.client_config.mq_client_api_timeout
        try:
            await self.mq_client_api.check_client_in_broker(addr, group, self.client_id, sd, timeout)
        except MQClientException:
            raise
        except Exception as e:
            raise MQClientException.of(
                f"Check client in broker error, maybe because you use {sd.expression_type} to filter message, "
                "but server has not been upgraded to support!This error would not affect the launch of "
                "consumer, but may has impact on message receiving if you have use the new features which "
                "are not supported by server, please check the log!",
                e,
            ) from e

    async def send_heartbeat_to_all_broker_with_lock(self) -> None:
        async with self._lock_heartbeat:
            await self._send_heartbeat_to_all_broker()

    async def _send_heartbeat_to_all_broker(self) -> None:
        data = self.prepare_heartbeat_data()
        if not data.producer_data_set and not data.consumer_data_set:
            log.info("sending heartbeat, but no consumer and no producer. [%s]", self.client_id)
            return
        timeout = self.client_config.mq_client_api_timeout
        for name, addrs in list(self.broker_addr_table.items()):
            for bid, addr in list(addrs.items()):
                if not data.consumer_data_set and bid != MASTER_ID:
                    continue
                try:
                    version = await self.mq_client_api.send_heartbeat(addr, data, timeout)
                    self.broker_version_table.setdefault(name, {})[addr] = version
                    self.heartbeat_count += 1
                except (RemotingError, MQBrokerException, MQClientException) as e:
                    if self._is_broker_in_name_server(addr):
                        log.warning("send heart beat to broker[%s %d %s] failed: %s", name, bid, addr, e)
                    else:
                        log.info(
                            "send heart beat to broker[%s %d %s] exception, because the broker not up", name, bid, addr
                        )

    def _is_broker_in_name_server(self, addr: str) -> bool:
        return self._is_broker_addr_exist_in_topic_route_table(addr)

    def send_heartbeat_to_all_broker_sync(self) -> None:
        """Blocking form for callers off the loop (producer/consumer start)."""
        self.run_sync(
            self.send_heartbeat_to_all_broker_with_lock(),
            self.client_config.mq_client_api_timeout / 1000 * max(1, len(self.broker_addr_table)) + 5,
        )

    # --- consumers ---------------------------------------------------------------------------------------------
    def rebalance_immediately(self) -> None:
        svc = self.rebalance_service
        if svc is not None:
            self.call_soon(svc.wakeup)

    async def do_rebalance(self) -> None:
        for group, c in list(self.consumer_table.items()):
            try:
                await _maybe_await(c.do_rebalance())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("doRebalance of group %s failed", group)

    async def persist_all_consumer_offset(self) -> None:
        for group, c in list(self.consumer_table.items()):
            try:
                await _maybe_await(c.persist_consumer_offset())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("persistConsumerOffset of group %s failed", group)

    # --- introspection (4.9 MQClientInstance#resetOffset, getConsumerStatus, consumerRunningInfo,
    # consumeMessageDirectly) ---------------------------------------------------------------------------------
    async def reset_offset(self, topic: str, group: str, offset_table: dict[MessageQueue, int]) -> None:
        """Move the push consumer of ``group`` to ``offset_table`` on ``topic``: suspend it, drop the topic's process
        queues named in the table, wait ``RESET_OFFSET_SETTLE_S`` for pulls and listener calls in flight to see the
        drop, then for each queue update the offset, persist it to the broker and remove the queue; resume (the
        rebalance that follows re-creates the pull requests from the new offsets)."""
        consumer = self.consumer_table.get(group)
        if consumer is None or not hasattr(consumer, "rebalance_impl") or not hasattr(consumer, "suspend"):
            log.info("[reset-offset] consumer dose not exist. group=%s", group)
            return
        consumer.suspend()
        try:
            table = consumer.rebalance_impl.process_queue_table
            for mq, pq in list(table.items()):
                if mq.topic == topic and mq in offset_table:
                    pq.dropped = True
                    pq.clear()
            await asyncio.sleep(self.RESET_OFFSET_SETTLE_S)
            for mq in list(table):
                offset = offset_table.get(mq)
                if mq.topic != topic or offset is None:
                    continue
                try:
                    consumer.offset_store.update_offset(mq, offset, False)
                    await consumer.rebalance_impl.remove_unnecessary_message_queue(mq, table.get(mq))
                    table.pop(mq, None)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("reset offset failed. group=%s, %s", group, mq)
        finally:
            consumer.resume()

    def get_consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int]:
        """The consumer's offsets of ``topic``'s queues (empty when ``group`` has no consumer here)."""
        consumer = self.consumer_table.get(group)
        store = getattr(consumer, "offset_store", None)
        if store is None:
            return {}
        return dict(store.clone_offset_table(topic))

    def consumer_running_info(self, group: str) -> ConsumerRunningInfo | None:
        consumer = self.consumer_table.get(group)
        build = getattr(consumer, "consumer_running_info", None)
        if consumer is None or build is None:
            return None
        info: ConsumerRunningInfo = build()
        info.properties[PROP_NAMESERVER_ADDR] = "".join(f"{a};" for a in self.client_config.namesrv_addr_list())
        consume_type = consumer.consume_type
        info.properties[PROP_CONSUME_TYPE] = getattr(consume_type, "value", str(consume_type))
        info.properties[PROP_CLIENT_VERSION] = version_desc(DEFAULT_VERSION)
        return info

    async def consume_message_directly(
        self, msg: MessageExt, group: str, broker_name: str
    ) -> ConsumeMessageDirectlyResult | None:
        """Run the push consumer's listener of ``group`` on ``msg`` (a thread for a blocking listener, awaited for
        rmq_core.aio's); None when the group has no push consumer here."""
        consumer = self.consumer_table.get(group)
        service = getattr(consumer, "consume_message_service", None)
        if service is None:
            return None
        run_async = getattr(service, "consume_message_directly_async", None)
        if run_async is not None:
            result: ConsumeMessageDirectlyResult = await run_async(msg, broker_name)
            return result
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(None, service.consume_message_directly, msg, broker_name)
        return result

    def __repr__(self) -> str:
        return f"MQClientInstance({self.client_id}, {self.service_state})"


def _copy_outcome(cfut: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    """A finished task's result, exception or cancellation onto its concurrent future (unless cancelled first)."""
    if task.cancelled():
        cfut.cancel()
    if not cfut.set_running_or_notify_cancel():
        return
    exc = task.exception()
    if exc is not None:
        cfut.set_exception(exc)
    else:
        cfut.set_result(task.result())


def _cancel_task_on_cancel(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], cfut: concurrent.futures.Future[Any]
) -> None:
    if cfut.cancelled() and not loop.is_closed():
        loop.call_soon_threadsafe(task.cancel)
