"""The ``rmq-core`` command line: ``serve`` (name server + broker in one process), ``namesrv``, ``broker``,
``topic create|list``, ``send``, ``consume``, ``store demo|inspect|verify``, ``admin ...`` (rmq_core.admin_cli:
cluster-list, topic-status, consumer-progress, query-by-id, query-by-key, reset-offset-by-time), ``pipeline`` (the
main job: rmq_core.pipeline).

Servers run until SIGTERM or SIGINT, then shut down cleanly (the broker flushes its store and persists its configs).

``store demo`` is the main job on embedded defaults: it writes a stream of tagged messages into a local store
directory, reads every queue back with a tag filter through get_message (the pull path), checks what came back
against what was written, and prints what it did and how fast.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from rmq_core import backend
from rmq_core.cli_credentials import add_credential_args, credentials
from rmq_core.filter import build_subscription_data
from rmq_core.message import Message, tags_hash
from rmq_core.store import GetMessageStatus, MessageStore, StoreConfig


def _progress(label: str, done: int, total: int, started: float) -> None:
    if not sys.stderr.isatty() and done != total:
        return
    rate = done / max(time.perf_counter() - started, 1e-9)
    end = "\n" if done == total else "\r"
    print(f"  {label}: {done:,}/{total:,} ({100 * done // max(total, 1)}%, {rate:,.0f}/s)", end=end, file=sys.stderr)


def cmd_store_demo(args: argparse.Namespace) -> int:
    root = args.dir
    if args.fresh and os.path.isdir(root):
        shutil.rmtree(root)
    tags = [t.strip() for t in args.tags.split(",") if t.strip()]
    topic, total, queues = args.topic, args.messages, args.queues
    body = (b"rmq_core demo payload " * (args.size // 22 + 1))[: args.size]
    print(
        f"rmq-core store demo: backend={backend()} dir={root} topic={topic} queues={queues} "
        f"messages={total:,} body={args.size} B tags={tags}"
    )
    expected: Counter[tuple[int, str]] = Counter()
    with MessageStore(root, StoreConfig()) as store:
        base = {q: store.get_max_offset_in_queue(topic, q) for q in range(queues)}
        started = time.perf_counter()
        written = 0
        append_s = 0.0
        while written < total:
            n = min(args.batch, total - written)
            batch = []
            for i in range(written, written + n):
                q = i % queues
                tag = tags[(i // queues) % len(tags)]  # every queue gets every tag, interleaved
                batch.append((Message(topic, body, tags=tag, keys=f"k{i}", properties={"seq": str(i)}), q))
                expected[(q, tag)] += 1
            t0 = time.perf_counter()
            results = store.put_messages(batch)
            append_s += time.perf_counter() - t0
            if not results.all_ok:
                print(f"error: put failed: {set(results.statuses)}", file=sys.stderr)
                return 1
            written += n
            _progress("write", written, total, started)
        store.flush()
        write_s = time.perf_counter() - started

        want = args.read_tag or tags[0]
        sub = build_subscription_data(topic, want)
        started = time.perf_counter()
        got: Counter[tuple[int, str | None]] = Counter()
        records = 0
        for q in range(queues):
            offset = base[q]
            while True:
                r = store.get_message("demo-group", topic, q, offset, 32, want)
                if r.status == GetMessageStatus.FOUND:
                    for m in r.decode():
                        if m.tags not in sub.tags_set:
                            print(f"error: filter let through tag {m.tags!r} at {q}:{m.queue_offset}", file=sys.stderr)
                            return 1
                        got[(q, m.tags)] += 1
                        records += 1
                elif r.status != GetMessageStatus.NO_MATCHED_MESSAGE:
                    break
                offset = r.next_begin_offset
        read_s = time.perf_counter() - started
        max_phy = store.max_physical_offset

    mismatched = [q for q in range(queues) if got[(q, want)] != expected[(q, want)]]
    print(
        f"  wrote {total:,} messages ({max_phy:,} bytes of CommitLog) in {write_s:.2f} s "
        f"= {total / write_s:,.0f} msg/s end to end; the store's put_messages alone: {append_s:.2f} s "
        f"= {total / max(append_s, 1e-9):,.0f} msg/s (the rest is building Message objects in Python)"
    )
    print(
        f"  read back tag {want!r} (hash {tags_hash(want)}): {records:,} messages from {queues} queues in "
        f"{read_s:.2f} s = {records / max(read_s, 1e-9):,.0f} msg/s"
    )
    for q in range(queues):
        print(f"    queue {q}: {got[(q, want)]:,} {want} (expected {expected[(q, want)]:,})")
    if mismatched:
        print(f"error: queues {mismatched} did not return what was written", file=sys.stderr)
        return 1
    print("  ok: every message written with that tag was read back, and nothing else")
    return 0


def _store_root_and_sizes(args: argparse.Namespace):
    """The store directory (``dir``, else the ``-c`` broker.conf's storePathRootDir) and its mapped file sizes."""
    from rmq_core.store_verify import store_file_sizes

    root = args.dir
    if root is None:
        if args.config is None:
            raise SystemExit("error: give the store directory or -c broker.conf")
        from rmq_core.broker import BrokerConfig

        root = BrokerConfig.from_properties_file(args.config).store_path_root_dir
    if not os.path.isdir(root):
        raise SystemExit(f"error: {root} is not a directory")
    return root, store_file_sizes(root, args.config)


def _size(n: int | None) -> str:
    if n is None:
        return "unknown (no file tells)"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"


def cmd_store_inspect(args: argparse.Namespace) -> int:
    """Read-only (no recovery, no lock): files, mapped file sizes, and every queue's offsets."""
    from rmq_core.format import ABORT_FILE, COMMITLOG_DIR
    from rmq_core.format.file_name import list_mapped_files
    from rmq_core.store_reader import StoreReader

    root, sizes = _store_root_and_sizes(args)
    print(f"store {root} (backend={backend()}, read-only)")
    print(f"  commitlog file size: {_size(sizes.commit_log)}, consumequeue file size: {_size(sizes.consume_queue)}")
    print(f"  sizes from: {sizes.source}")
    for msg in sizes.mismatches():
        print(f"  warning: {msg}")
    files = list_mapped_files(os.path.join(root, COMMITLOG_DIR))
    names = [os.path.basename(p) for _, p in files]
    print(f"  commitlog files: {len(files)}" + (f" ({names[0]} .. {names[-1]})" if files else ""))
    with StoreReader(root, sizes.commit_log, sizes.consume_queue) as reader:
        print(f"  commitlog: first physical offset {reader.min_physical_offset:,}")
        for topic, q in reader.queues():
            print(
                f"  consumequeue {topic}/{q}: offsets [{reader.min_offset(topic, q):,}, {reader.max_offset(topic, q):,})"
            )
    clean = not os.path.exists(os.path.join(root, ABORT_FILE))
    print(f"  last shutdown: {'clean' if clean else 'not clean (abort file present: the next open recovers)'}")
    return 0


def cmd_store_verify(args: argparse.Namespace) -> int:
    """Read-only: every CommitLog record (structure, offset, body CRC) and every ConsumeQueue unit checked; each
    problem printed with its file and offset."""
    from rmq_core.store_verify import verify_store

    root, sizes = _store_root_and_sizes(args)
    print(
        f"verifying {root} (read-only): commitlog file size {_size(sizes.commit_log)}, "
        f"consumequeue file size {_size(sizes.consume_queue)}, from {sizes.source}",
        flush=True,
    )
    report = verify_store(root, sizes)
    for p in report.problems:
        print(f"  problem: {p}")
    print(
        f"verified {report.records:,} records in {report.commit_log_files} commitlog files "
        f"(data ends at {report.data_end:,}) and {report.units:,} units in {report.queues} queues: "
        + (f"{len(report.problems)} problem(s)" if report.problems else "ok")
    )
    return 1 if report.problems else 0


def _catch_stop_signals() -> list[int]:
    """From now on SIGTERM/SIGINT only append to the list returned; the shutdown runs on the main thread. (Not an
    ``Event``: a handler calling ``Event.set`` runs on the main thread, and when it interrupts that thread inside
    ``Event.wait`` while the event's lock is held, ``set`` waits for that lock forever.)"""
    import signal

    stop: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stop.append(signum))
    return stop


