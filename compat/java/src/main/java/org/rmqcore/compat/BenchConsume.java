/*
 * BenchConsume: consume throughput of an existing backlog with DefaultMQPushConsumer and a trivial concurrent
 * listener (counts messages), for benches/bench_client.py.
 *   --namesrv host:port --group G --topic T --expect N [--batch 1] [--threads 20] [--pull-batch 32]
 *   [--timeout-ms 120000]
 * CONSUME_FROM_FIRST_OFFSET (a new group reads the whole backlog). The clock starts at the first delivered message
 * and stops when N messages were delivered (duplicates counted as delivered, as a listener sees them).
 * Prints one line {"event":"result","count":n,"seconds":s,"msgsPerSec":r,"startupSeconds":t,"timedOut":bool}.
 * Threads: the consume threads only bump an atomic counter; the main thread waits on a latch.
 */
package org.rmqcore.compat;

import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

public final class BenchConsume {
    private BenchConsume() {
    }

    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv);
        final int expect = a.integer("expect", 100000);
        final AtomicLong count = new AtomicLong();
        final AtomicLong firstNanos = new AtomicLong();
        final CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(a.str("group"));
        consumer.setNamesrvAddr(a.str("namesrv"));
        consumer.setInstanceName("bench-consume-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeMessageBatchMaxSize(a.integer("batch", 1));
        consumer.setPullBatchSize(a.integer("pull-batch", 32));
        consumer.setConsumeThreadMin(a.integer("threads", 20));
        consumer.setConsumeThreadMax(a.integer("threads", 20));
        consumer.subscribe(a.str("topic"), "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            firstNanos.compareAndSet(0, System.nanoTime());
            if (count.addAndGet(msgs.size()) >= expect) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        int code = 0;
        long started = System.nanoTime();
        boolean finished = false;
        long end = 0;
        try {
            consumer.start();
            finished = done.await(a.lng("timeout-ms", 120000), TimeUnit.MILLISECONDS);
            end = System.nanoTime();
        } catch (Throwable e) {
            Out.error("consume", e);
            code = 1;
        } finally {
            consumer.shutdown();
        }
        long first = firstNanos.get() == 0 ? end : firstNanos.get();
        double seconds = (end - first) / 1e9;
        Map<String, Object> m = Out.obj("result");
        m.put("count", count.get());
        m.put("seconds", seconds);
        m.put("msgsPerSec", seconds > 0 ? count.get() / seconds : 0.0);
        m.put("startupSeconds", (first - started) / 1e9);
        m.put("timedOut", !finished);
        Out.line(m);
        System.exit(code);
    }
}
