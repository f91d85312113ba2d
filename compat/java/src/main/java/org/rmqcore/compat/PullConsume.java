/*
 * PullConsume: DefaultLitePullConsumer in subscribe mode (CLUSTERING, CONSUME_FROM_FIRST_OFFSET, a tag expression,
 * auto-commit), one JSON line per polled message.
 *   --namesrv host:port --group G --topic T [--sub "*"] [--expect N] [--timeout-ms 30000] [--linger-ms 1000]
 * Lines: {"event":"started"}, {"event":"msg",...} per message, {"event":"done","received":n,"timedOut":bool}.
 * Shutdown commits the polled offsets to the broker (UPDATE_CONSUMER_OFFSET). Single-threaded (the client's pull
 * threads are its own).
 */
package org.rmqcore.compat;

import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public final class PullConsume {
    private PullConsume() {
    }

    public static void main(String[] argv) {
        Args a = new Args(argv);
        int expect = a.integer("expect", Integer.MAX_VALUE);
        long timeoutMs = a.lng("timeout-ms", 30000);
        long lingerMs = a.lng("linger-ms", 1000);
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(a.str("group"));
        consumer.setNamesrvAddr(a.str("namesrv"));
        consumer.setInstanceName(a.str("instance", "pull-" + ProcessHandle.current().pid()));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setAutoCommit(true);
        consumer.setPollTimeoutMillis(200);
        int received = 0;
        boolean timedOut = false;
        int code = 0;
        try {
            consumer.subscribe(a.str("topic"), a.str("sub", "*"));
            consumer.start();
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
        } catch (Throwable e) {
            Out.error("pull", e);
            code = 1;
        } finally {
            consumer.shutdown();
        }
        Map<String, Object> done = Out.obj("done");
        done.put("received", received);
        done.put("timedOut", timedOut);
        Out.line(done);
        System.exit(code);
    }
}