def _wait_for_signal(stop: list[int] | None = None, until: Callable[[], bool] = lambda: False) -> None:
    """Block until SIGTERM/SIGINT (caught from ``_catch_stop_signals``, or from now) or ``until()``."""
    stop = _catch_stop_signals() if stop is None else stop
    while not stop and not until():
        time.sleep(0.2)


def _broker_config(args: argparse.Namespace, namesrv_addr: str | None):
    from rmq_core.broker import BrokerConfig

    cfg = BrokerConfig.from_properties_file(args.config) if getattr(args, "config", None) else BrokerConfig()
    if args.dir is not None:
        cfg.store_path_root_dir = args.dir
    if args.port is not None:
        cfg.listen_port = args.port
    if args.name is not None:
        cfg.broker_name = args.name
    if args.cluster is not None:
        cfg.broker_cluster_name = args.cluster
    if namesrv_addr:
        cfg.namesrv_addr = namesrv_addr
    if getattr(args, "grpc_port", None) is not None:
        _require_grpc_extra()
        cfg.grpc_port = args.grpc_port
    if getattr(args, "grpc_tls_cert", None) is not None:
        cfg.grpc_tls_cert_file = args.grpc_tls_cert
    if getattr(args, "grpc_tls_key", None) is not None:
        cfg.grpc_tls_key_file = args.grpc_tls_key
    if getattr(args, "grpc_tls_self_signed", False):
        cfg.grpc_tls_self_signed = True
    return cfg


