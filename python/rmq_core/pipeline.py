"""The main job, run by ``rmq-core pipeline`` and ``./dev demo``.

Starts a node (``rmq_core.node.Node``: a name server in this process, ``--brokers`` broker processes; or uses
``--namesrv``'s cluster), spreads a topic over its brokers, produces a stream of order events (async batch sends), consumes
it with a push consumer group of two, and reads the topic with a Spark streaming query and a Spark batch query
(one ``path`` read per broker store); reports produce/consume msg/s in total and per broker and the cores each
process used; returns 0 only if every message was consumed exactly once and both queries' per-tag counts and body
bytes equal what was produced, else 1 naming the failed check.
Invariants: every topic and consumer group is new for each run (a run id in their names), so earlier runs over the
same directory or cluster never change this run's counts. Everything started here (servers, clients, the Spark
session) is stopped before ``run_pipeline`` returns, also on error.
Thread-safety: ``run_pipeline`` runs on one thread; the consume listeners record into ``ConsumeRecorder`` from the
consumers' threads under its lock.
Details: docs/SPARK_DESIGN.md, 'The main job'.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmq_core.message import Message, MessageExt

# the stream: event tags with a skewed distribution, as an order system emits them
TAG_WEIGHTS: tuple[tuple[str, int], ...] = (("order", 50), ("payment", 30), ("shipment", 15), ("refund", 5))
REGIONS: tuple[str, ...] = ("eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-northeast")
CURRENCIES: tuple[str, ...] = ("EUR", "USD", "GBP", "JPY", "INR")

PRODUCER_GROUP = "pipeline_producer"
AUTO_CORES_PER_BROKER = 2  # --brokers auto: measured on 2 cores, see resolve_brokers
MAX_BROKERS = 64
PULL_BATCH = 1024  # messages per pull of Spark's reads and the brokers' cap (maxTransferCountOnMessageInMemory)
NODE_LOG = "node.log"
BROKERS_HELP = (
    "the node's broker processes: a number, or auto (default): one per 2 cores the process may use, at least 1. "
    "Measured on 2 cores (the producer, the consumers and Spark share them with the brokers): 2 brokers gave the same "
    "produce/consume rates as 1 and slower Spark queries (twice the read tasks per micro-batch), so auto gives 1 there "
    "(docs/SPARK_DESIGN.md, 'The main job')"
)


# ------------------------------------------------------------------------------------------------ options
@dataclass
class PipelineConfig:
    """What the job does; the command line maps one flag to one field."""

    messages: int = 200_000
    dir: str = "./rmq-store"
    fresh: bool = False
    namesrv: str | None = None  # an existing cluster: no node of the job's own
    spark: bool = True
    topic: str = "PipelineOrders"  # a run id is appended: every run has its own topic
    queues: int = 8  # per broker (mqadmin updateTopic -c: every master gets them)
    brokers: str = "auto"  # the node's brokers: a number or auto (resolve_brokers)
    batch: int = 256  # messages per SEND_BATCH_MESSAGE
    window: int = 4  # batch sends in flight
    pull_batch: int = 256  # the push consumers' pullBatchSize (the node's brokers allow PULL_BATCH)
    rate: int = 0  # producer target in msg/s; 0 = as fast as it goes
    seed: int = 42
    consume_timeout_s: float = 120.0
    commit_log_file_mb: int = 128  # the node's brokers' CommitLog file size (RocketMQ's default is 1 GiB)
    spark_master: str = "local[2]"
    micro_batches: int = 4  # the streaming query's maxOffsetsPerTrigger is messages / micro_batches
    run_id: str = field(default_factory=lambda: time.strftime("%Y%m%d%H%M%S") + f"{random.randrange(1000):03d}")

    def validate(self) -> str | None:
        if self.messages <= 0:
            return "--messages must be positive"
        if self.queues <= 0 or self.queues > 1024:
            return "--queues must be in 1..1024"
        if self.batch <= 0 or self.batch > 1024:
            return "--batch must be in 1..1024"
        if self.window < 1 or self.window > 1024:
            return "--window must be in 1..1024"
        if self.rate < 0:
            return "--rate must be 0 (unlimited) or positive"
        if self.commit_log_file_mb < 1:
            return "--commit-log-file-mb must be at least 1"
        if self.micro_batches < 1:
            return "--micro-batches must be at least 1"
        from rmq_core.common.mix_all import validate_topic

        return validate_topic(self.topic)


# ------------------------------------------------------------------------------------------------ progress
class Progress:
    """Progress lines on stderr for a long step: at most one every ``every`` seconds, and a final one."""

    def __init__(self, label: str, total: int, every: float = 2.0) -> None:
        self.label, self.total, self.every = label, total, every
        self.started = time.perf_counter()
        self._last = self.started
        self._tty = sys.stderr.isatty()

    def update(self, done: int, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and now - self._last < (0.2 if self._tty else self.every):
            return
        self._last = now
        rate = done / max(now - self.started, 1e-9)
        line = (
            f"  {self.label}: {done:,}/{self.total:,} ({100 * done // max(self.total, 1)}%, "
            f"{rate:,.0f}/s, {now - self.started:.1f} s)"
        )
        if self._tty and not final:
            print(line, end="\r", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


# warnings RocketMQ's clients log in a normal run (the group's %RETRY% topic has no route until something is retried;
# a pull request still queued when its consumer shuts down is dropped): not shown by the job
_BENIGN_LOG_TEMPLATES = (
    "get Topic [%s] RouteInfoFromNameServer is not exist value",
    "No matched consumer for the PullRequest %s, drop it",
)


# a pull sent before the consumer's heartbeat reached a broker of the node is refused with SUBSCRIPTION_NOT_LATEST (25)
# and retried: RocketMQ's push consumer logs it too
_BENIGN_PULL_REFUSAL = "DESC: the consumer's subscription not latest"


class _BenignFilter(logging.Filter):
    """Drops the benign warnings; remembers when a pull was last refused with SUBSCRIPTION_NOT_LATEST."""

    def __init__(self) -> None:
        super().__init__()
        self.last_pull_refusal: float | None = None  # time.monotonic()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in _BENIGN_LOG_TEMPLATES:
            return False
        if _BENIGN_PULL_REFUSAL in record.getMessage():
            self.last_pull_refusal = time.monotonic()
            return False
        return True


@contextlib.contextmanager
def job_logging() -> Iterator[_BenignFilter]:
    """Client and server warnings on stderr with their logger's name, minus the benign ones above."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    benign = _BenignFilter()
    handler.addFilter(benign)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield benign
    finally:
        root.removeHandler(handler)


