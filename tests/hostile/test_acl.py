"""RocketMQ 4.9's plain ACL on rmq_core's broker (issue 28 item 2), against a real name server and broker on
127.0.0.1 with a plain_acl.yml: raw frames signed, unsigned and badly signed (one at a time and pipelined in one
chunk, the send fast path), the answers Apache 4.9.7 gives (codes and remarks, checked against Apache itself in
tests/interop/test_acl_apache.py), reload on change, white addresses, the starts that must fail closed, and
rmq_core's clients signing (producer, pull and push consumers, the admin face, asyncio, the CLI).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.acl.remote_address_strategy import AclConfigError, remote_address_strategy
from rmq_core.client import Producer
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.client.exceptions import MQClientException, RocketMQRpcError
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message
from rmq_core.remoting.acl_signer import SessionCredentials, cal_signature, combine_request_content
from rmq_core.remoting.codes import ResponseCode

from support.acl_helpers import (
    ADMIN,
    GROUP_A,
    PLAIN_ACL_YML,
    TOPIC_A,
    TOPIC_B,
    UNKNOWN,
    USER,
    acl_broker,
    create_topic_request,
    exchange,
    probes,
    pull,
    send,
)
from support.helpers import subprocess_env, wait_until
from support.send_helpers import on_loop, stored

NO_KEY = "org.apache.rocketmq.acl.common.AclException: No accessKey is configured, "
BAD_SIG = f"org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey={USER.access_key}, "


@pytest.fixture
def acl_cluster(tmp_path):
    with acl_broker(tmp_path, "acl-broker") as cluster:
        yield cluster


def _chain(e: BaseException | None) -> str:
    out = []
    while e is not None:
        out.append(str(e))
        e = e.__cause__ or e.__context__
    return " | ".join(out)


def _remark_head(remark: str | None) -> str:
    return (remark or "").split(", org.apache")[0]


def test_raw_requests_answered_as_apache(acl_cluster):
    _ns, broker, _ = acl_cluster
    before = broker.message_store.max_physical_offset
    answers = {name: exchange(broker.address, [req])[0] for name, req in probes()}
    refused = {name: a for name, a in answers.items() if a.code == ResponseCode.SYSTEM_ERROR}
    assert set(answers) - set(refused) == {"signed send", "admin code as admin", "unknown code signed"}
    assert answers["signed send"].code == ResponseCode.SUCCESS
    assert answers["admin code as admin"].code == ResponseCode.SUCCESS
    assert answers["unknown code signed"].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert answers["unsigned send"].remark.startswith(NO_KEY)
    assert answers["unknown code unsigned"].remark.startswith(NO_KEY)
    assert answers["tampered send"].remark.startswith(BAD_SIG)
    assert answers["wrong secret"].remark.startswith(BAD_SIG)
    assert _remark_head(answers["unknown account"].remark).endswith(f"No acl config for {UNKNOWN.access_key}")
    assert _remark_head(answers["send without PUB"].remark).endswith(f"No default permission for topic:{TOPIC_B}")
    assert _remark_head(answers["send to a default-DENY topic"].remark).endswith(
        "No default permission for topic:aclTopicC"
    )
    assert _remark_head(answers["admin code without admin"].remark).endswith(
        f"Need admin permission for request code=17, but accessKey={USER.access_key} is not"
    )
    assert _remark_head(answers["pull without group perm"].remark).endswith("No default permission for group:aclGroupX")
    assert _remark_head(answers["pull without topic SUB"].remark).endswith("No default permission for topic:aclTopicC")
    # exactly one record stored: the signed send (the tampered one carried the same topic and a valid key)
    stored = broker.message_store.max_physical_offset - before
    one = exchange(broker.address, [send(TOPIC_A, USER)])[0]
    assert one.code == ResponseCode.SUCCESS
    assert broker.message_store.max_physical_offset - before == 2 * stored


def test_pipelined_unsigned_sends_never_stored(acl_cluster):
    """Sends read from one chunk take the broker's batch path without ACL; with it each one is checked."""
    _ns, broker, _ = acl_cluster
    assert exchange(broker.address, [send(TOPIC_A, USER)])[0].code == ResponseCode.SUCCESS  # topic exists
    before = broker.message_store.max_physical_offset
    reqs = [send(TOPIC_A, None) for _ in range(20)] + [send(TOPIC_A, UNKNOWN) for _ in range(5)]
    reqs += [send(TOPIC_A, SessionCredentials(USER.access_key, "forged-secret")) for _ in range(5)]
    answers = exchange(broker.address, reqs)
    assert [a.code for a in answers] == [ResponseCode.SYSTEM_ERROR] * len(reqs)
    assert broker.message_store.max_physical_offset == before
    mixed = [send(TOPIC_A, USER), send(TOPIC_A, None), send(TOPIC_A, USER)]
    assert [a.code for a in exchange(broker.address, mixed)] == [0, 1, 0]