def _require_grpc_extra() -> None:
    """``--grpc-port`` without the ``rmq_core[grpc]`` extra: one line, exit 1."""
    from rmq_core.broker.grpc import require_grpc
    from rmq_core.cli_errors import CliError

    try:
        require_grpc()
    except RuntimeError as e:
        raise CliError(f"--grpc-port: {e}") from None


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    from rmq_core.broker import Broker
    from rmq_core.namesrv import NameServer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.brokers is not None:
        return _serve_node(args)
    if args.slave_of is not None or args.namesrv_addr is not None:
        print("rmq-core serve: --slave-of and -n need --brokers", file=sys.stderr)
        return 2
    namesrv = NameServer(listen_port=args.namesrv_port, host=args.host)
    _listen(namesrv.start, "name server", args.namesrv_port, "--namesrv-port")
    try:
        cfg = _broker_config(args, namesrv.address)
        cfg.broker_ip1 = args.host
        broker = Broker(cfg)
        stop = _catch_stop_signals()  # before the start line: whoever reads it may send SIGTERM at once
        _listen(broker.start, "broker", cfg.listen_port, "--port (or listenPort in the -c broker.conf)")
        print(
            f"rmq-core serve: name server {namesrv.address}, broker {cfg.broker_name}@{broker.address}, "
            f"store {cfg.store_path_root_dir}" + _grpc_line(broker),
            flush=True,
        )
        try:
            _wait_for_signal(stop)
        finally:
            print("rmq-core serve: shutting down", flush=True)
            broker.shutdown()
    finally:
        namesrv.shutdown()
    return 0


def _grpc_line(broker: Any) -> str:
    addr = broker.controller.grpc_address
    return f", gRPC {addr}" if addr is not None else ""


def _listen(start: Callable[[], object], what: str, port: int, flag: str) -> None:
    """``start()`` of a server listening on ``port``; a port in use becomes one line naming the flag to change."""
    from rmq_core.cli_errors import CliError, port_in_use, port_in_use_line

    try:
        start()
    except OSError as e:
        if port_in_use(e):
            raise CliError(port_in_use_line(what, port, flag)) from e
        raise


