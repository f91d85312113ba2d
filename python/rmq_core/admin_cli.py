"""``rmq-core admin``: the everyday operations commands — ``cluster-list``, ``topic-status``, ``consumer-progress``,
``query-by-id``, ``query-by-key``, ``reset-offset-by-time`` — on ``rmq_core.client.Admin`` (no request is built
here), against rmq_core's and Apache RocketMQ's (4.9, 5.x) name servers and brokers alike.

Owns: the commands' argument parsers, their tables (``render_table``: left-aligned text, right-aligned numbers,
thousands separators) and the steps each command takes (which brokers it asks, what it adds up).
Exit codes: 0 done, 1 the command ran but found a problem (an unreachable broker, nothing found), 2 bad arguments.
Thread-safety: one command per process; nothing shared.
Details (each command's steps): docs/CLIENT_DESIGN.md, 'Admin commands'.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from rmq_core.cli_credentials import add_credential_args, credentials
from rmq_core.cli_errors import default_namesrv, namesrv_address
from rmq_core.client.admin import MAX_TIMESTAMP_MS, UNIQ_KEY_QUERY_MAX, Admin, offset_msg_id_location
from rmq_core.client.exceptions import RocketMQRpcError
from rmq_core.message import UNIQ_KEY, MessageExt
from rmq_core.remoting.codes import ResponseCode

# --- presentation -----------------------------------------------------------------------------------------------


def human_int(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def human_time(ms: int | None) -> str:
    """A millisecond timestamp in local time; 0 or None (never) as "-"."""
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def human_duration(seconds: float) -> str:
    s = int(max(seconds, 0))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    if m:
        return f"{m}m {s}s"
    return f"{s}s"


def _is_number(cell: str) -> bool:
    t = cell.replace(",", "").replace("%", "").strip()
    if t.startswith("-"):
        t = t[1:]
    return bool(t) and t.replace(".", "", 1).isdigit()


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], footer: Sequence[object] | None = None
) -> str:
    """Columns as wide as their widest cell, two spaces apart; a column whose cells are all numbers is right-aligned;
    a rule under the header and above the footer."""
    cells = [[str(c) for c in r] for r in rows]
    foot = [str(c) for c in footer] if footer is not None else None
    every = [list(headers), *cells, *([foot] if foot else [])]
    widths = [max(len(r[i]) for r in every) for i in range(len(headers))]
    numeric = [
        bool(cells) and all(_is_number(r[i]) or r[i] == "-" for r in cells) and any(_is_number(r[i]) for r in cells)
        for i in range(len(headers))
    ]

    def line(r: Sequence[str]) -> str:
        out = [(c.rjust(w) if num else c.ljust(w)) for c, w, num in zip(r, widths, numeric, strict=True)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    parts = [line(list(headers)), rule, *(line(r) for r in cells)]
    if foot and cells:
        parts += [rule, line(foot)]
    return "\n".join(parts)


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from: an integer (ms), ``now``, mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS``, or an ISO
    date-time (``2026-11-24T14:00:00``, ``2026-11-24 14:00``; local time unless it has an offset)."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    if t == "now":
        return int(time.time() * 1000)
    try:
        if "#" in t:
            d = _dt.datetime.strptime(t, "%Y-%m-%d#%H:%M:%S:%f")
        else:
            d = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a timestamp (milliseconds, now, yyyy-MM-dd#HH:mm:ss:SSS or ISO 8601)"
        ) from None
    return int(d.timestamp() * 1000)


def _first_number(value: str | None) -> float:
    """putTps and friends are "10s 60s 600s" figures: the first one."""
    try:
        return float((value or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def _fail(msg: str) -> None:
    print(f"  ! {msg}", file=sys.stderr)


# --- commands ---------------------------------------------------------------------------------------------------
def _api(args: argparse.Namespace) -> Admin:
    # the RPC layer logs a missing route as a warning; here that is an answer, reported by the command itself
    if not getattr(args, "debug", False):
        logging.getLogger("rmq_core.client").setLevel(logging.ERROR)
    return Admin(args.namesrv, timeout_ms=args.timeout_ms, instance_name="rmq-core-admin", **credentials(args))


def cmd_cluster_list(args: argparse.Namespace) -> int:
    """Every broker of every cluster with its version, throughput, today's totals, uptime and disk use."""
    problems = 0
    with _api(args) as api:
        info = api.examine_broker_cluster_info()
        rows = []
        now = time.time()
        for cluster in sorted(info.cluster_addr_table):
            if args.cluster and cluster != args.cluster:
                continue
            for name in sorted(info.cluster_addr_table[cluster]):
                bd = info.broker_addr_table.get(name)
                if bd is None:
                    continue
                for bid, addr in sorted(bd.broker_addrs.items()):
                    try:
                        rt = api.fetch_broker_runtime_stats(addr)
                    except RocketMQRpcError as e:
                        problems += 1
                        rows.append([cluster, name, bid, addr, f"unreachable: {e}", "-", "-", "-", "-", "-", "-"])
                        continue
                    boot = int(rt.get("bootTimestamp", "0") or 0)
                    disk = rt.get("commitLogDiskRatio")
                    rows.append(
                        [
                            cluster,
                            name,
                            bid,
                            addr,
                            rt.get("brokerVersionDesc", "-"),
                            f"{_first_number(rt.get('putTps')):,.1f}",
                            f"{_first_number(rt.get('getTransferedTps')):,.1f}",
                            human_int(int(rt.get("msgPutTotalTodayNow", "0") or 0)),
                            human_int(int(rt.get("msgGetTotalTodayNow", "0") or 0)),
                            human_duration(now - boot / 1000) if boot else "-",
                            f"{float(disk) * 100:.1f}%" if disk else "-",
                        ]
                    )
    headers = ["Cluster", "Broker", "BID", "Address", "Version", "In TPS", "Out TPS", "In today", "Out today"]
    print(render_table([*headers, "Uptime", "Disk used"], rows))
    return 1 if problems or not rows else 0