def test_pipelined_mixed_sends_under_sync_flush(tmp_path):
    """SYNC_FLUSH: the batch processor answers later (an awaitable); the refusals still land in their places and
    only the signed sends are stored."""
    (tmp_path / "acl.yml").write_text(PLAIN_ACL_YML)
    cfg = BrokerConfig(
        listen_port=0,
        store_path_root_dir=str(tmp_path / "s"),
        flush_disk_type="SYNC_FLUSH",
        acl_enable=True,
        acl_file=str(tmp_path / "acl.yml"),
    )
    with Broker(cfg) as broker:
        assert exchange(broker.address, [send(TOPIC_A, USER)])[0].code == 0
        reqs = [send(TOPIC_A, USER if i % 3 == 0 else None, f"s{i}".encode()) for i in range(12)]
        answers = exchange(broker.address, reqs)
        assert [a.code for a in answers] == [0 if i % 3 == 0 else 1 for i in range(12)]
        assert all(a.remark.startswith(NO_KEY) for i, a in enumerate(answers) if i % 3)
        assert [int(a.ext_fields["queueOffset"]) for a in answers if a.code == 0] == [1, 2, 3, 4]
        assert [m.body for m in stored(broker, TOPIC_A)] == [b"acl-body", b"s0", b"s3", b"s6", b"s9"]


def test_reload_on_change_and_global_white_address(acl_cluster):
    _ns, broker, acl_file = acl_cluster
    assert exchange(broker.address, [send(TOPIC_B, USER)])[0].code == ResponseCode.SYSTEM_ERROR
    acl_file.write_text(PLAIN_ACL_YML.replace(f"{TOPIC_B}=SUB", f"{TOPIC_B}=PUB"))
    wait_until(lambda: exchange(broker.address, [send(TOPIC_B, USER)])[0].code == 0, "the reload", timeout=5)
    acl_file.write_text(PLAIN_ACL_YML.replace("  - 192.168.0.*", "  - 127.0.0.1"))
    wait_until(lambda: exchange(broker.address, [send(TOPIC_B, None)])[0].code == 0, "the white address", timeout=5)
    acl_file.write_text("accounts: [this is: not valid")  # a broken file keeps the rules in force
    time.sleep(1.2)
    assert exchange(broker.address, [send(TOPIC_B, None)])[0].code == 0
    acl_file.write_text(PLAIN_ACL_YML)
    wait_until(lambda: exchange(broker.address, [send(TOPIC_B, None)])[0].code == 1, "white address removed", timeout=5)


def test_account_white_address_skips_signature(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL_YML.replace("whiteRemoteAddress: 192.168.1.*", "whiteRemoteAddress: 127.0.0.*"))
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "s"), acl_enable=True, acl_file=str(acl_file))
    with Broker(cfg) as broker:
        forged = SessionCredentials(ADMIN.access_key, "forged-secret")
        assert exchange(broker.address, [create_topic_request("aclTopicW", forged)])[0].code == 0
        assert exchange(broker.address, [send("aclTopicW", None)])[0].code == 1  # still needs the key


def test_signature_is_apaches():
    """AclClientRPCHook's content: sorted ext field values (Signature and _UNIQUE_KEY_QUERY left out) + body; a
    HmacSHA1 of it in base64 (expected: ``printf ak12body | openssl dgst -sha1 -hmac secret -binary | base64``)."""
    ext = {"b": "2", "a": "1", "AccessKey": "ak", "Signature": "x", "_UNIQUE_KEY_QUERY": "true"}
    assert combine_request_content(ext, b"body") == b"ak12body"
    assert cal_signature(b"ak12body", "secret") == "aYyc14GuFWUdXSmx7ZCg2lQ2tEM="