def _serve_node(args: argparse.Namespace) -> int:
    """``serve --brokers N|auto``: a name server and N supervised broker processes (rmq_core.node.Node)."""
    from rmq_core.node import GrpcTls, Node, NodeError

    if args.grpc_port is not None:
        _require_grpc_extra()
    tls = GrpcTls(args.grpc_tls_cert, args.grpc_tls_key, args.grpc_tls_self_signed)
    stop = _catch_stop_signals()  # before the start: a SIGTERM while brokers start still stops them all
    try:
        node = Node(
            args.brokers,
            store_path_root_dir=args.dir or "./rmq-store",
            namesrv_port=args.namesrv_port,
            base_port=10911 if args.port is None else args.port,
            cluster=args.cluster or "DefaultCluster",
            name=args.name,
            host=args.host,
            broker_conf=args.config,
            namesrv_addr=args.namesrv_addr,
            slave_of=args.slave_of,
            grpc_port=args.grpc_port,
            grpc_tls=tls if tls.flags() else None,
        )
        node.start()
    except (NodeError, ValueError) as e:
        print(f"rmq-core serve: {e}", file=sys.stderr)
        return 2
    role = f"slaves of the node at {node.slave_of}" if node.slave_of else "brokers"
    lines = [f"rmq-core serve: name server {node.namesrv_addr}, cluster {node.cluster}, {len(node.brokers)} {role}:"]
    lines += [
        f"  {b.name}@{node.broker_addrs[b.name]} (HA port {b.port + 1}"
        + ("" if b.grpc_port is None else f", gRPC port {b.grpc_port or 'free'}")
        + f") store {b.store_dir}"
        for b in node.brokers
    ]
    node.say("\n".join(lines))  # whole: the brokers' relayed lines never split it
    try:
        _wait_for_signal(stop, until=lambda: node.failure is not None)
    finally:
        node.say("rmq-core serve: shutting down")
        node.shutdown()
    if not node.ok:
        print(f"rmq-core serve: {node.failure or '; '.join(node.failed_stops)}", file=sys.stderr)
    return 0 if node.ok else 1


def cmd_namesrv(args: argparse.Namespace) -> int:
    import logging

    from rmq_core.namesrv import NameServer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    namesrv = NameServer(listen_port=args.port, host=args.host)
    stop = _catch_stop_signals()  # before the start line, as the broker's
    _listen(namesrv.start, "name server", args.port, "--port")
    print(f"rmq-core namesrv: listening on {namesrv.address}", flush=True)
    try:
        _wait_for_signal(stop)
    finally:
        namesrv.shutdown()
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    import logging

    from rmq_core.broker import Broker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = _broker_config(args, args.namesrv_addr)
    if args.host is not None:
        cfg.broker_ip1 = args.host
    if args.metrics_port is not None:
        cfg.metrics_prom_exporter_port = args.metrics_port
    # 4.9 BrokerStartup: a master is brokerId 0; a slave needs brokerId > 0
    if cfg.broker_role in ("ASYNC_MASTER", "SYNC_MASTER"):
        cfg.broker_id = 0
    elif cfg.broker_role == "SLAVE" and cfg.broker_id <= 0:
        print("Slave's brokerId must be > 0", file=sys.stderr)
        return 3
    broker = Broker(cfg)
    stop = _catch_stop_signals()  # before the start line: a node may send SIGTERM as soon as it reads that line
    _listen(broker.start, "broker", cfg.listen_port, "--port (or listenPort in the -c broker.conf)")
    print(
        f"rmq-core broker: {cfg.broker_name}@{broker.address} cluster={cfg.broker_cluster_name} "
        f"namesrv={cfg.namesrv_addr or '-'} store={cfg.store_path_root_dir} role={cfg.broker_role} "
        f"ha={broker.controller.replication.ha_server_addr()}" + _grpc_line(broker),
        flush=True,
    )
    if broker.controller.metrics_address is not None:
        print(f"rmq-core broker: metrics at http://{broker.controller.metrics_address}/metrics", flush=True)
    try:
        _wait_for_signal(stop)
    finally:
        broker.shutdown()
    return 0


def cmd_topic_create(args: argparse.Namespace) -> int:
    from rmq_core.client.admin import Admin
    from rmq_core.client.exceptions import RocketMQRpcError
    from rmq_core.common.mix_all import validate_topic
    from rmq_core.common.topic_config import TopicConfig

    problem = validate_topic(args.topic)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    config = TopicConfig(args.topic, args.queues, args.queues, args.perm, order=args.order)
    _quiet_client_log(args)
    with Admin(args.namesrv, instance_name="rmq-core-cli", **credentials(args)) as admin:
        if args.broker:
            targets = [("", args.broker)]
        else:
            try:
                targets = sorted(admin.master_addrs(args.cluster or None).items())
            except RocketMQRpcError as e:
                from rmq_core.cli_errors import CliError, one_line

                raise CliError(f"name server {args.namesrv}: {one_line(e, args.namesrv)}") from e
        if not targets:
            print("error: no broker to create the topic on", file=sys.stderr)
            return 1
        failed = 0
        for name, addr in targets:
            try:
                admin.create_and_update_topic_config(addr, config)
                problem = None
            except RocketMQRpcError as e:
                problem = f"{e.response_code} {e.remark}"
                failed += 1
            print(
                f"{'created' if problem is None else 'FAILED'} {args.topic} on {name or addr} ({addr})"
                + ("" if problem is None else f": {problem}")
            )
    return 1 if failed else 0


