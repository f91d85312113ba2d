"""``Admin``: the user-facing, blocking admin client (4.9's ``DefaultMQAdminExt`` in snake_case): cluster info, topic
and consume stats, consumer connections, broker runtime info and config, messages by key and id, offsets reset by
time, topics and subscription groups created and deleted. ``rmq-core admin`` and ``rmq-core topic`` sit on it.

Owns the admin steps made of several RPCs (which brokers a step asks: a cluster's masters or a topic's route; what
it adds up); each RPC is the RPC layer's (``BlockingMQClientAPI``), and so are the answers' types and the errors
(every failure a ``RocketMQRpcError``: ``MQClientException`` / ``MQBrokerException`` / ``RemotingError``).
Lifecycle: ``start()`` opens the RPC layer (its loop thread), ``shutdown()`` closes it; a context manager does both.
Thread-safety: the methods may be called from any thread (the RPC layer serialises them onto its loop).
Details: docs/CLIENT_DESIGN.md, 'Admin'.
"""

from __future__ import annotations

from collections.abc import Mapping

from rmq_core.client.blocking_mq_client_api import DEFAULT_TIMEOUT_MS, BlockingMQClientAPI
from rmq_core.client.exceptions import ClientErrorCode, MQClientException, RocketMQRpcError
from rmq_core.client.mq_admin_impl import QueryResult, keep_matching
from rmq_core.client.rollback_stats import RollbackStats
from rmq_core.common.mix_all import get_retry_topic
from rmq_core.common.perm_name import DEFAULT_PERM
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import DEFAULT_READ_QUEUE_NUMS, TopicConfig
from rmq_core.message import MessageExt, MessageQueue, decode_offset_msg_id
from rmq_core.remoting.body.connection import ConsumerConnection
from rmq_core.remoting.body.queue_offsets import ConsumeStats, TopicStatsTable
from rmq_core.remoting.body.route import MASTER_ID, ClusterInfo, TopicList, TopicRouteData
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import QueryMessageRequestHeader, UpdateConsumerOffsetRequestHeader

# QUERY_MESSAGE's widest window (mqadmin's queryMsgById asks for a UNIQ_KEY at most this many times)
MAX_TIMESTAMP_MS = 2**63 - 1
UNIQ_KEY_QUERY_MAX = 32