def cmd_topic_status(args: argparse.Namespace) -> int:
    """Each queue of a topic on each master: min and max offset, messages held, last write."""
    problems = 0
    rows = []
    total = 0
    with _api(args) as api:
        for name, addr in api.masters_of_topic(args.topic):
            try:
                stats = api.examine_topic_stats(args.topic, broker_addr=addr)
            except RocketMQRpcError as e:
                problems += 1
                _fail(f"{name} ({addr}): {e}")
                continue
            for mq, off in sorted(stats.offset_table.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id)):
                held = off.max_offset - off.min_offset
                total += held
                rows.append(
                    [
                        mq.broker_name,
                        mq.queue_id,
                        human_int(off.min_offset),
                        human_int(off.max_offset),
                        human_int(held),
                        human_time(off.last_update_timestamp),
                    ]
                )
    print(f"topic {args.topic}")
    headers = ["Broker", "Queue", "Min offset", "Max offset", "Messages", "Last updated"]
    print(render_table(headers, rows, ["total", "", "", "", human_int(total), ""]))
    return 1 if problems else 0


def cmd_consumer_progress(args: argparse.Namespace) -> int:
    """Per queue the broker offset, the group's committed offset and the lag; totals per topic and overall."""
    problems = 0
    rows: list[list[object]] = []
    per_topic: dict[str, int] = {}
    tps = 0.0
    with _api(args) as api:
        for name, addr in api.group_brokers(args.group):
            try:
                stats = api.examine_consume_stats(args.group, args.topic, broker_addr=addr)
            except RocketMQRpcError as e:
                problems += 1
                _fail(f"{name} ({addr}): {e}")
                continue
            tps += stats.consume_tps
            items = sorted(stats.offset_table.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id))
            for mq, w in items:
                lag = max(w.broker_offset - w.consumer_offset, 0)
                per_topic[mq.topic] = per_topic.get(mq.topic, 0) + lag
                rows.append(
                    [
                        mq.topic,
                        mq.broker_name,
                        mq.queue_id,
                        human_int(w.broker_offset),
                        human_int(w.consumer_offset),
                        human_int(lag),
                        human_int(w.inflight),
                        human_time(w.last_timestamp),
                    ]
                )
    print(f"consumer group {args.group}" + (f", topic {args.topic}" if args.topic else ""))
    headers = ["Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "In flight", "Last consumed"]
    total = sum(per_topic.values())
    print(render_table(headers, rows, ["total", "", "", "", "", human_int(total), "", ""]))
    if len(per_topic) > 1:
        print("lag by topic: " + ", ".join(f"{t} {human_int(n)}" for t, n in sorted(per_topic.items())))
    print(f"consume TPS {tps:,.1f}, total lag {human_int(total)}")
    if not rows:
        print(f"group {args.group} has no committed offsets on any broker")
        return 1
    return 1 if problems else 0


def _print_message(m: MessageExt) -> None:
    body = m.body or b""
    try:
        shown = body[:256].decode("utf-8")
    except UnicodeDecodeError:
        shown = body[:64].hex()
    fields: list[tuple[str, object]] = [
        ("Topic", m.topic),
        ("Tags", m.tags or "-"),
        ("Keys", m.keys or "-"),
        ("Message id", m.properties.get(UNIQ_KEY, "-")),
        ("Offset message id", m.msg_id),
        ("Queue", f"{m.queue_id} at offset {m.queue_offset:,}"),
        ("CommitLog offset", f"{m.commitlog_offset:,}"),
        ("Born", f"{human_time(m.born_timestamp)} from {m.born_host[0]}:{m.born_host[1]}"),
        ("Stored", f"{human_time(m.store_timestamp)} on {m.store_host[0]}:{m.store_host[1]}"),
        ("Reconsume times", m.reconsume_times),
        ("Body", f"{len(body):,} bytes: {shown!r}" + (" ..." if len(body) > 256 else "")),
    ]
    width = max(len(k) for k, _ in fields)
    for k, v in fields:
        print(f"{k:<{width}}  {v}")
    for k, v in sorted(m.properties.items()):
        print(f"{'property ' + k:<{width}}  {v}" if len(k) + 9 <= width else f"property {k}  {v}")


def _print_messages(found: list[MessageExt]) -> None:
    rows = [
        [
            m.properties.get(UNIQ_KEY) or m.msg_id,
            m.topic,
            m.tags or "-",
            m.keys or "-",
            m.queue_id,
            human_int(m.queue_offset),
            human_time(m.store_timestamp),
        ]
        for m in sorted(found, key=lambda m: (m.store_timestamp, m.commitlog_offset))
    ]
    print(render_table(["Message id", "Topic", "Tags", "Keys", "Queue", "Queue offset", "Stored"], rows))


def _uniq_key_origin(msg_id: str) -> str | None:
    """Where and when a client message id (UNIQ_KEY, MessageClientIDSetter's layout: ip, pid, class-loader hash, ms
    since the start of the month, counter) was made, as "made on IP around TIME"; None when it is not 32 or 56 hex."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        return None
    if len(raw) not in (16, 28):
        return None
    ip_len = 4 if len(raw) == 16 else 16
    import ipaddress

    ip = ipaddress.ip_address(raw[:ip_len])
    span_ms = int.from_bytes(raw[ip_len + 6 : ip_len + 10], "big")
    # getNearlyTimeFromID: this month's start + span, or last month's when that lies in the future
    now = _dt.datetime.now()
    month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if month + _dt.timedelta(milliseconds=span_ms) >= now:
        month = (month - _dt.timedelta(days=1)).replace(day=1)
    made = month + _dt.timedelta(milliseconds=span_ms)
    return f"made on {ip} around {made:%Y-%m-%d %H:%M:%S}"


def cmd_query_by_id(args: argparse.Namespace) -> int:
    """A message by id, as mqadmin (DefaultMQAdminExtImpl.viewMessage(topic, msgId)): an id that decodes to a broker
    address and CommitLog offset (an offset message id: the offsetMsgId ``send`` prints) is read from that broker;
    otherwise, or when that broker has no such message, it is a client message id (UNIQ_KEY: the msgId ``send``
    prints), found by unique key in the topic given with -t."""
    msg_id = args.msg_id.strip()
    view_failure = None
    with _api(args) as api:
        location = offset_msg_id_location(msg_id)
        if location is not None:
            try:
                _print_message(api.view_message(msg_id))
                return 0
            except RocketMQRpcError as e:
                addr, offset = location
                view_failure = f"{addr} has no message at CommitLog offset {offset:,} ({_short(e)})"
        if not args.topic:
            origin = _uniq_key_origin(msg_id)
            if view_failure:
                what = f"{view_failure}; if {msg_id} is a client message id (UNIQ_KEY) it"
            elif origin:
                what = f"{msg_id} is a client message id (UNIQ_KEY, the msgId send prints; {origin}): it"
            else:
                what = f"{msg_id} is not an offset message id (32 hex digits); a client message id (UNIQ_KEY)"
            print(f"error: {what} needs -t TOPIC", file=sys.stderr)
            return 1 if view_failure else 2
        found = _query_by_key(api, args.topic, msg_id, UNIQ_KEY_QUERY_MAX, 0, MAX_TIMESTAMP_MS, unique_key=True)
    if not found:
        print(f"no message {msg_id} in topic {args.topic}" + (f"; {view_failure}" if view_failure else ""))
        return 1
    for m in found[:1]:
        _print_message(m)
    return 0


def _short(e: RocketMQRpcError) -> str:
    return str(e).strip().split("\n", 1)[0]


def _query_by_key(
    api: Admin, topic: str, key: str, max_num: int, begin: int, end: int, unique_key: bool
) -> list[MessageExt]:
    """Broker by broker (one that fails is reported and the others still asked)."""
    found: list[MessageExt] = []
    for name, addr in api.masters_of_topic(topic):
        try:
            found += api.query_message(
                topic, key, max_num, begin, end, unique_key=unique_key, broker_addr=addr
            ).messages
        except RocketMQRpcError as e:
            _fail(f"{name} ({addr}): {e}")
    return found


def cmd_query_by_key(args: argparse.Namespace) -> int:
    """Messages whose KEYS hold ``-k`` in a topic, between --begin and --end."""
    with _api(args) as api:
        found = _query_by_key(api, args.topic, args.key, args.max, args.begin, args.end, unique_key=False)
    if not found:
        print(f"no message with key {args.key} in topic {args.topic}")
        return 1
    _print_messages(found)
    return 0


def cmd_reset_offset_by_time(args: argparse.Namespace) -> int:
    """The group's offsets on a topic moved to where the messages stored at --timestamp begin."""
    rows: list[list[object]] = []
    problems = 0
    with _api(args) as api:
        for name, addr in api.masters_of_topic(args.topic):
            try:
                table = api.reset_offset_by_time(
                    args.group, args.topic, args.timestamp, force=args.force, broker_addr=addr, fall_back=False
                )
                for mq, off in sorted(table.items(), key=lambda kv: kv[0].queue_id):
                    rows.append([mq.broker_name, mq.queue_id, "-", human_int(off), "clients reset by the broker"])
                continue
            except RocketMQRpcError as e:
                if e.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
                    problems += 1
                    _fail(f"{name} ({addr}): {e}")
                    continue
            # no client online: mqadmin's resetOffsetByTimeOld, queue by queue
            try:
                stats = api.reset_offset_by_time_old(
                    args.group, args.topic, args.timestamp, force=args.force, broker_addr=addr
                )
            except RocketMQRpcError as e:
                problems += 1
                _fail(f"{name} ({addr}): {e}")
                continue
            for r in stats:
                how = "committed" if r.committed else "kept (ahead; --force moves it)"
                rows.append([name, r.queue_id, human_int(r.consumer_offset), human_int(r.rollback_offset), how])
    print(f"group {args.group}, topic {args.topic}: offsets reset to {human_time(args.timestamp)} ({args.timestamp})")
    print(render_table(["Broker", "Queue", "Old offset", "New offset", "How"], rows))
    return 1 if problems or not rows else 0


def add_admin_parser(sub: Any) -> None:
    """``rmq-core admin ...`` under the top-level subparsers ``sub``."""
    admin = sub.add_parser(
        "admin",
        help="cluster, topic and consumer-group operations (rmq_core or Apache brokers)",
        description="Operations commands over the name server and brokers; tables for a person to read.",
    )
    asub = admin.add_subparsers(dest="admin_command", required=True)

    def command(name: str, fn: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        p = asub.add_parser(name, help=help_text, description=fn.__doc__)
        p.add_argument(
            "-n",
            "--namesrv",
            type=namesrv_address,
            default=default_namesrv(),
            help="name server host:port[;host:port] (default: $NAMESRV_ADDR, else 127.0.0.1:9876)",
        )
        p.add_argument("--timeout-ms", type=float, default=5000, help="per request (default 5000)")
        add_credential_args(p)
        p.set_defaults(func=fn)
        return p

    p = command("cluster-list", cmd_cluster_list, "brokers with version, TPS, totals, uptime, disk")
    p.add_argument("-c", "--cluster", default=None, help="only this cluster")
    p = command("topic-status", cmd_topic_status, "a topic's queues: offsets and messages held")
    p.add_argument("-t", "--topic", required=True)
    p = command("consumer-progress", cmd_consumer_progress, "a group's offsets and lag per queue, with totals")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", default=None, help="only this topic")
    p = command("query-by-id", cmd_query_by_id, "a message by its offset message id (or UNIQ_KEY with -t)")
    p.add_argument("msg_id")
    p.add_argument("-t", "--topic", default=None, help="the topic, for a client message id (UNIQ_KEY)")
    p = command("query-by-key", cmd_query_by_key, "messages by key (QUERY_MESSAGE)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("--max", type=int, default=64, help="at most this many per broker (default 64)")
    p.add_argument("--begin", type=parse_timestamp, default=0, help="stored at or after (default: ever)")
    p.add_argument("--end", type=parse_timestamp, default=2**63 - 1, help="stored before (default: now on)")
    p = command("reset-offset-by-time", cmd_reset_offset_by_time, "move a group's offsets on a topic to a time")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument(
        "-s",
        "--timestamp",
        type=parse_timestamp,
        required=True,
        help="milliseconds, now, yyyy-MM-dd#HH:mm:ss:SSS or ISO 8601 (local time)",
    )
    p.add_argument(
        "--no-force",
        dest="force",
        action="store_false",
        help="only move offsets backwards (default: move them either way, as mqadmin's -f true)",
    )
