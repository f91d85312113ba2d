"""Build the fuzz seed corpora (fuzz/corpus/<target>/) from real traffic and real files:
- remoting frames: every request and response in the Java client's and the C++ client's wire captures against Apache
  RocketMQ 4.9.7 (compat/java/wire_capture_4.9.7.txt, compat/cpp/capture-apache-4.9.7.jsonl), re-encoded as frames
  in both header serializations;
- records: a store written here through ``MessageStore`` (v1 and v2 records, IPv4 and IPv6 hosts, compressed bodies,
  properties), its CommitLog bytes cut into pull bodies of 1, 2 and 8 records, and their properties strings;
- SQL92 selectors from the tests' expressions; broker.conf files; the JSON configs a broker writes.

    .venv/bin/python fuzz/make_corpus.py        # idempotent; files are named by content hash
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from targets import CORPUS_DIR  # noqa: E402

from rmq_core.message import Message  # noqa: E402
from rmq_core.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from rmq_core.remoting.command import RemotingCommand  # noqa: E402
from rmq_core.store import MessageStore, StoreConfig  # noqa: E402


def save(target: str, data: bytes) -> None:
    d = os.path.join(CORPUS_DIR, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def frames_from_captures() -> int:
    """At most three requests per (request code, serialization): the captures repeat heartbeats and sends."""
    n = 0
    seen: dict[tuple[int, int], int] = {}
    java = os.path.join(ROOT, "compat", "java", "wire_capture_4.9.7.txt")
    line_re = re.compile(r"^\s*[\d.]+ \S+ c2s (\w+) flag=(\d+) op=(\d+) (\{.*?\})(?: (.*))?$")
    with open(java, encoding="utf-8") as f:
        for line in f:
            m = line_re.match(line.rstrip("\n"))
            if not m or not hasattr(RequestCode, m.group(1)):
                continue
            ext = {k: str(v) for k, v in json.loads(m.group(4)).items()}
            body = (m.group(5) or "").encode()
            cmd = RemotingCommand.request(getattr(RequestCode, m.group(1)), ext, body or None)
            for serialize in (0, 1):
                seen[(cmd.code, serialize)] = seen.get((cmd.code, serialize), 0) + 1
                if seen[(cmd.code, serialize)] > 3:
                    continue
                save("remoting_frame", cmd.encode(serialize)[4:])  # the frame after its length prefix
                n += 1
    cpp = os.path.join(ROOT, "compat", "cpp", "capture-apache-4.9.7.jsonl")
    with open(cpp, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            header = doc.get("header")
            if not header or "code" not in header:
                continue
            ext = {k: str(v) for k, v in (header.get("extFields") or {}).items()}
            cmd = RemotingCommand.request(int(header["code"]), ext)
            seen[(cmd.code, 2)] = seen.get((cmd.code, 2), 0) + 1
            if seen[(cmd.code, 2)] > 3:
                continue
            save("remoting_frame", cmd.encode()[4:])
            n += 1
    resp = RemotingCommand.response_to(cmd, ResponseCode.SUCCESS, remark="ok", ext_fields={"queueId": "1"})
    save("remoting_frame", resp.encode()[4:])
    return n


def records() -> int:
    n = 0
    with tempfile.TemporaryDirectory() as d:
        cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 100)
        with MessageStore(d, cfg) as store:
            offsets = []
            for i in range(12):
                props = {"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:032X}", "color": "red" if i % 2 else "blue"}
                body = zlib.compress(b"z" * 200) if i % 5 == 0 else f"body-{i}".encode() * (1 + i)
                msg = Message("FuzzTopic", body, tags=f"Tag{i % 3}", properties=props)
                host = ("::1", 7000 + i) if i % 4 == 3 else ("127.0.0.1", 7000 + i)
                r = store.put_message(msg, i % 2, host, sys_flag=1 if i % 5 == 0 else 0)
                offsets.append((r.commitlog_offset, r.wrote_bytes))
            log = store.read_commit_log(0, offsets[-1][0] + offsets[-1][1]) or b""
        for width in (1, 2, 8):
            for i in range(0, len(offsets) - width + 1, width):
                start, end = offsets[i][0], offsets[i + width - 1][0] + offsets[i + width - 1][1]
                for target in ("decode_messages", "decode_columns"):
                    save(target, log[start:end])
                    n += 1
                save("gather_runs", bytes([2, 0, min(end - start, 255)]) + log[start:end])
        from rmq_core.message import decode_messages

        for m in decode_messages(log, decompress=False):
            raw = "".join(f"{k}\x01{v}\x02" for k, v in m.properties.items()).encode()
            save("decode_properties", raw)
            n += 1
    return n


SQL92 = [
    "a > 5",
    "color = 'red' AND size BETWEEN 1 AND 10",
    "color IN ('red','blue') OR NOT (x IS NULL)",
    "name LIKE 'ab%c_' ESCAPE '\\\\'",
    "TRUE AND a <> 3.5E2 OR b >= -7",
    "s STARTSWITH 'x' AND t ENDSWITH 'y' AND u CONTAINS 'z'",
]

BROKER_CONFS = [
    "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\ndeleteWhen=04\nfileReservedTime=48\n"
    "brokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\n",
    "# comment\n! other\nlistenPort : 10911\nnamesrvAddr 127.0.0.1:9876;127.0.0.2:9876\nlong\\\n  Key=1\n",
    "mappedFileSizeCommitLog=1048576\nautoCreateTopicEnable=false\nmessageDelayLevel=1s 5s 10s 1m 2h\n",
]

CONFIGS = [
    '{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"T":{"perm":6,"readQueueNums":4,'
    '"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4,"order":false}}}',
    '{"offsetTable":{"T@G":{0:5,1:7}}}',
    '{"offsetTable":{1:10,2:20}}',
    '{"dataVersion":{"counter":0,"timestamp":0},"subscriptionGroupTable":{"G":{"groupName":"G","consumeEnable":true,'
    '"retryQueueNums":1,"retryMaxTimes":16,"brokerId":0,"whichBrokerWhenConsumeSlowly":1}}}',
    '{"filterDataByTopic":{"T":{"topic":"T","groupFilterData":{"G":{"consumerGroup":"G","topic":"T",'
    '"expression":"a > 1","expressionType":"SQL92","bornTime":1,"deadTime":0,"clientVersion":1}}}}}',
]


def store_mutations() -> list[bytes]:
    """Seeds for ``store_recovery``: a backend byte, then 8-byte mutations (file, operation, position, value) of each
    kind on each file, alone and in pairs (targets.store_recovery decodes them)."""
    out = [b"\x00", b"\x01"]
    for backend in (0, 1):
        for file_index in range(8):  # index 7: the abort marker
            for op in range(4):  # flip, overwrite a run, truncate, delete
                one = struct.pack(">BBIH", file_index, op, 97 * (file_index + 1) + 13 * op, 0x1F3)
                out.append(bytes([backend]) + one)
                out.append(bytes([backend]) + one + struct.pack(">BBIH", 7, 0, 0, 0))  # ... and an unclean stop
    return out


def main() -> int:
    counts = {"remoting_frame": frames_from_captures(), "records": records()}
    for s in SQL92:
        save("sql92", s.encode() + b"\x00a=7\x01color=red\x01size=3")
    for c in BROKER_CONFS:
        save("broker_conf", c.encode())
    for c in CONFIGS:
        save("config_json", c.encode())
    for data in store_mutations():
        save("store_recovery", data)
    print(f"seed corpora in {CORPUS_DIR}: {counts}, {len(SQL92)} selectors, {len(BROKER_CONFS)} broker.conf, "
          f"{len(CONFIGS)} configs")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