def cmd_topic_list(args: argparse.Namespace) -> int:
    from rmq_core.client.admin import Admin

    _quiet_client_log(args)
    with Admin(args.namesrv, instance_name="rmq-core-cli", **credentials(args)) as admin:
        topics = admin.fetch_all_topic_list()  # a failure: one line (cli_errors)
    for topic in sorted(topics.topic_list):
        print(topic)
    return 0


def _quiet_client_log(args: argparse.Namespace) -> None:
    """A one-shot command reports its own failures in one line: the clients' warnings about the same failure (the
    name server unreachable, no route) are not shown unless ``--debug``."""
    import logging

    if not getattr(args, "debug", False):
        logging.getLogger("rmq_core.client").setLevel(logging.ERROR)


def cmd_send(args: argparse.Namespace) -> int:
    from rmq_core.cli_errors import failure_line
    from rmq_core.client import Producer
    from rmq_core.message import Message

    _quiet_client_log(args)

    if args.body == "-":
        body = sys.stdin.buffer.read()
    elif args.body is not None:
        body = args.body.encode("utf-8")
    else:
        body = b"x" * args.size
    props = {}
    for kv in args.property or []:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            print(f"error: --property wants key=value, got {kv!r}", file=sys.stderr)
            return 2
        props[k] = v
    producer = Producer(args.group, namesrv_addr=args.namesrv, **credentials(args))
    producer.start()
    failed = 0
    started = time.perf_counter()
    try:
        for i in range(args.count):
            msg = Message(
                args.topic,
                body,
                tags=args.tags,
                keys=(args.keys.replace("{i}", str(i)) if args.keys else None),
                properties=dict(props),
                delay_time_level=args.delay,
                deliver_time_ms=(
                    time.time_ns() // 1_000_000 + args.deliver_after_ms if args.deliver_after_ms > 0 else None
                ),
            )
            try:
                r = producer.send(msg)
            except Exception as e:  # report and go on: the count of failures is the exit status
                failed += 1
                print(f"FAILED #{i}: {failure_line(e)}", file=sys.stderr)
                if args.debug:
                    raise
                continue
            if args.count <= 20 or args.verbose:
                print(
                    f"{r.send_status.name} msgId={r.msg_id} offsetMsgId={r.offset_msg_id} "
                    f"queue={r.message_queue.broker_name}/{r.message_queue.queue_id} offset={r.queue_offset}"
                )
            _progress("sent", i + 1, args.count, started)
    finally:
        producer.shutdown()
    if args.count > 20 and not args.verbose:
        dt = time.perf_counter() - started
        print(
            f"sent {args.count - failed:,} of {args.count:,} to {args.topic} in {dt:.2f} s "
            f"({(args.count - failed) / max(dt, 1e-9):,.0f} msg/s)"
        )
    return 1 if failed else 0


def cmd_consume(args: argparse.Namespace) -> int:
    import threading

    from rmq_core.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
    from rmq_core.common.mix_all import validate_topic
    from rmq_core.filter import MessageSelector

    problem = validate_topic(args.topic)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    _check_route(args)
    selector = MessageSelector.by_sql(args.sql) if args.sql else MessageSelector.by_tag(args.expression)
    where = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET if args.from_first else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consumer = PushConsumer(args.group, namesrv_addr=args.namesrv, consume_from_where=where, **credentials(args))
    consumer.subscribe(args.topic, selector)
    seen = 0
    done = threading.Event()
    lock = threading.Lock()

    def listener(msgs, context):
        nonlocal seen
        with lock:
            for m in msgs:
                if args.count and seen >= args.count:
                    break
                seen += 1
                body = m.body[:80].decode("utf-8", "replace")
                print(
                    f"{m.topic} {m.broker_name}/{m.queue_id}@{m.queue_offset} tags={m.tags} keys={m.keys} "
                    f"reconsume={m.reconsume_times} body={body!r}",
                    flush=True,
                )
            if args.count and seen >= args.count:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    stop = _catch_stop_signals()  # SIGTERM/Ctrl-C: shut down cleanly (offsets persisted) and print the summary
    consumer.start()
    try:
        deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
        _wait_for_signal(stop, until=lambda: done.is_set() or (deadline is not None and time.monotonic() >= deadline))
    finally:
        consumer.shutdown()
    print(f"consumed {seen:,} message(s) from {args.topic} as {args.group}", file=sys.stderr)
    return 0 if (not args.count or seen >= args.count) else 1