@pytest.mark.parametrize(
    "pattern,yes,no",
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("", [], ["127.0.0.1"]),
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
        ("10.0.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
        ("10.0.0.{1,3}", ["10.0.0.3"], ["10.0.0.2"]),
        ("192.168.1.*", ["192.168.1.77"], ["192.168.2.1"]),
        ("192.168.*.*", ["192.168.200.1"], ["192.169.0.1"]),
        ("192.168.1.10-20", ["192.168.1.15"], ["192.168.1.21", "192.168.1.9"]),
        ("192.168.10-20.*", ["192.168.11.4"], ["192.168.21.4"]),
        ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
        ("1050:0:0:0:5:600:300c:*", ["1050::5:600:300c:1"], ["1050::5:600:300d:1"]),
    ],
)
def test_white_address_forms(pattern, yes, no):
    match = remote_address_strategy(pattern)
    assert all(match(ip) for ip in yes) and not any(match(ip) for ip in no)


@pytest.mark.parametrize("pattern", ["256.1.1.1", "1.2.3.300-400", "10.0.{1,2}", "not-an-ip"])
def test_bad_white_address_refused(pattern):
    with pytest.raises(AclConfigError):
        remote_address_strategy(pattern)


# --- fail closed ------------------------------------------------------------------------------------------------
def _start(tmp_path, **kw) -> None:
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "s"), **kw)
    broker = Broker(cfg)
    try:
        broker.start()
    finally:
        broker.shutdown()


@pytest.mark.parametrize(
    "key,value",
    [("authenticationEnabled", "true"), ("authorizationEnabled", "true"), ("initAuthenticationUser", '{"u":"p"}')],
)
def test_rocketmq5_auth_keys_stop_the_start(tmp_path, key, value):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort=0\nstorePathRootDir={tmp_path / 's'}\n{key}={value}\n")
    cfg = BrokerConfig.from_properties_file(conf)
    with pytest.raises(AclConfigError, match=key):
        Broker(cfg).start()


def test_acl_without_a_usable_file_stops_the_start(tmp_path):
    with pytest.raises(AclConfigError, match="does not exist"):
        _start(tmp_path, acl_enable=True, acl_file=str(tmp_path / "missing.yml"))
    bad = tmp_path / "bad.yml"
    bad.write_text("accounts:\n  - accessKey: short\n    secretKey: 1\n")
    with pytest.raises(AclConfigError, match="longer than 6"):
        _start(tmp_path, acl_enable=True, acl_file=str(bad))
    bad.write_text("accounts: [unclosed")
    with pytest.raises(AclConfigError, match="not valid YAML"):
        _start(tmp_path, acl_enable=True, acl_file=str(bad))


def test_broker_conf_finds_plain_acl_beside_it(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort=0\nstorePathRootDir={tmp_path / 's'}\naclEnable=true\n")
    cfg = BrokerConfig.from_properties_file(conf)
    assert cfg.acl_enable and cfg.acl_file == str(tmp_path / "plain_acl.yml")
    with pytest.raises(AclConfigError, match=r"plain_acl\.yml does not exist"):
        Broker(cfg).start()
    (tmp_path / "plain_acl.yml").write_text(PLAIN_ACL_YML)
    with Broker(cfg) as broker:
        assert exchange(broker.address, [send(TOPIC_A, None)])[0].code == ResponseCode.SYSTEM_ERROR


def test_missing_pyyaml_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "acl.yml").write_text(PLAIN_ACL_YML)
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml raises ImportError
    with pytest.raises(AclConfigError, match=r"PyYAML.*rmq_core\[acl\]"):
        _start(tmp_path, acl_enable=True, acl_file=str(tmp_path / "acl.yml"))


# --- rmq_core's clients sign ------------------------------------------------------------------------------------
def test_admin_face_signs(acl_cluster):
    ns, broker, _ = acl_cluster
    config = TopicConfig("aclAdminTopic", 2, 2)
    with BlockingMQClientAPI(ns.address, access_key=ADMIN.access_key, secret_key=ADMIN.secret_key) as admin:
        admin.create_topic(broker.address, config)
    with (
        BlockingMQClientAPI(ns.address, access_key=USER.access_key, secret_key=USER.secret_key) as user,
        pytest.raises(RocketMQRpcError, match="Need admin permission for request code=17"),
    ):
        user.create_topic(broker.address, TopicConfig("aclUserTopic", 2, 2))
    table = on_loop(broker, lambda: set(broker.controller.topic_config_manager.topic_config_table))
    assert "aclAdminTopic" in table and "aclUserTopic" not in table