def step(msg: str) -> None:
    print(f"==> {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the stream
@dataclass
class Produced:
    """What the producer wrote (the expected side of every check)."""

    count: int = 0
    tags: Counter[str] = field(default_factory=Counter)
    body_bytes: int = 0
    seconds: float = 0.0
    per_broker: Counter[str] = field(default_factory=Counter)


class EventStream:
    """A deterministic stream of order events: tag by TAG_WEIGHTS, key = order id, properties region/amount/
    currency, a JSON body. Orders are reused (payments and refunds refer to earlier orders). ``batch`` draws the
    tags of a whole batch at once and writes the body with one format string (valid JSON: every value is ASCII
    without quotes): twice as fast as a ``json.dumps`` per event, so the job's producer measures the broker, not
    the event generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.tags = [t for t, _ in TAG_WEIGHTS]
        self.weights = [w for _, w in TAG_WEIGHTS]
        self.next_order = 100_000

    def message(self, topic: str, seq: int) -> Message:
        return self.batch(topic, seq, 1)[0]

    def batch(self, topic: str, seq: int, n: int) -> list[Message]:
        """Events ``seq .. seq + n - 1``."""
        rng = self.rng
        out = []
        for i, tag in enumerate(rng.choices(self.tags, self.weights, k=n)):
            if tag == "order" or self.next_order == 100_000:
                self.next_order += 1
                order = self.next_order
            else:
                order = rng.randint(100_001, self.next_order)
            region = REGIONS[order % len(REGIONS)]
            currency = CURRENCIES[order % len(CURRENCIES)]
            amount = f"{rng.uniform(1.0, 2000.0):.2f}"
            body = (
                f'{{"event":"{tag}","order_id":"ORD-{order}","seq":{seq + i},"customer":"C{order % 9973:04d}",'
                f'"amount":"{amount}","currency":"{currency}","region":"{region}","items":{rng.randint(1, 9)}}}'
            ).encode()
            out.append(
                Message(
                    topic,
                    body,
                    tags=tag,
                    keys=f"ORD-{order}",
                    properties={"region": region, "amount": amount, "currency": currency},
                )
            )
        return out


def produce(namesrv: str, topic: str, cfg: PipelineConfig, produced: Produced, queues: int = 1) -> None:
    """Send cfg.messages events in batches of cfg.batch (each batch goes to the next queue of the topic, over every
    broker), with up to cfg.window batch sends in flight (async sends: the next batch is built while the broker
    stores the previous ones), paced to cfg.rate. A short run sends smaller batches, at least one to each of the
    topic's ``queues`` (every consumer of the group gets messages)."""
    from rmq_core.client import Producer

    stream = EventStream(cfg.seed)
    progress = Progress("produce", cfg.messages)
    p = Producer(
        PRODUCER_GROUP,
        namesrv_addr=namesrv,
        instance_name=f"pipeline-producer-{cfg.run_id}",
        poll_name_server_interval=1000,
    )
    p.start()
    in_flight: deque[tuple[Any, list[Message]]] = deque()

    def settle(fut: Any, msgs: list[Message]) -> None:
        result = fut.result()
        if result.send_status.name != "SEND_OK":
            raise RuntimeError(f"send_batch returned {result.send_status.name} after {produced.count:,} messages")
        produced.per_broker[result.message_queue.broker_name] += len(msgs)
        for m in msgs:
            produced.tags[m.tags or ""] += 1
            produced.body_bytes += len(m.body)
        produced.count += len(msgs)
        progress.update(produced.count)

    try:
        started = time.perf_counter()
        made = 0
        batch = max(1, min(cfg.batch, cfg.messages // queues))
        while made < cfg.messages:
            n = min(batch, cfg.messages - made)
            msgs = stream.batch(topic, made, n)
            made += n
            if len(in_flight) >= cfg.window:
                settle(*in_flight.popleft())
            in_flight.append((p.send_async(p.batch(msgs)), msgs))
            if cfg.rate:
                ahead = made / cfg.rate - (time.perf_counter() - started)
                if ahead > 0:
                    time.sleep(ahead)
        while in_flight:
            settle(*in_flight.popleft())
        produced.seconds = time.perf_counter() - started
        progress.update(produced.count, final=True)
    finally:
        for fut, _ in in_flight:
            fut.cancel()
        p.shutdown()


# ------------------------------------------------------------------------------------------------ consumers
class ConsumeRecorder:
    """Per-consumer counts, per-tag counts, duplicates (a stored message — broker, queue, offset — delivered twice)
    and the end-to-end latency of every delivery (consume time - born timestamp, ms). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen: set[tuple[str | None, int, int]] = set()
        self.per_consumer: Counter[str] = Counter()
        self.per_broker: Counter[str] = Counter()
        self.tags: Counter[str] = Counter()
        self.body_bytes = 0
        self.duplicates = 0
        self.latencies_ms: list[int] = []
        self.first = 0.0
        self.last = 0.0

    def listener(self, name: str) -> Callable[[Sequence[MessageExt], Any], Any]:
        from rmq_core.client import ConsumeConcurrentlyStatus

        def on_messages(msgs: Sequence[MessageExt], context: Any) -> Any:
            now_ms = int(time.time() * 1000)
            now = time.perf_counter()
            with self._lock:
                if not self.first:
                    self.first = now
                self.last = now
                for m in msgs:
                    key = (m.broker_name, m.queue_id, m.queue_offset)
                    if key in self.seen:
                        self.duplicates += 1
                        continue
                    self.seen.add(key)
                    self.per_consumer[name] += 1
                    self.per_broker[m.broker_name or ""] += 1
                    self.tags[m.tags or ""] += 1
                    self.body_bytes += len(m.body)
                    self.latencies_ms.append(now_ms - m.born_timestamp)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return on_messages

    @property
    def unique(self) -> int:
        with self._lock:
            return len(self.seen)


def percentile(values: Sequence[int], p: float) -> float:
    """Nearest-rank percentile of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    s = sorted(values)
    return float(s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))])