def _check_route(args: argparse.Namespace) -> None:
    """The name server answers and knows the topic, within the command's timeout (else one line, exit 1): a consumer
    started against a wrong name server would wait forever without a word."""
    from rmq_core.cli_errors import CliError, one_line
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
    from rmq_core.client.exceptions import RocketMQRpcError

    _quiet_client_log(args)
    timeout_ms = min(args.timeout, 5.0) * 1000 if args.timeout > 0 else 5000
    with BlockingMQClientAPI(args.namesrv, timeout_ms=timeout_ms, name="rmq-core-cli") as api:
        try:
            api.get_topic_route_info_from_name_server(args.topic)
        except RocketMQRpcError as e:
            raise CliError(one_line(e, args.namesrv, args.topic) or str(e)) from e


def cmd_pipeline(args: argparse.Namespace) -> int:
    from rmq_core.pipeline import PipelineConfig, run_pipeline

    cfg = PipelineConfig(
        messages=args.messages,
        dir=args.dir,
        fresh=args.fresh,
        namesrv=args.namesrv,
        brokers=args.brokers,
        window=args.window,
        spark=not args.no_spark,
        topic=args.topic,
        queues=args.queues,
        batch=args.batch,
        rate=args.rate,
        consume_timeout_s=args.timeout,
        commit_log_file_mb=args.commit_log_file_mb,
        spark_master=args.spark_master,
        micro_batches=args.micro_batches,
    )
    return run_pipeline(cfg)


