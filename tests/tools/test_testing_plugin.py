"""rmq_core.testing, the pytest plugin, tested the way a user meets it: ``pytester`` writes a user's test file into a
fresh directory and runs pytest on it in a subprocess (the plugin comes in through the installed ``pytest11`` entry
point, as in any project that installed rmq_core). Covered: the fixtures against the in-process cluster, the
options (--rocketmq-store, --rocketmq-broker-conf, --rocketmq-namesrv against a separately started
``rmq-core serve``), that loading the plugin starts and imports nothing heavy, and Apache's Java client 4.9.7
producing to and consuming from the fixture's name server (compat_java).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytest_plugins = ["pytester"]

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what the plugin must not load (``import rmq_core`` itself loads the package facade: message, the native module)
HEAVY_MODULES = ("rmq_core.broker", "rmq_core.namesrv", "rmq_core.client", "rmq_core.store", "rmq_core.remoting")

USER_TESTS = """
    import pytest


    def test_cluster_addresses(rocketmq_cluster):
        assert not rocketmq_cluster.external
        host, port = rocketmq_cluster.namesrv_addr.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        assert rocketmq_cluster.broker_addr in rocketmq_cluster.broker_addrs.values()
        assert rocketmq_cluster.broker_addr != rocketmq_cluster.namesrv_addr


    def test_round_trip(rocketmq_topic, rocketmq_producer, rocketmq_consumer):
        sent = rocketmq_producer.produce(rocketmq_topic, 10)
        assert len(sent) == 10 and {r.send_status.name for r in sent} == {"SEND_OK"}
        got = rocketmq_consumer.consume(rocketmq_topic, 10, timeout=10)
        assert sorted(m.body for m in got) == sorted(f"message-{i}".encode() for i in range(10))
        assert {m.topic for m in got} == {rocketmq_topic}
        with pytest.raises(TimeoutError, match="consumed 0 of 1"):
            rocketmq_consumer.consume(rocketmq_topic, 1, timeout=0.3)


    def test_consume_continues_where_it_stopped(rocketmq_topic, rocketmq_producer, rocketmq_consumer):
        rocketmq_producer.produce(rocketmq_topic, 6, body_prefix="a-")
        first = rocketmq_consumer.consume(rocketmq_topic, 4)
        rocketmq_producer.produce(rocketmq_topic, 3, body_prefix="b-")
        rest = rocketmq_consumer.consume(rocketmq_topic, 5)
        bodies = sorted(m.body for m in first + rest)
        assert bodies == sorted([f"a-{i}".encode() for i in range(6)] + [f"b-{i}".encode() for i in range(3)])


    def test_default_queue_count(rocketmq_topic, rocketmq_consumer):
        assert len(rocketmq_consumer.consumer.fetch_subscribe_message_queues(rocketmq_topic)) == 4


    @pytest.mark.rocketmq_topic(queues=8)
    def test_marker_sets_queue_count(rocketmq_topic, rocketmq_consumer):
        assert len(rocketmq_consumer.consumer.fetch_subscribe_message_queues(rocketmq_topic)) == 8


    def test_factory_and_isolation(rocketmq_topic_factory, rocketmq_producer, rocketmq_consumer):
        one, two = rocketmq_topic_factory(queues=1), rocketmq_topic_factory(queues=2, name="UserNamedTopic")
        assert one != two and two == "UserNamedTopic"
        assert len(rocketmq_consumer.consumer.fetch_subscribe_message_queues(one)) == 1
        rocketmq_producer.produce(one, 3, tags="TagA")
        rocketmq_producer.produce(two, 2)
        assert len(rocketmq_consumer.consume(one, 3)) == 3
        assert len(rocketmq_consumer.consume(two, 2)) == 2
        with pytest.raises(TimeoutError):
            rocketmq_consumer.consume(one, 1, timeout=0.2)


    def test_own_fixture_named_broker_is_untouched(broker):
        assert broker == "the project's own broker fixture"
"""

FAILING_USER_TEST = """

    def test_wants_more(rocketmq_topic, rocketmq_producer, rocketmq_consumer):
        rocketmq_producer.produce(rocketmq_topic, 2)
        rocketmq_consumer.consume(rocketmq_topic, 3, timeout=0.5)
"""

USER_CONFTEST = """
    import pytest


    @pytest.fixture
    def broker():
        return "the project's own broker fixture"
