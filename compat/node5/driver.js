// sdk5-node: RocketMQ's 5.x Node.js SDK (rocketmq-client-nodejs, plaintext gRPC: the SDK's default) against one
// endpoint, every scenario of tests/interop/test_grpc_go_node5.py in one process: Producer normal, FIFO (message
// groups) and delay sends; SimpleConsumer receive → ack → no redelivery, no ack → redelivered with delivery attempt
// 2, change invisible duration, FIFO order per group, the delay's arrival; PushConsumer receives what was sent.
// Usage: node driver.js ENDPOINT CONFIG_JSON; prints one line "RESULT {json}" (facts; the test judges them).
'use strict';
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const endpoints = process.argv[2];
const cfg = JSON.parse(process.argv[3]);
// a receive's long poll: Apache's proxy refuses a deadline under its 5 s minimum long polling time
const AWAIT_MS = 5000;
const invisible = cfg.invisible_s * 1000;
const errors = [];
const T0 = Date.now();
// RMQ_SDK5_TRACE=1: each stage and the SDK's warnings and errors on stderr
const trace = process.env.RMQ_SDK5_TRACE ? (...a) => process.stderr.write(`${Date.now() - T0} ms ${a.join(' ')}\n`) : () => {};
const logger = { info: process.env.RMQ_SDK5_TRACE === '2' ? (...a) => trace('INFO', ...a) : () => {}, debug() {}, warn: (...a) => trace('WARN', ...a), error: (...a) => trace('ERROR', ...a) };
const view = (m) => ({
  id: m.messageId, body: m.body.toString(), tag: m.tag || '', keys: m.keys, group: m.messageGroup || '',
  attempt: m.deliveryAttempt, at_ms: Date.now(),
});

async function consumer(group, topic) {
  const c = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: group, logger, awaitDuration: AWAIT_MS,
    subscriptions: new Map().set(topic, '*'),
  });
  await c.startup();
  return c;
}

// long-polls until want messages came or the deadline passed; ack(m) decides per message whether to ack it
async function receive(c, want, deadline, ack) {
  const out = [];
  const views = [];
  while (out.length < want && Date.now() < deadline) {
    let ms;
    try {
      ms = await c.receive(32, invisible);
    } catch (e) {
      if (errors.length < 20) errors.push(String(e && e.message || e));
      continue;
    }
    for (const m of ms) {
      out.push(view(m));
      views.push(m);
      if (ack(m)) await c.ack(m);
    }
  }
  return [out, views];
}

async function main() {
  const res = {};
  const t0 = Date.now();
  // one topic at startup: the SDK (1.0.8) resolves startup on the first Settings answer only if that answer comes
  // after it fetched every topic's route; with several topics a prompt answer arrives before and startup never ends
  const producer = new Producer({ endpoints, namespace: '', logger, topics: [cfg.topic] });
  trace('producer starting');
  await producer.startup();
  trace('producer started');
  res.producer_start_ms = Date.now() - t0;
  const send = async (m) => (await producer.send(m)).messageId;

  res.normal_sent = [];
  for (let i = 0; i < 3; i++) {
    res.normal_sent.push(await send({ topic: cfg.topic, tag: 'tagA', keys: [`key-${i}`], body: Buffer.from(`normal-${i}`) }));
  }
  res.fifo_sent = [];
  for (let i = 0; i < cfg.fifo_each; i++) {
    for (let g = 0; g < cfg.fifo_groups; g++) {
      res.fifo_sent.push(await send({ topic: cfg.fifo_topic, messageGroup: `g${g}`, body: Buffer.from(`g${g}-${i}`) }));
    }
  }

  // SimpleConsumer: ack the first, leave the second, change the third's invisible duration to 1 s
  trace('simple consumer');
  const sc = await consumer(cfg.group, cfg.topic);
  const [first, views] = await receive(sc, 3, Date.now() + 20000, () => false);
  res.first = first;
  if (views.length >= 3) {
    await sc.ack(views[0]);
    res.acked = first[0].id;
    res.unacked = first[1].id;
    await sc.changeInvisibleDuration(views[2], 1000);
    res.changed = first[2].id;
    res.changed_at_ms = Date.now();
    // the changed one comes back first, with delivery attempt 2
    [res.changed_back] = await receive(sc, 1, Date.now() + invisible - 1000, () => true);
  }

  // FIFO consumption while the unacked message is invisible
  trace('fifo consumer');
  const fc = await consumer(cfg.fifo_group, cfg.fifo_topic);
  [res.fifo_received] = await receive(fc, cfg.fifo_each * cfg.fifo_groups, Date.now() + 20000, () => true);
  await fc.shutdown();

  // delay: the consumer waits before the message is sent
  trace('delay consumer');
  const dc = await consumer(cfg.delay_group, cfg.delay_topic);
  const due = new Date(Date.now() + cfg.delay_ms);
  res.delay_sent = await send({ topic: cfg.delay_topic, deliveryTimestamp: due, body: Buffer.from('delayed') });
  res.delay_due_ms = due.getTime();
  [res.delay_received] = await receive(dc, 1, Date.now() + cfg.delay_ms + 15000, () => true);
  await dc.shutdown();

  // PushConsumer: five messages, each consumed (SUCCESS)
  res.push_sent = [];
  res.push_received = [];
  let pushDone;
  const pushAll = new Promise((resolve) => { pushDone = resolve; });
  const pc = new PushConsumer({
    endpoints, namespace: '', consumerGroup: cfg.push_group, logger, subscriptions: new Map().set(cfg.push_topic, '*'),
    messageListener: {
      async consume(m) {
        if (!res.push_received.includes(m.messageId)) res.push_received.push(m.messageId);
        if (res.push_received.length >= 5) pushDone();
        return ConsumeResult.SUCCESS;
      },
    },
  });
  trace('push consumer');
  await pc.startup();
  for (let i = 0; i < 5; i++) res.push_sent.push(await send({ topic: cfg.push_topic, body: Buffer.from(`push-${i}`) }));
  await Promise.race([pushAll, new Promise((r) => setTimeout(r, 20000))]);
  trace('push received', res.push_received.length);
  // its shutdown waits for the long poll in flight (the server's push long polling timeout): overlapped with the rest
  const pushStopped = pc.shutdown();

  // the unacked one after its invisible time; then nothing more
  trace('redeliveries');
  res.redelivery_phase_ms = Date.now();
  [res.redelivered] = await receive(sc, 1, Date.now() + invisible + 15000, () => true);
  [res.after] = await receive(sc, 1, Date.now() + AWAIT_MS, () => true);
  await sc.shutdown();
  await pushStopped;
  trace('push consumer shut down');
  await producer.shutdown();
  res.total_ms = Date.now() - t0;
  res.receive_errors = errors;
  process.stdout.write(`RESULT ${JSON.stringify(res)}\n`);
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`${e && e.stack || e}\n`);
  process.exit(1);
});