def test_clients_sign_round_trip(acl_cluster):
    ns, _broker, _ = acl_cluster
    creds = {"access_key": USER.access_key, "secret_key": USER.secret_key}
    producer = Producer("aclProducer", ns.address, instance_name="acl-signed", **creds)
    producer.start()
    try:
        for i in range(3):
            result = producer.send(Message(TOPIC_A, f"m{i}".encode()))
            assert result.send_status.name == "SEND_OK"
        with pytest.raises(MQClientException) as refused:  # SYSTEM_ERROR is retried, then reported (as Java)
            producer.send(Message(TOPIC_B, b"x"))
        assert "No default permission for topic:aclTopicB" in _chain(refused.value)
    finally:
        producer.shutdown()
    unsigned = Producer("aclProducer", ns.address, instance_name="acl-unsigned")
    unsigned.start()
    try:
        with pytest.raises(MQClientException) as refused:
            unsigned.send(Message(TOPIC_A, b"x"))
        assert "No accessKey is configured" in _chain(refused.value)
    finally:
        unsigned.shutdown()
    from rmq_core.client import PullConsumer

    consumer = PullConsumer(GROUP_A, ns.address, instance_name="acl-pull", **creds)
    consumer.start()
    try:
        queues = consumer.fetch_subscribe_message_queues(TOPIC_A)
        bodies = []
        for mq in queues:
            bodies += [m.body for m in consumer.pull(mq, "*", 0, 32).msg_found_list or []]
        assert sorted(bodies) == [b"m0", b"m1", b"m2"]
    finally:
        consumer.shutdown()


def test_async_producer_signs(acl_cluster):
    ns, _broker, _ = acl_cluster
    from rmq_core.aio import AsyncProducer

    async def go() -> str:
        async with AsyncProducer(
            "aclAsync", ns.address, access_key=USER.access_key, secret_key=USER.secret_key
        ) as producer:
            return (await producer.send(Message(TOPIC_A, b"async"))).send_status.name

    assert asyncio.run(go()) == "SEND_OK"


