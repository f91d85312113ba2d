"""``rmq_core.client.__all__``: the types users construct and receive (docs/CLIENT_DESIGN.md "Public API"), each
defined in its own module; the machinery stays importable from its module and is not exported."""

from __future__ import annotations

import importlib
import inspect

import rmq_core.client as client

# the names /work/shared/DESIGN.md, the README and docs/CLIENT_DESIGN.md give users of rmq_core.client
DOCUMENTED = {
    "Producer", "SendResult", "SendStatus", "MessageQueueSelector", "SelectMessageQueueByHash",
    "TransactionProducer", "TransactionSendResult", "TransactionListener", "LocalTransactionState",
    "PushConsumer", "PullConsumer", "PullResult", "PullStatus", "MessageModel", "ConsumeFromWhere",
    "ConsumeConcurrentlyStatus", "ConsumeOrderlyStatus", "ConsumeConcurrentlyContext", "ConsumeOrderlyContext",
    "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash", "AllocateMessageQueueByConfig",
    "MQClientException", "MQBrokerException", "Admin",
}  # fmt: skip

# the machinery: each importable from its own module, none of them exported by the package
INTERNAL = {
    "rmq_core.client.consumer.push_consumer": "DefaultMQPushConsumerImpl",
    "rmq_core.client.consumer.pull_api_wrapper": "PullAPIWrapper",
    "rmq_core.client.consumer.process_queue": "ProcessQueue",
    "rmq_core.client.consumer.rebalance_impl": "RebalanceImpl",
    "rmq_core.client.mq_client_instance": "MQClientInstance",
    "rmq_core.client.mq_client_manager": "MQClientManager",
    "rmq_core.client.mq_client_api": "MQClientAPIImpl",
    "rmq_core.client.pull_message_service": "PullMessageService",
    "rmq_core.client.rebalance_service": "RebalanceService",
    "rmq_core.client.client_inner_producer": "ClientInnerProducer",
    "rmq_core.client.blocking_mq_client_api": "BlockingMQClientAPI",
}


def test_all_names_the_documented_user_types_and_each_resolves():
    exported = set(client.__all__)
    assert not DOCUMENTED - exported, sorted(DOCUMENTED - exported)
    assert len(client.__all__) == len(exported), "a name listed twice"
    for name in client.__all__:
        obj = getattr(client, name)
        assert inspect.isclass(obj), name
        assert obj.__module__.startswith("rmq_core.") and obj.__module__ != "rmq_core.client", (name, obj.__module__)


def test_the_machinery_is_not_exported_but_importable_from_its_module():
    for module, name in INTERNAL.items():
        assert name not in client.__all__, name
        assert not hasattr(client, name), name
        assert inspect.isclass(getattr(importlib.import_module(module), name)), (module, name)


def test_star_import_gives_exactly_all():
    namespace: dict[str, object] = {}
    exec("from rmq_core.client import *", namespace)
    assert {k for k in namespace if not k.startswith("__")} == set(client.__all__)