"""


def run_user_tests(pytester: pytest.Pytester, *args: str, timeout: float = 120) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", *args, timeout=timeout)


def test_user_tests_on_the_in_process_cluster(pytester: pytest.Pytester, tmp_path) -> None:
    """The user's tests pass; a failing one (a consume waiting for more than was produced) is reported as failed, not
    swallowed; the store (kept by --rocketmq-store) has the plugin's small CommitLog files, not RocketMQ's 1 GiB."""
    store = tmp_path / "store"
    pytester.makeconftest(USER_CONFTEST)
    pytester.makepyfile(test_user=USER_TESTS + FAILING_USER_TEST)
    result = run_user_tests(pytester, f"--rocketmq-store={store}")
    result.assert_outcomes(passed=7, failed=1)
    result.stdout.fnmatch_lines(["*TimeoutError: consumed 2 of 3 messages from rocketmq-test-*"])
    sizes = [f.stat().st_size for f in (store / "commitlog").iterdir()]
    assert sizes == [4 * 1024 * 1024], sizes


NODE_USER_TESTS = """
    def test_a_node_of_two(rocketmq_cluster, rocketmq_topic, rocketmq_producer, rocketmq_consumer):
        assert sorted(rocketmq_cluster.broker_addrs) == ["rocketmq-test-broker-0", "rocketmq-test-broker-1"]
        queues = rocketmq_consumer.consumer.fetch_subscribe_message_queues(rocketmq_topic)
        assert sorted({mq.broker_name for mq in queues}) == sorted(rocketmq_cluster.broker_addrs) and len(queues) == 8
        sent = rocketmq_producer.produce(rocketmq_topic, 40)
        assert {r.message_queue.broker_name for r in sent} == set(rocketmq_cluster.broker_addrs)
        assert len(rocketmq_consumer.consume(rocketmq_topic, 40)) == 40
"""


def test_rocketmq_brokers_starts_a_node(pytester: pytest.Pytester, tmp_path) -> None:
    """--rocketmq-brokers 2: the session's cluster is a node of two broker processes (rmq_core.node.Node), each
    with the plugin's small CommitLog files; a topic has its queues on both."""
    store = tmp_path / "store"
    pytester.makepyfile(test_user=NODE_USER_TESTS)
    run_user_tests(pytester, f"--rocketmq-store={store}", "--rocketmq-brokers=2").assert_outcomes(passed=1)
    for i in range(2):
        sizes = [f.stat().st_size for f in (store / f"rocketmq-test-broker-{i}" / "commitlog").iterdir()]
        assert sizes == [4 * 1024 * 1024], sizes


def test_plugin_is_registered_and_imports_nothing_heavy() -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from importlib.metadata import entry_points
        (ep,) = [e for e in entry_points(group="pytest11") if e.name == "rmq_core"]
        assert ep.value == "rmq_core.testing.plugin", ep
        ep.load()
        heavy = sorted(m for m in sys.modules if m.startswith({HEAVY_MODULES!r}))
        assert not heavy, heavy
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_unused_fixtures_start_nothing(pytester: pytest.Pytester, tmp_path) -> None:
    store = tmp_path / "store"
    pytester.makepyfile(test_user="def test_plain():\n    assert 1 + 1 == 2\n")
    run_user_tests(pytester, f"--rocketmq-store={store}").assert_outcomes(passed=1)
    assert not store.exists()


def test_store_and_broker_conf_options(pytester: pytest.Pytester, tmp_path) -> None:
    store = tmp_path / "kept-store"
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=UserCluster\nbrokerName=user-broker\nmappedFileSizeCommitLog=2097152\n")
    pytester.makepyfile(
        test_user="""
        def test_conf(rocketmq_cluster, rocketmq_topic, rocketmq_producer):
            assert list(rocketmq_cluster.broker_addrs) == ["user-broker"]
            rocketmq_producer.produce(rocketmq_topic, 1)
        """
    )
    run_user_tests(pytester, f"--rocketmq-store={store}", f"--rocketmq-broker-conf={conf}").assert_outcomes(passed=1)
    commit_log = sorted((store / "commitlog").iterdir())
    assert [f.name for f in commit_log] == ["00000000000000000000"]
    assert commit_log[0].stat().st_size == 2 * 1024 * 1024  # the conf's size; the plugin's default is 4 MiB
    assert (store / "config" / "topics.json").exists()