def test_cli_send_signs(acl_cluster):
    ns, _broker, _ = acl_cluster
    base = [sys.executable, "-m", "rmq_core.cli", "send", TOPIC_A, "cli", "--namesrv", ns.address]
    env = subprocess_env()
    ok = subprocess.run(
        [*base, "--access-key", USER.access_key, "--secret-key", USER.secret_key],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run(base, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "No accessKey is configured" in refused.stderr + refused.stdout


def test_push_consumer_signs(acl_cluster):
    """The CLI's consume (a push consumer: heartbeats with its subscriptions, rebalance, pulls, offset commits) signed;
    with a group the account may not use its heartbeat is refused and nothing is consumed."""
    ns, broker, _ = acl_cluster
    for i in range(3):
        assert exchange(broker.address, [send(TOPIC_A, USER, f"push-{i}".encode())])[0].code == 0
    base = [sys.executable, "-m", "rmq_core.cli", "consume", TOPIC_A, "--namesrv", ns.address, "--from-first"]
    keys = ["--access-key", USER.access_key, "--secret-key", USER.secret_key]
    env = subprocess_env()
    ok = subprocess.run(
        [*base, "--group", GROUP_A, "--count", "3", "--timeout", "30", *keys],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert sorted(ln.split("body=")[1] for ln in ok.stdout.splitlines() if "body=" in ln) == [
        "'push-0'",
        "'push-1'",
        "'push-2'",
    ]
    denied = subprocess.run(
        [*base, "--group", "aclOtherGroup", "--count", "1", "--timeout", "3", *keys],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert denied.returncode == 1 and "body=" not in denied.stdout


def test_pull_refused_without_group_perm(acl_cluster):
    _ns, broker, _ = acl_cluster
    assert exchange(broker.address, [pull(TOPIC_A, GROUP_A, USER)])[0].code != ResponseCode.SYSTEM_ERROR
    assert exchange(broker.address, [pull(TOPIC_A, "otherGroup", USER)])[0].code == ResponseCode.SYSTEM_ERROR


def test_credentials_must_come_in_pairs():
    with pytest.raises(ValueError, match="together"):
        Producer("g", "127.0.0.1:1", access_key="only-the-key").start()
    with pytest.raises(ValueError, match="together"):
        BlockingMQClientAPI("127.0.0.1:1", secret_key="only-the-secret")
    assert "sk-secret-value" not in repr(SessionCredentials("ak-1234567", "sk-secret-value"))
    assert "sk-secret-value" not in repr(
        Producer("g", access_key="ak-1234567", secret_key="sk-secret-value").client_config
    )


def test_spark_options_take_credentials():
    from rmq_core.spark.options import OptionError, parse_read_options, parse_write_options

    opts = parse_read_options({"namesrv": "h:1", "topic": "t", "accessKey": "ak-1234567", "secretKey": "sk"}, False)
    assert opts.credentials == {"access_key": "ak-1234567", "secret_key": "sk"} and "sk" not in repr(opts)
    assert parse_write_options({"namesrv": "h:1", "accessKey": "a", "secretKey": "b"}).credentials["secret_key"] == "b"
    with pytest.raises(OptionError, match="accessKey and secretKey"):
        parse_read_options({"namesrv": "h:1", "topic": "t", "accessKey": "only"}, False)


def test_acl_set_by_a_persisted_update_applies_at_start(tmp_path):
    """aclEnable / aclFile in the persisted remote updates (``<store>/config/broker.properties``, applied over the
    given config at start): enforced from the first request — never a broker whose config says ACL while it serves
    unsigned requests."""
    (tmp_path / "acl.yml").write_text(PLAIN_ACL_YML)
    config_dir = tmp_path / "s" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "broker.properties").write_text(f"aclEnable=true\naclFile={tmp_path / 'acl.yml'}\n")
    with Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "s"))) as broker:
        assert broker.config.acl_enable
        assert exchange(broker.address, [send(TOPIC_A, None)])[0].code == ResponseCode.SYSTEM_ERROR
        assert exchange(broker.address, [send(TOPIC_A, USER)])[0].code == ResponseCode.SUCCESS
    (config_dir / "broker.properties").write_text("authorizationEnabled=true\n")
    with pytest.raises(AclConfigError, match="authorizationEnabled"):
        Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "s"))).start()


@pytest.mark.parametrize("line", ["authenticationEnabled=true", "aclEnable=true"])
def test_cli_broker_refuses_with_one_line(tmp_path, line):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort=0\nstorePathRootDir={tmp_path / 's'}\n{line}\n")  # aclEnable: no plain_acl.yml
    out = subprocess.run(
        [sys.executable, "-m", "rmq_core.cli", "broker", "-c", str(conf)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    errors = [ln for ln in out.stderr.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1 and errors[0].startswith("rmq-core: error: ") and "Traceback" not in out.stderr
    assert line.split("=")[0] in errors[0] or "plain_acl.yml" in errors[0]


def test_unsigned_heartbeat_body_is_never_decoded(acl_cluster, monkeypatch):
    """The ACL works out a HEART_BEAT's groups and topics (a JSON body) only once its signature verified: a client
    without a key cannot make the broker decode its bodies; a signed one with a malformed body is refused."""
    from rmq_core.broker.acl import plain_access_validator
    from rmq_core.remoting.codes import RequestCode
    from rmq_core.remoting.command import RemotingCommand

    _ns, broker, _ = acl_cluster
    decoded: list[int] = []
    real = plain_access_validator.HeartbeatData.decode
    monkeypatch.setattr(
        plain_access_validator.HeartbeatData, "decode", lambda data: decoded.append(len(data)) or real(data)
    )
    junk = b"{" * 100_000
    for creds in (None, UNKNOWN, SessionCredentials(USER.access_key, "forged-secret")):
        req = RemotingCommand.request(RequestCode.HEART_BEAT, {"x": "y"}, junk)
        if creds is not None:
            creds.sign(req)
        assert exchange(broker.address, [req])[0].code == ResponseCode.SYSTEM_ERROR
    assert decoded == []
    signed = USER.sign(RemotingCommand.request(RequestCode.HEART_BEAT, {"x": "y"}, b"not json"))
    answer = exchange(broker.address, [signed])[0]
    assert answer.code == ResponseCode.SYSTEM_ERROR and "PlainAccessValidator.parse" in answer.remark
    assert decoded == [len(b"not json")]
