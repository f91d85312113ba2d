"""Runs RocketMQ's 5.x Python SDK (PyPI rocketmq-python-client) against an endpoint, in the SDK's own virtual
environment (its top-level ``rocketmq`` package is not the C++ client's of the same name): the tests in this
folder start it as a subprocess. ``python sdk5_driver.py ENDPOINT SCENARIO JSON-ARGS``; prints one JSON line."""

from __future__ import annotations

import json
import os
import sys
import time

from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.model import Message
from rocketmq.v5.producer import Producer, TransactionChecker


def _message(topic: str, spec: dict) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = spec["body"].encode()
    if spec.get("tag"):
        msg.tag = spec["tag"]
    for key in spec.get("keys", ()):
        msg.keys = key  # the SDK's setter adds one key
    for k, v in spec.get("properties", {}).items():
        msg.add_property(k, v)
    if spec.get("group"):
        msg.message_group = spec["group"]
    if spec.get("deliver_at_s"):
        msg.delivery_timestamp = spec["deliver_at_s"]  # the SDK's delivery timestamp is in epoch seconds
    return msg


class _Checker(TransactionChecker):
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.checked: list[str] = []

    def check(self, message):
        from rocketmq.grpc_protocol import TransactionResolution

        self.checked.append(message.message_id)
        return TransactionResolution.COMMIT if self.answer == "commit" else TransactionResolution.ROLLBACK


def _credentials(args: dict) -> Credentials:
    return Credentials(args.get("ak", ""), args.get("sk", ""))


def _refused(args: dict, fn, *fn_args) -> dict | None:
    """With ``collect_errors``, an exception of ``fn`` is the scenario's result (``{"errors": [...]}``)."""
    if not args.get("collect_errors"):
        fn(*fn_args)
        return None
    try:
        fn(*fn_args)
    except Exception as e:
        return {"errors": [repr(e)]}
    return None


def produce(endpoint: str, args: dict) -> dict:
    topic = args["topic"]
    checker = _Checker(args.get("check_answer", "commit"))
    config = ClientConfiguration(endpoint, _credentials(args))
    producer = Producer(config, (topic,), checker=checker, tls_enable=bool(args.get("tls")))
    t0 = time.time()
    refused = _refused(args, producer.startup)
    if refused is not None:
        return refused
    started_s = time.time() - t0
    sent = []
    t_send = time.time()
    try:
        specs = [one for spec in args["messages"] for one in [spec] * spec.get("repeat", 1)]
        for spec in specs:
            msg = _message(topic, spec)
            tx = spec.get("transaction")
            if tx:
                transaction = producer.begin_transaction()
                receipt = producer.send(msg, transaction)
                if tx == "commit":
                    transaction.commit()
                elif tx == "rollback":
                    transaction.rollback()
                # "orphan": neither; the broker's check asks the checker
            elif spec.get("async"):
                receipt = producer.send_async(msg).result(10)
            elif args.get("collect_errors"):
                try:
                    receipt = producer.send(msg)
                except Exception as e:
                    return {"errors": [repr(e)], "sent": sent}
            else:
                receipt = producer.send(msg)
            sent.append({"message_id": receipt.message_id, "offset": receipt.offset})
        deadline = time.time() + args.get("wait_checks_s", 0)
        while time.time() < deadline and len(checker.checked) < args.get("expect_checks", 0):
            time.sleep(0.2)
    finally:
        producer.shutdown()
    return {"started_s": started_s, "sent": sent, "checked": checker.checked, "send_s": time.time() - t_send}


def _received(m) -> dict:
    return {
        "message_id": m.message_id,
        "body": m.body.decode(),
        "tag": m.tag,
        "keys": sorted(m.keys),
        "properties": dict(m.properties),
        "attempt": m.delivery_attempt,
        "group": m.message_group,
    }


def simple(endpoint: str, args: dict) -> dict:
    """A SimpleConsumer running ``args["steps"]`` in order: receive (until ``until`` messages or ``timeout_s``),
    then ack, change the invisible duration, or leave them; each step's messages, errors and times come back."""
    from rocketmq.v5.consumer import SimpleConsumer
    from rocketmq.v5.model import FilterExpression

    config = ClientConfiguration(endpoint, _credentials(args))
    sub = {args["topic"]: FilterExpression(args.get("tag", "*"))}
    consumer = SimpleConsumer(config, args["group"], sub, await_duration=args.get("await_s", 5))
    refused = _refused(args, consumer.startup)
    if refused is not None:
        return refused
    held: list = []
    out = []
    try:
        for step in args["steps"]:
            got, errors, t0 = [], [], time.time()
            if step["op"] == "receive":
                while len(got) < step.get("until", 1) and time.time() - t0 < step.get("timeout_s", 30):
                    try:
                        batch = consumer.receive(step.get("max", 32), step.get("invisible_s", 15))
                    except Exception as e:
                        errors.append(repr(e))
                        time.sleep(0.2)
                        continue
                    got.extend(batch)
                held = got
                for m in got:
                    if step.get("then") == "ack":
                        consumer.ack(m)
                    elif step.get("then") == "change":
                        consumer.change_invisible_duration(m, step["change_s"])
            elif step["op"] == "ack_held":  # ack what the last receive returned (expired handles: errors)
                for m in held:
                    try:
                        consumer.ack(m)
                    except Exception as e:
                        errors.append(repr(e))
            elif step["op"] == "sleep":
                time.sleep(step["s"])
            elif step["op"] == "wait_file":  # stay up (heartbeating) until the test writes the file
                while not os.path.exists(step["path"]) and time.time() - t0 < step.get("timeout_s", 120):
                    time.sleep(0.1)
            ended = time.time()
            out.append(
                {"messages": [_received(m) for m in got], "errors": errors, "took_s": ended - t0, "ended_at": ended}
            )
    finally:
        consumer.shutdown()
    return {"steps": out}


def push(endpoint: str, args: dict) -> dict:
    """A PushConsumer for ``run_s`` seconds (or until ``until`` deliveries): bodies in ``fail`` answer FAILURE,
    ``slow_s`` makes the listener take that long; every delivery is recorded (id, body, attempt, time)."""
    import threading

    from rocketmq.v5.consumer import PushConsumer
    from rocketmq.v5.consumer.push import ConsumeResult, MessageListener
    from rocketmq.v5.model import FilterExpression

    deliveries: list[dict] = []
    lock = threading.Lock()
    fail = set(args.get("fail", ()))

    class Listener(MessageListener):
        def consume(self, message):
            with lock:
                deliveries.append({**_received(message), "at": time.time()})
            if args.get("slow_s"):
                time.sleep(args["slow_s"])
            return ConsumeResult.FAILURE if message.body.decode() in fail else ConsumeResult.SUCCESS

    config = ClientConfiguration(endpoint, _credentials(args))
    consumer = PushConsumer(config, args["group"], Listener(), {args["topic"]: FilterExpression("*")})
    t0 = time.time()
    consumer.startup()
    started_s = time.time() - t0
    try:
        deadline = time.time() + args["run_s"]
        while time.time() < deadline:
            with lock:
                if len(deliveries) >= args.get("until", 1 << 30):
                    break
            time.sleep(0.1)
    finally:
        consumer.shutdown()
    return {"started_s": started_s, "deliveries": deliveries}


if __name__ == "__main__":
    endpoint, scenario, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    result = {"produce": produce, "simple": simple, "push": push}[scenario](endpoint, json.loads(raw))
    print("RESULT " + json.dumps(result), flush=True)
    os._exit(0)  # a client whose start was refused may leave threads behind
