"""PullAPIWrapper.processPullResult (seed 002): a FOUND body decoded, re-filtered by the subscription's tags (the
exact tag string), each message given MIN_OFFSET/MAX_OFFSET, its broker name, and — a message whose TRAN_MSG property
is true (a committed transactional message keeps it) — its UNIQ_KEY as ``transaction_id``; the binary dropped;
the broker's suggested node remembered. The body is a real store's pull body.
"""

from __future__ import annotations

from rmq_core.client.consumer.pull_api_wrapper import PullAPIWrapper
from rmq_core.client.pull_result import PullResultExt, PullStatus
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.message import (
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_TRANSACTION_PREPARED,
    UNIQ_KEY,
    Message,
    MessageQueue,
)
from rmq_core.store import MessageStore

from support.helpers import small_config


def _pull_body(root: str) -> bytes:
    msgs = [
        Message("T", b"committed", tags="A", properties={PROPERTY_TRANSACTION_PREPARED: "true", UNIQ_KEY: "U1"}),
        Message("T", b"upper case", tags="A", properties={PROPERTY_TRANSACTION_PREPARED: "TRUE", UNIQ_KEY: "U2"}),
        Message("T", b"not a transaction", tags="A", properties={PROPERTY_TRANSACTION_PREPARED: "no", UNIQ_KEY: "U3"}),
        Message("T", b"plain", tags="A", properties={UNIQ_KEY: "U4"}),
        Message("T", b"other tag", tags="B", properties={PROPERTY_TRANSACTION_PREPARED: "true", UNIQ_KEY: "U5"}),
    ]
    store = MessageStore(root, small_config())
    try:
        assert store.put_messages([(m, 0) for m in msgs]).all_ok
        return store.get_message("G", "T", 0, 0, 32).body
    finally:
        store.close()


def test_a_found_result_is_refiltered_annotated_and_gets_transaction_ids(tmp_path) -> None:
    wrapper = PullAPIWrapper(instance=None, consumer_group="G")
    mq = MessageQueue("T", "broker-a", 0)
    result = PullResultExt(
        PullStatus.FOUND, 5, 0, 5, suggest_which_broker_id=1, message_binary=_pull_body(str(tmp_path))
    )
    sub = SubscriptionData("T", "A", tags_set={"A"})
    out = wrapper.process_pull_result(mq, result, sub)
    assert out.message_binary is None
    assert wrapper.recalculate_pull_from_which_node(mq) == 1
    msgs = out.msg_found_list or []
    assert [m.body for m in msgs] == [b"committed", b"upper case", b"not a transaction", b"plain"]  # tag B dropped
    assert [m.transaction_id for m in msgs] == ["U1", "U2", None, None]
    assert all(m.broker_name == "broker-a" for m in msgs)
    assert all(m.properties[PROPERTY_MIN_OFFSET] == "0" and m.properties[PROPERTY_MAX_OFFSET] == "5" for m in msgs)


def test_results_other_than_found_only_drop_the_binary(tmp_path) -> None:
    wrapper = PullAPIWrapper(instance=None, consumer_group="G")
    mq = MessageQueue("T", "broker-a", 0)
    result = PullResultExt(PullStatus.NO_NEW_MSG, 5, 0, 5, message_binary=b"ignored")
    out = wrapper.process_pull_result(mq, result, SubscriptionData("T"))
    assert out.message_binary is None and not out.msg_found_list