def build_parser() -> argparse.ArgumentParser:
    from rmq_core.cli_errors import default_namesrv, namesrv_address

    p = argparse.ArgumentParser(prog="rmq-core", description="A RocketMQ core for Python (Rust hot path).")
    p.add_argument(
        "--debug", action="store_true", help="log at DEBUG and show the traceback of a failure (default: one line)"
    )
    sub = p.add_subparsers(dest="command", required=True)
    store = sub.add_parser("store", help="work with a local store directory", description="Local store commands.")
    ssub = store.add_subparsers(dest="store_command", required=True)

    demo = ssub.add_parser("demo", help="write messages, read them back by queue with a tag filter, report speed")
    demo.add_argument("--dir", default="./rmq-store", help="store directory (default ./rmq-store)")
    demo.add_argument("--topic", default="DemoTopic")
    demo.add_argument("--messages", type=int, default=200_000)
    demo.add_argument("--queues", type=int, default=4)
    demo.add_argument("--size", type=int, default=128, help="body size in bytes")
    demo.add_argument("--batch", type=int, default=1000, help="messages per put_messages call")
    demo.add_argument("--tags", default="TagA,TagB,TagC,TagD")
    demo.add_argument("--read-tag", default=None, help="tag to read back (default: the first)")
    demo.add_argument("--fresh", action="store_true", help="delete the directory first")
    demo.set_defaults(func=cmd_store_demo)

    inspect = ssub.add_parser(
        "inspect", help="show files, file sizes and offsets (read-only)", description=cmd_store_inspect.__doc__
    )
    verify = ssub.add_parser(
        "verify", help="check every record and unit, read-only", description=cmd_store_verify.__doc__
    )
    for sp, fn in ((inspect, cmd_store_inspect), (verify, cmd_store_verify)):
        sp.add_argument("dir", nargs="?", help="store directory (default: the -c broker.conf's storePathRootDir)")
        sp.add_argument(
            "-c",
            "--config",
            default=None,
            help="a broker.conf: mappedFileSizeCommitLog / mappedFileSizeConsumeQueue (default: from the files)",
        )
        sp.set_defaults(func=fn)

    def broker_args(sp: argparse.ArgumentParser, with_config: bool) -> None:
        if with_config:
            sp.add_argument("-c", "--config", help="a RocketMQ broker.conf (camelCase keys)")
        sp.add_argument("--dir", default=None, help="store directory (default ./rmq-store)")
        sp.add_argument("--port", type=int, default=None, help="broker port (default 10911; 0 picks a free one)")
        sp.add_argument("--name", default=None, help="broker name")
        sp.add_argument("--cluster", default=None, help="cluster name (default DefaultCluster)")
        sp.add_argument(
            "--grpc-port",
            type=int,
            default=None,
            help="also serve RocketMQ 5 gRPC clients (apache.rocketmq.v2.MessagingService) on this port "
            "(0: any free port; needs rmq_core[grpc])",
        )
        sp.add_argument("--grpc-tls-cert", default=None, help="PEM certificate: TLS beside plaintext on the gRPC port")
        sp.add_argument("--grpc-tls-key", default=None, help="PEM private key of --grpc-tls-cert")
        sp.add_argument(
            "--grpc-tls-self-signed",
            action="store_true",
            help="TLS on the gRPC port with a self-signed certificate made at start (openssl; tests and trials)",
        )

    serve = sub.add_parser(
        "serve",
        help="run a name server and a broker in one process (embedded defaults)",
        description="Name server on 9876 and broker on 10911 over ./rmq-store until SIGTERM/SIGINT.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on and advertise")
    serve.add_argument("--namesrv-port", type=int, default=9876)
    serve.add_argument(
        "-n",
        "--namesrv-addr",
        type=namesrv_address,
        default=None,
        help="with --brokers: start no name server, register the brokers with this one",
    )
    serve.add_argument(
        "--slave-of",
        default=None,
        metavar="NAMESRV",
        help="with --brokers: start no name server; the brokers are slaves (brokerId 1) of the node whose name server "
        "this is (give the same --name and --brokers as that node)",
    )
    serve.add_argument(
        "--brokers",
        default=None,
        help="a node: N broker processes (or 'auto', one per core), names NAME-i, stores DIR/NAME-i, ports from "
        "--port up in steps of 4, supervised (restarted when they die); default: one broker in this process",
    )
    broker_args(serve, with_config=True)
    serve.set_defaults(func=cmd_serve)

    ns = sub.add_parser("namesrv", help="run a name server", description="Run a name server until SIGTERM/SIGINT.")
    ns.add_argument("--host", default="127.0.0.1")
    ns.add_argument("--port", type=int, default=9876)
    ns.set_defaults(func=cmd_namesrv)

    br = sub.add_parser("broker", help="run a broker", description="Run a broker until SIGTERM/SIGINT.")
    br.add_argument(
        "-n", "--namesrv-addr", type=namesrv_address, default=None, help="name servers, 'host:port;host:port'"
    )
    br.add_argument("--host", default=None, help="address to listen on and advertise (brokerIP1)")
    broker_args(br, with_config=True)
    br.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics on this port (0: any free port; needs rmq_core[metrics])",
    )
    br.set_defaults(func=cmd_broker)

    from rmq_core.admin_cli import add_admin_parser

    add_admin_parser(sub)

    topic = sub.add_parser("topic", help="create or list topics", description="Topic administration.")
    tsub = topic.add_subparsers(dest="topic_command", required=True)
    tc = tsub.add_parser("create", help="create or update a topic on a broker or on every broker of a cluster")
    tc.add_argument("topic")
    where = tc.add_mutually_exclusive_group(required=True)
    where.add_argument("-b", "--broker", help="broker address host:port")
    where.add_argument("-n", "--namesrv", type=namesrv_address, help="name server host:port (creates on every master)")
    tc.add_argument("--cluster", default=None, help="with --namesrv: only this cluster's brokers")
    tc.add_argument("--queues", type=int, default=8, help="read and write queue numbers (default 8)")
    tc.add_argument("--perm", type=int, default=6, help="permission bits (default 6 = read|write)")
    tc.add_argument("--order", action="store_true", help="an ordered topic")
    add_credential_args(tc)
    tc.set_defaults(func=cmd_topic_create)
    tl = tsub.add_parser("list", help="list topics the name server knows")
    tl.add_argument("-n", "--namesrv", type=namesrv_address, default=default_namesrv())
    add_credential_args(tl)
    tl.set_defaults(func=cmd_topic_list)

    snd = sub.add_parser(
        "send",
        help="send messages with the rmq_core producer",
        description="Send messages to a topic through a name server (sync sends, one per message).",
    )
    snd.add_argument("topic")
    snd.add_argument("body", nargs="?", default=None, help="message body; '-' reads standard input")
    snd.add_argument("-n", "--namesrv", type=namesrv_address, default=default_namesrv())
    snd.add_argument("-g", "--group", default="rmq_core_cli_producer")
    snd.add_argument("--tags", default=None)
    snd.add_argument("--keys", default=None, help="message keys; {i} is replaced by the message's index")
    snd.add_argument("--property", action="append", metavar="KEY=VALUE", help="a user property (repeatable)")
    snd.add_argument("--delay", type=int, default=0, help="delay level (0 = none)")
    snd.add_argument(
        "--deliver-after-ms",
        type=int,
        default=0,
        metavar="MS",
        help="a RocketMQ 5 timer message: deliver MS ms from now (TIMER_DELIVER_MS; 0 = at once)",
    )
    snd.add_argument("--count", type=int, default=1)
    snd.add_argument("--size", type=int, default=128, help="body size when no body is given")
    snd.add_argument("-v", "--verbose", action="store_true", help="print every SendResult")
    add_credential_args(snd)
    snd.set_defaults(func=cmd_send)

    con = sub.add_parser(
        "consume",
        help="consume messages with the rmq_core push consumer",
        description="Print messages of a topic as a push consumer of a group receives them.",
    )
    con.add_argument("topic")
    con.add_argument("-n", "--namesrv", type=namesrv_address, default=default_namesrv())
    con.add_argument("-g", "--group", default="rmq_core_cli_consumer")
    sel = con.add_mutually_exclusive_group()
    sel.add_argument("-e", "--expression", default="*", help="tag expression, e.g. 'TagA || TagB' (default *)")
    sel.add_argument("--sql", default=None, help="an SQL92 selector (the broker needs enablePropertyFilter)")
    con.add_argument("--count", type=int, default=0, help="stop after this many messages (0 = until Ctrl-C)")
    con.add_argument("--timeout", type=float, default=0, help="stop after this many seconds (0 = no limit)")
    con.add_argument("--from-first", action="store_true", help="a new group starts at the first offset")
    add_credential_args(con)
    con.set_defaults(func=cmd_consume)

    from rmq_core.pipeline import BROKERS_HELP, PipelineConfig

    pl = sub.add_parser(
        "pipeline",
        help="the main job: a node of brokers, producer, a consumer group of two, Spark queries",
        description="Start a node (a name server in-process and --brokers broker processes) over a store directory "
        "(or use --namesrv), produce a stream of order events, consume it with a push consumer "
        "group of two, count it per tag with a Spark streaming query and a Spark batch "
        "query, print a report; exit 0 only if every count agrees.",
    )
    pl.add_argument("--messages", type=int, default=200_000, help="messages to produce (default 200,000)")
    pl.add_argument("--dir", default="./rmq-store", help="store directory (default ./rmq-store)")
    pl.add_argument("--fresh", action="store_true", help="delete the store directory first")
    pl.add_argument("--namesrv", default=None, help="an existing cluster's name server host:port: no node is started")
    pl.add_argument("--brokers", default="auto", help=BROKERS_HELP)
    pl.add_argument("--no-spark", action="store_true", help="skip the Spark queries")
    pl.add_argument("--topic", default="PipelineOrders", help="topic name prefix (a run id is appended)")
    pl.add_argument("--queues", type=int, default=8, help="queues of the topic on each broker (default 8)")
    pl.add_argument(
        "--batch",
        type=int,
        default=PipelineConfig.batch,
        help=f"messages per batch send (default {PipelineConfig.batch})",
    )
    pl.add_argument(
        "--window",
        type=int,
        default=PipelineConfig.window,
        help=f"batch sends in flight (default {PipelineConfig.window})",
    )
    pl.add_argument("--rate", type=int, default=0, help="producer target msg/s (default 0 = as fast as it goes)")
    pl.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the consumers (default 120)")
    pl.add_argument(
        "--commit-log-file-mb",
        type=int,
        default=128,
        help="the node's brokers' CommitLog file size in MiB (default 128)",
    )
    pl.add_argument("--spark-master", default="local[2]", help="Spark master (default local[2])")
    pl.add_argument(
        "--micro-batches",
        type=int,
        default=4,
        help="the streaming query reads the topic in about this many micro-batches (default 4)",
    )
    pl.set_defaults(func=cmd_pipeline)
    return p


def main(argv: list[str] | None = None) -> int:
    from rmq_core.cli_errors import run_command

    return run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