def test_acl_credentials_options(pytester: pytest.Pytester, tmp_path) -> None:
    """A broker.conf with aclEnable=true (plain_acl.yml beside it): with --rocketmq-access-key/--rocketmq-secret-key
    (an admin account) the topic is created and the helpers' producer and consumer sign; without them the broker
    refuses the topic's creation."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=acl-broker\naclEnable=true\n")
    (tmp_path / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: plugin-admin\n    secretKey: plugin-secret\n    admin: true\n"
    )
    pytester.makepyfile(
        test_user="""
        def test_signed(rocketmq_topic, rocketmq_producer, rocketmq_consumer):
            rocketmq_producer.produce(rocketmq_topic, 2)
            assert len(rocketmq_consumer.consume(rocketmq_topic, 2, timeout=10)) == 2
        """
    )
    args = (f"--rocketmq-store={tmp_path / 's1'}", f"--rocketmq-broker-conf={conf}")
    keys = ("--rocketmq-access-key=plugin-admin", "--rocketmq-secret-key=plugin-secret")
    run_user_tests(pytester, *args, *keys).assert_outcomes(passed=1)
    result = run_user_tests(pytester, f"--rocketmq-store={tmp_path / 's2'}", f"--rocketmq-broker-conf={conf}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*No accessKey is configured*"])


def test_external_namesrv_with_store_options_is_a_usage_error(pytester: pytest.Pytester, tmp_path) -> None:
    pytester.makepyfile(test_user="def test_plain():\n    pass\n")
    result = run_user_tests(pytester, "--rocketmq-namesrv=127.0.0.1:1", f"--rocketmq-store={tmp_path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rocketmq-namesrv uses an external cluster*"])


def _start_serve(store: str) -> tuple[subprocess.Popen[str], str]:
    """``rmq-core serve`` on free ports in its own process; its name server address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmq_core.cli", "serve", "--namesrv-port", "0", "--port", "0", "--dir", store],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("rmq-core serve: name server "):
        proc.kill()
        proc.wait()
        raise AssertionError(f"rmq-core serve printed {line!r}")
    return proc, line.split("name server ", 1)[1].split(",", 1)[0]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _topics_of(namesrv: str) -> set[str]:
    from rmq_core.remoting.body.route import TopicList
    from rmq_core.remoting.codes import RequestCode
    from rmq_core.remoting.command import RemotingCommand
    from rmq_core.remoting.remoting_client import BlockingRemotingClient

    with BlockingRemotingClient() as c:
        r = c.invoke_sync(namesrv, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    return set(TopicList.decode(r.body or b"{}").topic_list)


def test_external_namesrv(pytester: pytest.Pytester, tmp_path) -> None:
    """--rocketmq-namesrv: the fixtures create their topics on the brokers of a separately started rmq-core serve
    and start nothing themselves."""
    proc, namesrv = _start_serve(str(tmp_path / "external-store"))
    try:
        pytester.makepyfile(
            test_user=f"""
            import threading

            def test_external(rocketmq_cluster, rocketmq_topic_factory, rocketmq_producer, rocketmq_consumer):
                assert rocketmq_cluster.external and rocketmq_cluster.namesrv_addr == {namesrv!r}
                assert not any(t.name.startswith("rmq-broker") for t in threading.enumerate())
                topic = rocketmq_topic_factory(queues=3, name="ExternalPluginTopic")
                assert len(rocketmq_consumer.consumer.fetch_subscribe_message_queues(topic)) == 3
                rocketmq_producer.produce(topic, 5)
                assert len(rocketmq_consumer.consume(topic, 5)) == 5
            """
        )
        run_user_tests(pytester, f"--rocketmq-namesrv={namesrv}").assert_outcomes(passed=1)
        assert "ExternalPluginTopic" in _topics_of(namesrv)  # created on the external cluster
    finally:
        _stop(proc)
    assert os.listdir(tmp_path / "external-store" / "commitlog")  # the external broker stored the messages


JAVA_USER_TESTS = """
    import sys

    sys.path.insert(0, {tests_dir!r})

    from support.java_compat import run_java
    from support.java_scenarios import events, produce as java_produce


    def test_java_produces_rmq_core_consumes(rocketmq_cluster, rocketmq_topic, rocketmq_consumer, tmp_path):
        sends = java_produce(rocketmq_cluster.namesrv_addr, rocketmq_topic, str(tmp_path / "java-log"), 12)
        got = rocketmq_consumer.consume(rocketmq_topic, 12, timeout=20)
        assert sorted(m.body for m in got) == sorted(f"body-{{i}}".encode() for i in range(12))
        assert {{m.properties["UNIQ_KEY"] for m in got}} == {{s["msgId"] for s in sends.values()}}


    def test_rmq_core_produces_java_consumes(rocketmq_cluster, rocketmq_topic, rocketmq_producer, tmp_path):
        rocketmq_producer.produce(rocketmq_topic, 10, body_prefix="py-", tags="TagA")
        lines = run_java(
            "PullConsume",
            ["--namesrv", rocketmq_cluster.namesrv_addr, "--group", "plugin-java-pull", "--topic", rocketmq_topic,
             "--sub", "TagA", "--expect", 10, "--linger-ms", 500, "--timeout-ms", 30000],
            str(tmp_path / "java-log"),
            timeout=90,
        )
        got = events(lines, "msg")
        assert sorted(m["body"] for m in got) == sorted(f"py-{{i}}" for i in range(10))
        assert {{m["topic"] for m in got}} == {{rocketmq_topic}}
        assert events(lines, "done")[-1]["timedOut"] is False
"""


@pytest.mark.compat_java
def test_java_client_against_the_fixture_cluster(pytester: pytest.Pytester) -> None:
    from support.java_compat import java_classpath

    java_classpath()  # build the harness here (once), so the user's tests only run it
    pytester.makepyfile(test_user=JAVA_USER_TESTS.format(tests_dir=TESTS_DIR))
    run_user_tests(pytester, timeout=300).assert_outcomes(passed=2)