QueueRef = tuple[str, int]  # (broker name, queue id)


def _held_queues(consumer: Any, topic: str) -> set[QueueRef]:
    table = getattr(getattr(consumer.impl, "rebalance_impl", None), "process_queue_table", {})
    return {(mq.broker_name, mq.queue_id) for mq in list(table) if mq.topic == topic}


def describe_queues(held: set[QueueRef]) -> str:
    """``pipeline-0 [0, 1], pipeline-1 [0, 1]``: the queues of each broker."""
    by_broker: dict[str, list[int]] = {}
    for b, q in sorted(held):
        by_broker.setdefault(b, []).append(q)
    return ", ".join(f"{b} {qs}" for b, qs in by_broker.items()) or "none"


def wait_for_balance(consumers: Sequence[Any], topic: str, queues: int, timeout_s: float = 30.0) -> list[set[QueueRef]]:
    """Wait until the consumers hold disjoint sets of the topic's queues covering all of them (so production starts
    on a settled group and a rebalance never hands a queue over mid-stream)."""
    deadline = time.monotonic() + timeout_s
    while True:
        held = [_held_queues(c, topic) for c in consumers]
        union: set[QueueRef] = set().union(*held)
        if (
            len(union) == queues
            and sum(len(h) for h in held) == queues
            and all(held[i] for i in range(min(len(held), queues)))
        ):
            return held
        if time.monotonic() > deadline:
            raise RuntimeError(f"the consumer group did not settle on {queues} queues in {timeout_s:.0f} s: {held}")
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------ admin
ADMIN_TIMEOUT_MS = 5000


