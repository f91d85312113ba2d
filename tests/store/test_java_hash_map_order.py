"""``java_hash_map_order`` (the engine's module function, its pure-Python twin and ``message_encoding``'s wrapper)
against the orders Java 17's ``HashMap`` iterates names in, and a plain send's stored properties (the engine's
``SendRequestParser`` + ``put_send_requests``, Rust and twin) as 4.9.7's ``SendMessageProcessor`` writes them: the
map's names in that order, WAIT left out, no ``\\x02`` after the last entry. The expected orders were printed by
``new HashMap<>()`` filled in the order given, then ``keySet()`` (Java 17); the real broker's records are compared in
tests/interop/test_single_records_apache.py."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.message import UNIQ_KEY, decode_messages
from rmq_core.message_encoding import java_hash_map_order
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RPC_ONEWAY, RPC_TYPE_RESPONSE
from rmq_core.remoting.header import SendMessageRequestHeader, field_names
from rmq_core.store import MessageStore, StoreConfig

from support.helpers import stored_properties
from support.send_helpers import send_request

BACKENDS = ["rust", "python"]
_SAME_HASH = ["".join(p) for p in itertools.product(["Aa", "BB"], repeat=4)]  # "Aa" and "BB" hash alike

JAVA_ORDERS = [  # (names put in this order, the order Java 17's HashMap iterates them)
    ("TAGS,WAIT,CLUSTER", "CLUSTER,WAIT,TAGS"),
    (  # 17 names: the table doubles to 32
        ",".join([f"k{i}" for i in range(14)] + ["UNIQ_KEY", "WAIT", "CLUSTER"]),
        "k0,k1,k2,k3,k4,k5,k11,k6,k10,k7,k13,k8,k12,k9,UNIQ_KEY,CLUSTER,WAIT",
    ),
    (  # 34 names: a table of 64
        ",".join([f"user{i}" for i in range(30)] + ["KEYS", "TAGS", "UNIQ_KEY", "CLUSTER"]),
        "user11,user10,user15,user14,user13,user12,KEYS,user19,user18,user17,user16,UNIQ_KEY,CLUSTER,user1,user22,"
        "user2,user21,user20,user0,user26,user25,user24,user23,user9,user7,user8,user5,user6,user3,user4,user29,"
        "user28,user27,TAGS",
    ),
    (  # 9 names of one hash: the 9th put doubles the table (treeifyBin below 64), which moves x after them
        ",".join(["x", *_SAME_HASH[:9], "y"]),
        ",".join([*_SAME_HASH[:9], "x", "y"]),
    ),
    (  # a delayed send's map (4.9.7's CommitLog adds REAL_TOPIC and REAL_QID)
        "TAGS,KEYS,UNIQ_KEY,WAIT,a,b,CLUSTER,DELAY,REAL_TOPIC,REAL_QID",
        "a,REAL_TOPIC,b,KEYS,UNIQ_KEY,CLUSTER,WAIT,DELAY,TAGS,REAL_QID",
    ),
    ("日本,😀,a,CLUSTER", "a,😀,日本,CLUSTER"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("names, java", JAVA_ORDERS)
def test_the_order_of_java_17s_hash_map(backend, names, java):
    names_list = names.split(",")
    order, exact = _backend.load(backend).java_hash_map_order(names_list)
    assert exact and ",".join(names_list[i] for i in order) == java


def test_message_encodings_wrapper_keeps_the_values():
    names, java = JAVA_ORDERS[3]  # the table doubled by a long chain
    props = {name: f"v{i}" for i, name in enumerate(names.split(","))}
    ordered = java_hash_map_order(props)
    assert ",".join(ordered) == java and ordered == props


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bin_java_would_treeify_is_reported(backend):
    impl = _backend.load(backend)
    assert impl.java_hash_map_order(_SAME_HASH[:10])[1]  # the 10th put doubles the table to 64
    assert not impl.java_hash_map_order(_SAME_HASH[:11])[1]  # the 11th treeifies the bin: not modelled


_NAME = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_NAME, st.sampled_from(_SAME_HASH), st.sampled_from(["TAGS", "KEYS", "WAIT"])), max_size=70))
def test_rust_and_twin_agree(names):
    names = list(dict.fromkeys(names))
    assert _backend.load("rust").java_hash_map_order(names) == _backend.load("python").java_hash_map_order(names)


def _parser(impl):
    return impl.SendRequestParser(
        (int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_MESSAGE_V2)),
        field_names(SendMessageRequestHeader)[:13],
        field_names(SendMessageRequestHeader, short_names=True)[:13],
        ["DELAY", "TRAN_MSG"],
        "WAIT",
        "CLUSTER",
        UNIQ_KEY,
        True,
        RPC_ONEWAY,
        "JAVA",
        RPC_TYPE_RESPONSE,
        ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"],
    )


def _props(names: list[str]) -> str:
    return "\x02".join(f"{n}\x01{'true' if n == 'WAIT' else n.lower() + '-v'}" for n in names)


PLAIN_SENDS = [  # (the header's property names, the order 4.9.7 stores them in: Java's order of them + CLUSTER)
    (["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", "b"], "a,b,KEYS,UNIQ_KEY,CLUSTER,TAGS"),
    (  # 16 names + CLUSTER: a table of 32, sized with WAIT still in the map
        [f"p{i}" for i in range(14)] + ["UNIQ_KEY", "WAIT"],
        "p0,p1,p2,p3,p4,p5,p6,p7,p8,p9,p10,p12,p11,p13,UNIQ_KEY,CLUSTER",
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("names, stored", PLAIN_SENDS)
def test_a_plain_send_stores_4_9_7s_property_string(tmp_path, backend, names, stored):
    impl = _backend.load(backend)
    requests = [
        send_request("TopicP", b"body", properties=_props(names)),
        send_request("TopicP", b"body", properties="TAGS\x01t"),  # no UNIQ_KEY: the store's, last
    ]
    sends = _parser(impl).parse(requests, "c1")
    assert sends.key_of == [0, 0]
    with MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=1 << 20), backend=backend) as store:
        raw = store.put_send_requests(sends, 0, 2, [0], ("10.0.0.7", 4242), wait_flush=False)
        records = [store.read_commit_log(offset, size) or b"" for _, offset, _, size in raw]
    value = {"CLUSTER": "c1", **{n: n.lower() + "-v" for n in names if n != "WAIT"}}
    expected = "\x02".join(f"{n}\x01{value[n]}" for n in stored.split(","))
    assert stored_properties(records[0]) == expected.encode()
    assigned = decode_messages(records[1])[0].properties[UNIQ_KEY]
    assert stored_properties(records[1]) == f"CLUSTER\x01c1\x02TAGS\x01t\x02UNIQ_KEY\x01{assigned}".encode()
