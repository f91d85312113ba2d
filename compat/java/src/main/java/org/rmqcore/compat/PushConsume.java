/*
 * PushConsume: DefaultMQPushConsumer (CLUSTERING by default, CONSUME_FROM_FIRST_OFFSET, a tag expression, a
 * concurrent listener or, with --orderly true, an orderly one), one JSON line per delivered message.
 *   --namesrv host:port --group G --topic T [--sub "TagA || TagC"] [--expect N] [--timeout-ms 30000]
 *   [--linger-ms 1000] [--orderly false] [--model CLUSTERING|BROADCASTING] [--from FIRST|LAST]
 *   [--selector TAG|SQL92] [--reconsume-once false] [--pop false]
 * --pop true (a 5.x client only) calls setClientRebalance(false): the broker balances (QUERY_ASSIGNMENT) and, when the
 * group's mode for the topic is POP (SET_MESSAGE_REQUEST_MODE), the consumer pops, acks and changes invisible time.
 * --selector SQL92 makes --sub a SQL92 expression (MessageSelector.bySql). --reconsume-once true makes the concurrent
 * listener answer RECONSUME_LATER (delay level 1) for every message it sees with reconsumeTimes 0, so each comes back
 * once through the group's retry topic (CONSUMER_SEND_MSG_BACK); both deliveries are printed.
 * Lines: {"event":"started"}; {"event":"assigned","queues":[...]} once rebalancing has given it queues and every one
 * of them has issued its first pull; {"event":"msg",...} per delivery (duplicates included, as delivered);
 * {"event":"done","received":n,"timedOut":bool} after shutdown. It stops once N messages arrived and then
 * --linger-ms passed without reaching the timeout (so extra deliveries are seen), or at the timeout. Shutdown waits for
 * the consume threads (so the last offsets are in the offset store), persists offsets to the broker and unregisters.
 * Threads: the client's consume threads only enqueue; the main thread prints.
 */
package org.rmqcore.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public final class PushConsume {
    private PushConsume() {
    }

    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv);
        int expect = a.integer("expect", Integer.MAX_VALUE);
        long timeoutMs = a.lng("timeout-ms", 30000);
        long lingerMs = a.lng("linger-ms", 1000);
        final LinkedBlockingQueue<MessageExt> inbox = new LinkedBlockingQueue<>();

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(a.str("group"));
        consumer.setNamesrvAddr(a.str("namesrv"));
        consumer.setInstanceName(a.str("instance", "push-" + ProcessHandle.current().pid()));
        setMessageModel(consumer, a.str("model", "CLUSTERING"));
        consumer.setConsumeFromWhere("LAST".equals(a.str("from", "FIRST"))
            ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setAwaitTerminationMillisWhenShutdown(5000);
        if (a.flag("pop")) {  // by reflection: the 4.9.7 client has no such method
            consumer.getClass().getMethod("setClientRebalance", boolean.class).invoke(consumer, false);
        }
        if ("SQL92".equals(a.str("selector", "TAG"))) {
            consumer.subscribe(a.str("topic"), MessageSelector.bySql(a.str("sub")));
        } else {
            consumer.subscribe(a.str("topic"), a.str("sub", "*"));
        }
        final boolean reconsumeOnce = a.flag("reconsume-once");
        if (a.flag("orderly")) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                inbox.addAll(msgs);
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                inbox.addAll(msgs);
                if (reconsumeOnce && msgs.get(0).getReconsumeTimes() == 0) {
                    ctx.setDelayLevelWhenNextConsume(1);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }

        int received = 0;
        boolean timedOut = false;
        int code = 0;
        long startMs = System.currentTimeMillis();
        try {
            consumer.start();
            Out.line(Out.obj("started"));
            long deadline = startMs + timeoutMs;
            boolean assigned = false;
            long reachedAt = -1;
            while (true) {
                long now = System.currentTimeMillis();
                if (!assigned) {
                    assigned = reportAssigned(consumer, startMs);
                }
                if (reachedAt < 0 && received >= expect) {
                    reachedAt = now;
                }
                if (reachedAt >= 0 && now - reachedAt >= lingerMs) {
                    break;
                }
                if (now >= deadline) {
                    timedOut = received < expect;
                    break;
                }
                MessageExt m = inbox.poll(50, TimeUnit.MILLISECONDS);
                if (m != null) {
                    Out.line(Out.message("msg", m));
                    received++;
                }
            }
        } catch (Throwable e) {
            Out.error("consume", e);
            code = 1;
        } finally {
            consumer.shutdown();
        }
        for (MessageExt m = inbox.poll(); m != null; m = inbox.poll()) {  // delivered while shutting down
            Out.line(Out.message("msg", m));
            received++;
        }
        Map<String, Object> done = Out.obj("done");
        done.put("received", received);
        done.put("timedOut", timedOut);
        Out.line(done);
        System.exit(code);
    }

    private static boolean reportAssigned(DefaultMQPushConsumer consumer, long startMs) {
        Map<MessageQueue, ProcessQueue> table =
            consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
        if (table.isEmpty()) {
            return false;
        }
        List<String> queues = new ArrayList<>();
        for (Map.Entry<MessageQueue, ProcessQueue> e : table.entrySet()) {
            if (e.getValue().getLastPullTimestamp() < startMs) {
                return false;
            }
            queues.add(e.getKey().getTopic() + "@" + e.getKey().getBrokerName() + ":" + e.getKey().getQueueId());
        }
        java.util.Collections.sort(queues);
        Map<String, Object> m = Out.obj("assigned");
        m.put("queues", queues);
        Out.line(m);
        return true;
    }

    /** MessageModel by name, through reflection: its package differs between clients 4.9 (common.protocol) and 5.x
     *  (remoting.protocol), so one source builds against both. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void setMessageModel(DefaultMQPushConsumer consumer, String name) {
        try {
            java.lang.reflect.Method get = consumer.getClass().getMethod("getMessageModel");
            Class type = get.getReturnType();
            consumer.getClass().getMethod("setMessageModel", type).invoke(consumer, Enum.valueOf(type, name));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("setMessageModel(" + name + ")", e);
        }
    }
}