def create_topic(namesrv: str, topic: str, queues: int, broker_addrs: Sequence[str], timeout_s: float = 30.0) -> None:
    """UPDATE_AND_CREATE_TOPIC on every broker; returns once the name server routes the topic to each of them with
    ``queues`` read queues (decided from the decoded route)."""
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
    from rmq_core.common.topic_config import TopicConfig

    with BlockingMQClientAPI(namesrv, ADMIN_TIMEOUT_MS, name="rmq-core-pipeline") as api:
        api.create_topic_and_wait(broker_addrs, TopicConfig(topic, queues, queues), timeout_s)


def master_brokers(namesrv: str) -> dict[str, str]:
    """The master address of every broker the name server knows (GET_BROKER_CLUSTER_INFO), by broker name."""
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI

    with BlockingMQClientAPI(namesrv, ADMIN_TIMEOUT_MS, name="rmq-core-pipeline") as api:
        return dict(sorted(api.master_addrs().items()))


# ------------------------------------------------------------------------------------------------ spark
@dataclass
class SparkFigures:
    """One Spark query's result."""

    rows: int = 0
    tags: Counter[str] = field(default_factory=Counter)
    body_bytes: int = 0
    seconds: float = 0.0
    micro_batches: int = 0
    source: str = ""
    batch_ms: list[tuple[int, dict[str, int]]] = field(default_factory=list)  # (rows, Spark's durationMs) per batch


def spark_unavailable() -> str | None:
    """Why Spark cannot run here (no pyspark/pyarrow, no Java), or None."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"PySpark is not installed ({e}); pip install 'pyspark==4.2.1' pyarrow"
    java_home = os.environ.get("JAVA_HOME")
    if not (shutil.which("java") or (java_home and os.path.exists(os.path.join(java_home, "bin", "java")))):
        return "Java is missing (Spark needs Java 17): install openjdk-17-jdk-headless or set JAVA_HOME"
    return None


def start_spark(master: str) -> Any:
    """A local SparkSession with the ``rocketmq`` data source registered; quiet logs, no console progress bars,
    2 shuffle partitions. The driver's Python workers run this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local[*] only: no warning about the host's address
    import warnings

    with warnings.catch_warnings():  # PySpark 4.2 warns about pandas 3 at import; the job does not use pandas
        warnings.filterwarnings("ignore", message=".*pandas.*", category=FutureWarning)
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master(master)
            .appName("rmq-core pipeline")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
    spark.sparkContext.setLogLevel("ERROR")
    from rmq_core.spark import register

    register(spark)
    return spark


def _tag_rows(df: Any) -> list[Any]:
    from pyspark.sql import functions as F

    return df.groupBy("tags").agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("body")).alias("bytes")).collect()