class Admin:
    """``Admin(namesrv_addr, access_key=, secret_key=, timeout_ms=)``: ``with Admin("127.0.0.1:9876") as admin:``.
    ``broker_addr=`` narrows a step to one broker; ``cluster=`` to one cluster's masters."""

    def __init__(
        self,
        namesrv_addr: str | None = None,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
        instance_name: str = "rmq-admin",
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.timeout_ms = timeout_ms
        self.instance_name = instance_name
        self._credentials = {"access_key": access_key, "secret_key": secret_key}
        self._rpc: BlockingMQClientAPI | None = None

    # --- lifecycle -----------------------------------------------------------------------------------------------
    def start(self) -> Admin:
        """Opens the RPC layer (idempotent); bad credentials raise here."""
        if self._rpc is None:
            self._rpc = BlockingMQClientAPI(
                self.namesrv_addr, self.timeout_ms, name=self.instance_name, **self._credentials
            )
        return self

    def shutdown(self) -> None:
        rpc, self._rpc = self._rpc, None
        if rpc is not None:
            rpc.close()

    def __enter__(self) -> Admin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def rpc(self) -> BlockingMQClientAPI:
        """The RPC layer (for a request no method here names); MQClientException before ``start()``."""
        if self._rpc is None:
            raise MQClientException(-1, "the Admin is not started: call start() or use it in a with block")
        return self._rpc

    # --- name server ---------------------------------------------------------------------------------------------
    def examine_broker_cluster_info(self) -> ClusterInfo:
        return self.rpc.get_broker_cluster_info()

    def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        """The topic's route; MQClientException(TOPIC_NOT_EXIST) when the name server has none."""
        return self.rpc.get_topic_route_info_from_name_server(topic)

    def fetch_all_topic_list(self) -> TopicList:
        return self.rpc.get_topic_list_from_name_server()

    def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name → master address of every broker the name server knows (of ``cluster`` if given)."""
        return self.rpc.master_addrs(cluster)

    def masters_of_topic(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, master address) of every broker in the topic's route, by broker name."""
        return self._masters(topic, None)

    def _targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        if broker_addr:
            return [broker_addr]
        addrs = list(self.master_addrs(cluster).values())
        if not addrs:
            where = f"in cluster {cluster}" if cluster else "registered with the name server"
            raise MQClientException(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"no master broker {where}")
        return addrs

    # --- topics --------------------------------------------------------------------------------------------------
    def create_and_update_topic_config(self, broker_addr: str, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC on one broker (it registers the topic with its name servers)."""
        self.rpc.create_topic(broker_addr, config)

    def create_topic(
        self,
        topic: str,
        queues: int = DEFAULT_READ_QUEUE_NUMS,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        perm: int = DEFAULT_PERM,
        order: bool = False,
        wait_s: float = 30.0,
    ) -> TopicRouteData:
        """The topic with ``queues`` read and write queues on one broker, else on every master (of ``cluster``), as
        mqadmin's ``updateTopic -c``; the route once the name server lists each of them (TimeoutError after
        ``wait_s``)."""
        config = TopicConfig(topic, queues, queues, perm, order=order)
        return self.rpc.create_topic_and_wait(self._targets(cluster, broker_addr), config, wait_s)

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_BROKER on the masters of ``cluster`` (else of the topic's route), then
        DELETE_TOPIC_IN_NAMESRV on every name server (4.9's ``deleteTopic``)."""
        if cluster is not None:
            addrs = self._targets(cluster, None)
        else:
            try:
                addrs = [addr for _name, addr in self.masters_of_topic(topic)]
            except RocketMQRpcError as e:
                if e.response_code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
                addrs = []
        for addr in addrs:
            self.rpc.delete_topic_in_broker(addr, topic)
        for namesrv in self.rpc.namesrv_addr_list:
            self.rpc.delete_topic_in_name_server(namesrv, topic, cluster)

    def examine_topic_stats(self, topic: str, *, broker_addr: str | None = None) -> TopicStatsTable:
        """Min/max offset and last write of each queue of the topic, on every master of its route (or one)."""
        addrs = [broker_addr] if broker_addr else [addr for _name, addr in self.masters_of_topic(topic)]
        out = TopicStatsTable()
        for addr in addrs:
            out.offset_table.update(self.rpc.get_topic_stats_info(addr, topic).offset_table)
        return out

    # --- subscription groups -------------------------------------------------------------------------------------
    def create_and_update_subscription_group_config(self, broker_addr: str, config: SubscriptionGroupConfig) -> None:
        self.rpc.create_subscription_group(broker_addr, config)

    def create_subscription_group(
        self,
        group: str | SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> None:
        """The group (a name: the defaults) on one broker, else on every master (of ``cluster``)."""
        config = SubscriptionGroupConfig(group) if isinstance(group, str) else group
        for addr in self._targets(cluster, broker_addr):
            self.rpc.create_subscription_group(addr, config)

    def delete_subscription_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        remove_offset: bool = False,
    ) -> None:
        """DELETE_SUBSCRIPTIONGROUP on one broker, else on every master (of ``cluster``)."""
        for addr in self._targets(cluster, broker_addr):
            self.rpc.delete_subscription_group(addr, group, remove_offset)

    # --- consumers -----------------------------------------------------------------------------------------------
    def group_brokers(self, group: str) -> list[tuple[str, str]]:
        """(broker name, master address) of the brokers that know ``group``: those of its retry topic's route, else
        (no consumer of the group ever came online) every master."""
        try:
            return self.masters_of_topic(get_retry_topic(group))
        except RocketMQRpcError:
            return sorted(self.master_addrs().items())

    def _group_addrs(self, group: str, broker_addr: str | None) -> list[str]:
        return [broker_addr] if broker_addr else [addr for _name, addr in self.group_brokers(group)]

    def examine_consume_stats(
        self, group: str, topic: str | None = None, *, broker_addr: str | None = None
    ) -> ConsumeStats:
        """Broker and consumer offset of each queue the group has offsets for (of ``topic``), over the brokers of
        the group's retry topic (or one); ``consume_tps`` is their sum."""
        out = ConsumeStats()
        for addr in self._group_addrs(group, broker_addr):
            stats = self.rpc.get_consume_stats(addr, group, topic)
            out.offset_table.update(stats.offset_table)
            out.consume_tps += stats.consume_tps
        return out

    def examine_consumer_connection_info(self, group: str, *, broker_addr: str | None = None) -> ConsumerConnection:
        """The group's online clients and subscriptions, from the first broker that has any;
        MQClientException(CONSUMER_NOT_ONLINE) when none has."""
        for addr in self._group_addrs(group, broker_addr):
            try:
                conn = self.rpc.get_consumer_connection_list(addr, group)
            except RocketMQRpcError as e:
                if e.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                continue
            if conn.connection_set:
                return conn
        raise MQClientException(ResponseCode.CONSUMER_NOT_ONLINE, f"Not found the consumer group connection: {group}")

    def reset_offset_by_time(
        self,
        group: str,
        topic: str,
        timestamp_ms: int,
        *,
        force: bool = True,
        broker_addr: str | None = None,
        fall_back: bool = True,
    ) -> dict[MessageQueue, int]:
        """The group's offsets on ``topic`` moved to the first message stored at or after ``timestamp_ms``, on every
        master of the topic's route (or one): the broker does it and tells the online clients
        (INVOKE_BROKER_TO_RESET_OFFSET); on a broker where none is online (CONSUMER_NOT_ONLINE) the offsets are
        committed here, queue by queue (``reset_offset_by_time_old``; ``fall_back=False``: that broker's
        CONSUMER_NOT_ONLINE is raised, as 4.9's ``resetOffsetByTimestamp``). ``force=False`` only moves offsets back.
        The new offset of each queue."""
        out: dict[MessageQueue, int] = {}
        for _name, addr in self._masters(topic, broker_addr):
            try:
                out.update(self.rpc.invoke_broker_to_reset_offset(addr, topic, group, timestamp_ms, force))
            except RocketMQRpcError as e:
                if e.response_code != ResponseCode.CONSUMER_NOT_ONLINE or not fall_back:
                    raise
                for r in self.reset_offset_by_time_old(group, topic, timestamp_ms, force=force, broker_addr=addr):
                    out[MessageQueue(topic, r.broker_name, r.queue_id)] = r.rollback_offset
        return out

    def reset_offset_by_time_old(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True, broker_addr: str | None = None
    ) -> list[RollbackStats]:
        """mqadmin's ``resetOffsetByTimeOld``: each read queue's offset at ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)
        committed for the group (UPDATE_CONSUMER_OFFSET), without the broker telling clients; with ``force=False``
        an offset behind that one is kept."""
        route = self.examine_topic_route_info(topic)
        read_queues = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
        out: list[RollbackStats] = []
        for name, addr in self._masters(topic, broker_addr, route):
            try:
                stats = self.rpc.get_consume_stats(addr, group, topic).offset_table
            except RocketMQRpcError:  # the group has no offsets there yet
                stats = {}
            by_queue = {mq.queue_id: w for mq, w in stats.items() if mq.topic == topic}
            for q in range(read_queues.get(name, 0)):
                at_time = self.rpc.search_offset(addr, topic, q, timestamp_ms)
                w = by_queue.get(q)
                old = w.consumer_offset if w is not None else None
                new = at_time if force or old is None or at_time <= old else old
                if new == at_time:
                    header = UpdateConsumerOffsetRequestHeader(
                        consumerGroup=group, topic=topic, queueId=q, commitOffset=new
                    )
                    self.rpc.update_consumer_offset(addr, header)
                broker_offset = w.broker_offset if w is not None else self.rpc.get_max_offset(addr, topic, q)
                out.append(RollbackStats(name, q, broker_offset, old, at_time, new))
        return out

    def _masters(
        self, topic: str, broker_addr: str | None, route: TopicRouteData | None = None
    ) -> list[tuple[str, str]]:
        """(name, master address) of the topic's route, or only ``broker_addr``'s (which must be one of them)."""
        route = route if route is not None else self.examine_topic_route_info(topic)
        pairs = ((bd.broker_name, bd.broker_addrs.get(MASTER_ID)) for bd in route.broker_datas)
        masters = sorted((name, addr) for name, addr in pairs if addr)
        if broker_addr is None:
            return masters
        chosen = [(name, addr) for name, addr in masters if addr == broker_addr]
        if not chosen:
            raise MQClientException(
                ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"{broker_addr} is not a master in {topic}'s route"
            )
        return chosen

    # --- brokers -------------------------------------------------------------------------------------------------
    def fetch_broker_runtime_stats(self, broker_addr: str) -> dict[str, str]:
        """The broker's runtime table (GET_BROKER_RUNTIME_INFO: putTps, brokerVersionDesc, bootTimestamp, ...)."""
        return self.rpc.get_broker_runtime_info(broker_addr)

    def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        return self.rpc.get_broker_config(broker_addr)

    def update_broker_config(self, broker_addr: str, properties: Mapping[str, object]) -> None:
        """UPDATE_BROKER_CONFIG: the broker applies every setting or none (MQBrokerException naming the refusal)."""
        values = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in properties.items()}
        self.rpc.update_broker_config(broker_addr, values)

    # --- messages ------------------------------------------------------------------------------------------------
    def query_message(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        *,
        unique_key: bool = False,
        broker_addr: str | None = None,
    ) -> QueryResult:
        """Messages of ``topic`` whose KEYS hold ``key`` (``unique_key``: the earliest whose UNIQ_KEY is ``key``),
        stored in [begin_ms, end_ms], at most ``max_num`` per broker, over every master of the route (or one). A
        broker that found nothing adds nothing; the first error is raised when every broker failed (or the one)."""
        header = QueryMessageRequestHeader(
            topic=topic, key=key, maxNum=max_num, beginTimestamp=begin_ms, endTimestamp=end_ms
        )
        addrs = [broker_addr] if broker_addr else [addr for _name, addr in self.masters_of_topic(topic)]
        result = QueryResult()
        errors: list[RocketMQRpcError] = []
        for addr in addrs:
            try:
                keep_matching(result, self.rpc.query_message(addr, header, is_unique_key=unique_key), key, unique_key)
            except RocketMQRpcError as e:
                if e.response_code != ResponseCode.QUERY_NOT_FOUND:
                    errors.append(e)
        if errors and len(errors) == len(addrs):
            raise errors[0]
        return result

    def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """A message by its offset message id (broker address + CommitLog offset: VIEW_MESSAGE_BY_ID there); with
        ``topic``, an id that is not one (or names no message) is taken as a client message id (UNIQ_KEY) and
        looked up by key, as 4.9's ``viewMessage(topic, msgId)``."""
        msg_id = msg_id.strip()
        failure: RocketMQRpcError | None = None
        addr_offset = offset_msg_id_location(msg_id)
        if addr_offset is not None:
            try:
                return self.rpc.view_message(*addr_offset)
            except RocketMQRpcError as e:
                failure = e
        if topic is None:
            if failure is not None:
                raise failure
            raise MQClientException(
                -1, f"{msg_id} is not an offset message id; a client message id (UNIQ_KEY) needs the topic"
            )
        found = self.query_message(topic, msg_id, UNIQ_KEY_QUERY_MAX, 0, MAX_TIMESTAMP_MS, unique_key=True)
        if found.messages:
            return found.messages[0]
        raise MQClientException(ResponseCode.QUERY_NOT_FOUND, f"no message {msg_id} in topic {topic}")


def offset_msg_id_location(msg_id: str) -> tuple[str, int] | None:
    """The broker address ("host:port") and CommitLog offset an offset message id names; None when ``msg_id`` is not
    one (a UNIQ_KEY decodes to a "port" above 65535: pid << 16 | hash)."""
    try:
        (host, port), offset = decode_offset_msg_id(msg_id)
    except (ValueError, IndexError):
        return None
    if not host or not 0 < port <= 65535:
        return None
    return f"{host}:{port}", offset
