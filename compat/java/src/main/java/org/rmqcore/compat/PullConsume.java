/*
 * PullConsume: DefaultLitePullConsumer in subscribe mode (CLUSTERING, CONSUME_FROM_FIRST_OFFSET, a tag expression,
 * auto-commit) or in assign mode (--mode assign: every queue of the topic assigned, no tag expression), one JSON line
 * per polled message.
 *   --namesrv host:port --group G --topic T [--sub "*"] [--mode subscribe|assign] [--expect N] [--timeout-ms 30000]
 *   [--linger-ms 1000]
 * Lines: {"event":"started"}, {"event":"msg",...} per message, {"event":"done","received":n,"timedOut":bool,
 * "committed":{"broker:queueId":offset}} (the offsets the broker holds for the group after commitSync, read back).
 * Shutdown commits the polled offsets to the broker (UPDATE_CONSUMER_OFFSET). Single-threaded (the client's pull
 * threads are its own).
 */
package org.rmqcore.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public final class PullConsume {
    private PullConsume() {
    }

    public static void main(String[] argv) {
        Args a = new Args(argv);
        int expect = a.integer("expect", Integer.MAX_VALUE);
        long timeoutMs = a.lng("timeout-ms", 30000);
        long lingerMs = a.lng("linger-ms", 1000);
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(a.str("group"), a.rpcHook());
        consumer.setNamesrvAddr(a.str("namesrv"));
        consumer.setInstanceName(a.str("instance", "pull-" + ProcessHandle.current().pid()));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setAutoCommit(true);
        consumer.setPollTimeoutMillis(200);
        int received = 0;
        boolean timedOut = false;
        int code = 0;
        boolean assign = "assign".equals(a.str("mode", "subscribe"));
        Map<String, Object> committed = new TreeMap<>();
        Collection<MessageQueue> queues = new ArrayList<>();
        try {
            if (!assign) {
                consumer.subscribe(a.str("topic"), a.str("sub", "*"));
            }
            consumer.start();
            if (assign) {
                queues = consumer.fetchMessageQueues(a.str("topic"));
                consumer.assign(queues);
            }
            Out.line(Out.obj("started"));
            long deadline = System.currentTimeMillis() + timeoutMs;
            long reachedAt = -1;
            while (true) {
                long now = System.currentTimeMillis();
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
                List<MessageExt> batch = consumer.poll();
                for (MessageExt m : batch) {
                    Out.line(Out.message("msg", m));
                    received++;
                }
            }
            consumer.commitSync();
            if (assign) {
                for (MessageQueue mq : queues) {
                    committed.put(mq.getBrokerName() + ":" + mq.getQueueId(), consumer.committed(mq));
                }
            }
        } catch (Throwable e) {
            Out.error("pull", e);
            code = 1;
        } finally {
            consumer.shutdown();
        }
        Map<String, Object> done = Out.obj("done");
        done.put("received", received);
        done.put("timedOut", timedOut);
        done.put("committed", committed);
        Out.line(done);
        System.exit(code);
    }
}