def spark_streaming(
    spark: Any, namesrv: str, topic: str, expected: int, cfg: PipelineConfig, checkpoint: str, timeout_s: float
) -> SparkFigures:
    """Structured Streaming over the topic (``namesrv`` source, from the earliest offsets, at most
    ``expected / cfg.micro_batches`` messages per micro-batch, triggers back to back): per-tag counts and body bytes
    accumulated in foreachBatch; stopped once it has seen ``expected`` rows (or after ``timeout_s``, or when the
    query fails — both raise)."""
    fig = SparkFigures(source=f"namesrv {namesrv}")
    lock = threading.Lock()
    progress = Progress("spark streaming", expected)

    def on_batch(df: Any, epoch_id: int) -> None:
        rows = _tag_rows(df)
        with lock:
            fig.micro_batches += 1
            for r in rows:
                fig.tags[r["tags"] or ""] += int(r["n"])
                fig.rows += int(r["n"])
                fig.body_bytes += int(r["bytes"] or 0)
            progress.update(fig.rows)

    per_trigger = max(1, math.ceil(expected / cfg.micro_batches))
    stream = (
        spark.readStream.format("rocketmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .option("pullBatchSize", str(PULL_BATCH))
        .load()
    )
    started = time.perf_counter()
    query = (
        stream.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .queryName(f"pipeline_{cfg.run_id}")
        .start()
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            with lock:
                seen = fig.rows
            if seen >= expected:
                break
            if not query.isActive:
                raise RuntimeError(
                    f"the streaming query stopped after {seen:,} of {expected:,} rows: {query.exception()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the streaming query saw {seen:,} of {expected:,} rows in {timeout_s:.0f} s")
            query.awaitTermination(0.1)
        fig.seconds = time.perf_counter() - started
        # one more trigger: a duplicate or a stray row after the last expected one would show up in the counts
        time.sleep(0.5)
    finally:
        query.stop()
    progress.update(fig.rows, final=True)
    for pr in query.recentProgress:
        d = pr.durationMs if hasattr(pr, "durationMs") else pr["durationMs"]
        rows = pr.numInputRows if hasattr(pr, "numInputRows") else pr["numInputRows"]
        if rows:
            fig.batch_ms.append((int(rows), {k: int(v) for k, v in dict(d).items()}))
    return fig


def spark_batch(spark: Any, readers: Sequence[dict[str, str]], topic: str, source: str) -> SparkFigures:
    """A batch query over the topic: per-tag counts and body bytes in one pass over the union of ``readers`` (the
    options of one ``rocketmq`` read each: the path source reads one broker's store directory)."""
    fig = SparkFigures(source=source)
    started = time.perf_counter()
    frames = [
        spark.read.format("rocketmq")
        .option("topic", topic)
        .option("pullBatchSize", str(PULL_BATCH))
        .options(**o)
        .load()
        for o in readers
    ]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    for r in _tag_rows(df):
        fig.tags[r["tags"] or ""] += int(r["n"])
        fig.rows += int(r["n"])
        fig.body_bytes += int(r["bytes"] or 0)
    fig.seconds = time.perf_counter() - started
    fig.micro_batches = 1
    return fig


# ------------------------------------------------------------------------------------------------ the job
@dataclass
class Report:
    """What the job prints; ``failures`` lists every check that did not agree."""

    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)

    def check(self, ok: bool, what: str) -> None:
        self.lines.append(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            self.failures.append(what)


def _fmt_tags(c: Counter[str]) -> str:
    return ", ".join(f"{t}={c.get(t, 0):,}" for t, _ in TAG_WEIGHTS) + (
        ""
        if set(c) <= {t for t, _ in TAG_WEIGHTS}
        else ", " + ", ".join(f"{t}={n:,}" for t, n in sorted(c.items()) if t not in dict(TAG_WEIGHTS))
    )


@dataclass
class Cluster:
    """Where the job runs: the name server and each master broker (name → address; store directory when the job
    started the node)."""

    namesrv: str
    brokers: dict[str, str]
    store_dirs: dict[str, str] = field(default_factory=dict)
    pids: Callable[[], dict[str, int]] = dict  # the broker processes running now (a node's), by broker name


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process (this one by default) from /proc (0.0 where there is no /proc)."""
    try:
        with open(f"/proc/{pid or 'self'}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


@dataclass
class CpuMeter:
    """Cores used between ``start`` and ``stop`` by this process and by each broker process of a node."""

    cluster: Cluster
    wall: float = 0.0
    own: float = 0.0
    brokers: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self.wall, self.own = time.perf_counter(), cpu_seconds()
        self.brokers = {n: cpu_seconds(pid) for n, pid in self.cluster.pids().items()}

    def stop(self) -> str:
        """``job process 1.2 cores, pipeline-0 0.4, ...`` (cores = CPU seconds / wall seconds)."""
        wall = max(time.perf_counter() - self.wall, 1e-9)
        parts = [f"job process (producer, consumers, name server) {(cpu_seconds() - self.own) / wall:.2f} cores"]
        for n, pid in self.cluster.pids().items():
            parts.append(f"{n} {(cpu_seconds(pid) - self.brokers.get(n, 0.0)) / wall:.2f}")
        return ", ".join(parts) + f" over {wall:.1f} s"


def resolve_brokers(spec: str) -> int:
    """``--brokers``: a number, or ``auto`` (one broker per AUTO_CORES_PER_BROKER cores the process may use, at
    least 1: BROKERS_HELP says what was measured)."""
    from rmq_core.node import cores_available

    if spec == "auto":
        return max(1, cores_available() // AUTO_CORES_PER_BROKER)
    try:
        n = int(spec)
    except ValueError:
        raise ValueError(f"--brokers must be a number or auto, not {spec!r}") from None
    if not 1 <= n <= MAX_BROKERS:
        raise ValueError(f"--brokers must be in 1..{MAX_BROKERS} or auto")
    return n


def write_broker_conf(cfg: PipelineConfig, path: str) -> str:
    """The node's broker.conf: the job's CommitLog file size; pulls of up to PULL_BATCH messages (RocketMQ's
    maxTransferCountOnMessageInMemory, 32 by default: Spark's reads ask for more)."""
    props = {
        "mappedFileSizeCommitLog": cfg.commit_log_file_mb << 20,
        "mappedFileSizeConsumeQueue": 300_000 * 20,
        "maxTransferCountOnMessageInMemory": PULL_BATCH,
    }
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{k}={v}\n" for k, v in props.items())
    return path


@contextlib.contextmanager
def node_cluster(cfg: PipelineConfig, brokers: int) -> Iterator[Cluster]:
    """A node (rmq_core.node.Node) of ``brokers`` broker processes over cfg.dir, its name server in this process
    (ports 0: free ones); the brokers' own lines go to <dir>/node.log."""
    from rmq_core.node import Node

    root = os.path.abspath(cfg.dir)
    os.makedirs(root, exist_ok=True)
    conf = write_broker_conf(cfg, os.path.join(root, "pipeline-broker.conf"))
    with open(os.path.join(root, NODE_LOG), "a", encoding="utf-8") as out:
        node = Node(
            brokers,
            store_path_root_dir=root,
            namesrv_port=0,
            base_port=0,
            cluster="PipelineCluster",
            name="pipeline",
            broker_conf=conf,
            out=out,
        )
        with node:
            yield Cluster(
                node.namesrv_addr,
                dict(node.broker_addrs),
                {b.name: os.path.abspath(b.store_dir) for b in node.brokers},
                lambda: {b.name: b.process.pid for b in node.brokers if b.process is not None},
            )


def run_pipeline(cfg: PipelineConfig) -> int:
    """Run the job; 0 if every check agrees, 1 if one does not or a step fails, 2 for bad options."""
    with job_logging() as benign:
        return _run(cfg, benign)


def wait_for_refused_pulls(benign: _BenignFilter) -> float:
    """A pull refused with SUBSCRIPTION_NOT_LATEST (sent while the group rebalanced, before the new subscription's
    heartbeat reached its broker) is retried PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION (3 s) later, as RocketMQ's push
    consumer does: wait for those retries before producing, so they do not stall the measured consumption.
    Returns the seconds waited."""
    from rmq_core.client.consumer.push_consumer import PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION

    time.sleep(0.3)  # the answers to the pulls sent when the group settled
    if benign.last_pull_refusal is None:
        return 0.0
    wait = benign.last_pull_refusal + PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION / 1000 + 0.3 - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    return max(0.0, wait)


def _run(cfg: PipelineConfig, benign: _BenignFilter) -> int:
    problem = cfg.validate()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        brokers = 0 if cfg.namesrv else resolve_brokers(cfg.brokers)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    spark_reason = None if cfg.spark else "--no-spark"
    if cfg.spark:
        missing = spark_unavailable()
        if missing:
            print(f"warning: skipping the Spark queries: {missing}", file=sys.stderr)
            spark_reason = missing
    run_spark = spark_reason is None
    if cfg.namesrv is None and cfg.fresh and os.path.isdir(cfg.dir):
        shutil.rmtree(cfg.dir)
    topic = f"{cfg.topic}_{cfg.run_id}"
    group = f"pipeline_group_{cfg.run_id}"
    report = Report()
    produced = Produced()
    recorder = ConsumeRecorder()
    streaming: SparkFigures | None = None
    batch: SparkFigures | None = None
    consumers_split: list[set[QueueRef]] = []
    cluster: Cluster | None = None
    cpu_line = ""
    mode = (
        f"existing cluster, name server {cfg.namesrv}"
        if cfg.namesrv
        else f"a node of {brokers} broker(s) (--brokers {cfg.brokers}), store {cfg.dir}"
    )
    print(
        f"rmq-core pipeline: {cfg.messages:,} messages, topic {topic} ({cfg.queues} queues per broker), {mode}, "
        f"spark={'on (' + cfg.spark_master + ')' if run_spark else 'off'}",
        flush=True,
    )
    spark = None
    checkpoint = tempfile.mkdtemp(prefix="rmq-pipeline-ckpt-")
    total_started = time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            if cfg.namesrv:
                cluster = Cluster(cfg.namesrv, master_brokers(cfg.namesrv))
                if not cluster.brokers:
                    raise RuntimeError(f"the name server {cfg.namesrv} knows no master broker")
                step(f"using the cluster behind {cfg.namesrv}: masters {', '.join(cluster.brokers.values())}")
            else:
                step(
                    f"starting a node: a name server in-process and {brokers} broker process(es) "
                    f"(store {os.path.abspath(cfg.dir)}, their log {os.path.join(cfg.dir, NODE_LOG)})"
                )
                cluster = stack.enter_context(node_cluster(cfg, brokers))
                step(
                    f"name server {cluster.namesrv}, brokers "
                    + ", ".join(f"{n}@{a}" for n, a in cluster.brokers.items())
                )
            namesrv = cluster.namesrv
            total_queues = cfg.queues * len(cluster.brokers)
            create_topic(namesrv, topic, cfg.queues, list(cluster.brokers.values()))
            step(f"created topic {topic}: {cfg.queues} queues on each of {len(cluster.brokers)} broker(s)")

            from rmq_core.client import ConsumeFromWhere, PushConsumer

            consumers = []
            for name in ("consumer-1", "consumer-2"):
                c = PushConsumer(
                    group,
                    namesrv_addr=namesrv,
                    instance_name=f"pipeline-{name}-{cfg.run_id}",
                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                    consume_message_batch_max_size=32,
                    pull_batch_size=cfg.pull_batch,
                    consume_thread_min=2,
                    consume_thread_max=2,
                    rebalance_interval_ms=1000,
                    heartbeat_broker_interval=1000,
                    persist_consumer_offset_interval=1000,
                    poll_name_server_interval=1000,
                )
                c.subscribe(topic, "*")
                c.register_message_listener(recorder.listener(name))
                c.start()
                stack.callback(c.shutdown)
                consumers.append(c)
            consumers_split = wait_for_balance(consumers, topic, total_queues)
            step(
                "consumer group "
                + group
                + ": "
                + "; ".join(f"consumer-{i + 1} holds {describe_queues(q)}" for i, q in enumerate(consumers_split))
            )
            waited = wait_for_refused_pulls(benign)
            if waited:
                step(f"waited {waited:.1f} s for the pulls refused while the group rebalanced (retried after 3 s)")

            step(f"producing {cfg.messages:,} messages" + (f" at {cfg.rate:,} msg/s" if cfg.rate else ""))
            progress = Progress("consume", cfg.messages)
            meter = CpuMeter(cluster)
            meter.start()
            produce(namesrv, topic, cfg, produced, total_queues)

            deadline = time.monotonic() + cfg.consume_timeout_s
            while recorder.unique < produced.count and time.monotonic() < deadline:
                progress.update(recorder.unique)
                time.sleep(0.05)
            time.sleep(0.3)  # a late duplicate would show up here
            progress.update(recorder.unique, final=True)
            cpu_line = meter.stop()
            for c in consumers:
                c.shutdown()

            if run_spark:  # started after the consumers so that the JVM's start does not slow the figures above
                step(f"starting Spark ({cfg.spark_master})")
                spark = start_spark(cfg.spark_master)
                step("Spark Structured Streaming over the topic (namesrv source, from the earliest offsets)")
                streaming = spark_streaming(
                    spark, namesrv, topic, produced.count, cfg, checkpoint, timeout_s=max(120.0, produced.count / 1000)
                )
                if cfg.namesrv:
                    step("Spark batch query over the topic (namesrv source)")
                    batch = spark_batch(
                        spark,
                        [{"namesrv": namesrv, "startingOffsets": "earliest", "endingOffsets": "latest"}],
                        topic,
                        f"namesrv {namesrv}",
                    )
                else:  # the path source reads the files read-only (no lock, no recovery): the brokers keep running
                    assert cluster is not None
                    step(
                        f"Spark batch query over the brokers' store directories (path source, one per broker: "
                        f"{', '.join(cluster.store_dirs.values())}; brokers running)"
                    )
                    batch = spark_batch(
                        spark,
                        [{"path": d, "brokerName": name} for name, d in cluster.store_dirs.items()],
                        topic,
                        f"path, one read per running broker's store under {cfg.dir}: {len(cluster.store_dirs)}",
                    )
            if cfg.namesrv is None:
                step("shutting down the node (brokers, then the name server)")
    except Exception as e:
        print(f"error: the pipeline failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)

    total_s = time.perf_counter() - total_started
    consume_s = max(recorder.last - recorder.first, 1e-9)
    report.add(f"report (run {cfg.run_id}, {total_s:.1f} s in all)")
    report.add(
        f"  produced   {produced.count:,} messages ({produced.body_bytes:,} body bytes) in {produced.seconds:.2f} s"
        f" = {produced.count / max(produced.seconds, 1e-9):,.0f} msg/s"
    )
    report.add(
        f"  consumed   {recorder.unique:,} messages in {consume_s:.2f} s = {recorder.unique / consume_s:,.0f} msg/s"
        f" (first to last delivery; the producer paces it)"
    )
    per_broker = sorted(set(produced.per_broker) | set(recorder.per_broker))
    if per_broker:
        report.add(
            "  per broker "
            + "; ".join(
                f"{b}: produced {produced.per_broker.get(b, 0):,} "
                f"({produced.per_broker.get(b, 0) / max(produced.seconds, 1e-9):,.0f} msg/s), consumed "
                f"{recorder.per_broker.get(b, 0):,} ({recorder.per_broker.get(b, 0) / consume_s:,.0f} msg/s)"
                for b in per_broker
            )
        )
    if cpu_line:
        report.add(f"  cpu        produce + consume: {cpu_line}")
    report.add(
        "  split      "
        + ", ".join(
            f"{n}={recorder.per_consumer.get(n, 0):,} ({describe_queues(q)})"
            for n, q in zip(("consumer-1", "consumer-2"), consumers_split or [set(), set()])
        )
    )
    report.add(
        f"  latency    born → consumed p50 {percentile(recorder.latencies_ms, 50):.0f} ms, "
        f"p99 {percentile(recorder.latencies_ms, 99):.0f} ms"
    )
    report.add(f"  produced   per tag: {_fmt_tags(produced.tags)}")
    report.add(f"  consumed   per tag: {_fmt_tags(recorder.tags)}")
    for label, fig in (("streaming", streaming), ("batch", batch)):
        if fig is not None:
            report.add(f"  spark {label:<9} per tag: {_fmt_tags(fig.tags)}")
            report.add(
                f"  spark {label:<9} {fig.rows:,} rows in {fig.seconds:.2f} s = "
                f"{fig.rows / max(fig.seconds, 1e-9):,.0f} rows/s ({fig.micro_batches} batch(es); {fig.source})"
            )
            if len(fig.batch_ms) > 1:
                rates = [rows * 1000 / max(d.get("triggerExecution", 0), 1) for rows, d in fig.batch_ms]
                report.add(
                    f"  spark {label:<9} per micro-batch (Spark's triggerExecution): first "
                    f"{rates[0]:,.0f} rows/s (starts the Python workers), then median "
                    f"{statistics.median(rates[1:]):,.0f} rows/s"
                )
    report.add("checks")
    report.check(produced.count == cfg.messages, f"produced {produced.count:,} of {cfg.messages:,}")
    report.check(
        recorder.unique == produced.count
        and recorder.tags == produced.tags
        and recorder.body_bytes == produced.body_bytes,
        f"the group consumed every message: {recorder.unique:,} of {produced.count:,}, per tag and bytes equal",
    )
    report.check(recorder.duplicates == 0, f"duplicates = {recorder.duplicates}")
    report.check(
        all(recorder.per_consumer.get(n, 0) > 0 for n in ("consumer-1", "consumer-2")), "both consumers consumed"
    )
    if spark_reason is None:
        for label, fig in (("streaming", streaming), ("batch", batch)):
            ok = (
                fig is not None
                and fig.tags == produced.tags
                and fig.rows == produced.count
                and fig.body_bytes == produced.body_bytes
            )
            report.check(ok, f"spark {label} per-tag counts and body bytes equal what was produced")
    else:
        report.add(f"  [skipped] Spark queries: {spark_reason}")
    print("\n".join(report.lines), flush=True)
    if report.failures:
        print(f"error: {len(report.failures)} check(s) failed: " + "; ".join(report.failures), file=sys.stderr)
        return 1
    print("ok: every check agrees", flush=True)
    return 0
