/*
 * BenchLatency: end-to-end latency under a steady send rate, for benches/bench_client.py. One JVM runs a
 * DefaultMQPushConsumer (CONSUME_FROM_LAST_OFFSET, trivial listener) and a DefaultMQProducer sending --rate msg/s
 * for --seconds; each body starts with System.nanoTime() at send (8 bytes, big-endian), and the listener records
 * nanoTime() - that value (same JVM, same clock).
 *   --namesrv host:port --group G --topic T [--rate 1000] [--seconds 5] [--size 1024] [--warmup-ms 3000]
 * The consumer starts first and the producer waits --warmup-ms (rebalance, first pulls parked) before sending.
 * Prints one line {"event":"result","count":n,"sent":s,"p50Ms":..,"p99Ms":..,"maxMs":..}.
 * Threads: consume threads append to a synchronized list; the main thread paces the sends.
 */
package org.rmqcore.compat;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public final class BenchLatency {
    private BenchLatency() {
    }

    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv);
        final String topic = a.str("topic");
        final int rate = a.integer("rate", 1000);
        final int seconds = a.integer("seconds", 5);
        final int size = Math.max(8, a.integer("size", 1024));
        final List<Long> lat = Collections.synchronizedList(new ArrayList<>());
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(a.str("group"));
        consumer.setNamesrvAddr(a.str("namesrv"));
        consumer.setInstanceName("bench-latency-c-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) {
                lat.add(now - ByteBuffer.wrap(m.getBody()).getLong());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        DefaultMQProducer producer = new DefaultMQProducer(a.str("producer-group", "bench_java_latency_producer"));
        producer.setNamesrvAddr(a.str("namesrv"));
        producer.setInstanceName("bench-latency-p-" + ProcessHandle.current().pid());
        int code = 0;
        int sent = 0;
        try {
            producer.start();
            producer.send(new Message(topic, "Warm", new byte[size]));  // route and connection
            consumer.start();
            Thread.sleep(a.lng("warmup-ms", 3000));
            lat.clear();
            long interval = 1_000_000_000L / rate;
            long t0 = System.nanoTime();
            int total = rate * seconds;
            for (int i = 0; i < total; i++) {
                long due = t0 + i * interval;
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    LockSupport.parkNanos(wait);
                }
                ByteBuffer b = ByteBuffer.allocate(size);
                b.putLong(System.nanoTime());
                producer.send(new Message(topic, "TagA", b.array()));
                sent++;
            }
            long deadline = System.currentTimeMillis() + 10000;
            while (lat.size() < sent && System.currentTimeMillis() < deadline) {
                Thread.sleep(10);
            }
        } catch (Throwable e) {
            Out.error("latency", e);
            code = 1;
        } finally {
            consumer.shutdown();
            producer.shutdown();
        }
        List<Long> sorted;
        synchronized (lat) {
            sorted = new ArrayList<>(lat);
        }
        Collections.sort(sorted);
        Map<String, Object> m = Out.obj("result");
        m.put("count", sorted.size());
        m.put("sent", sent);
        m.put("p50Ms", pct(sorted, 50));
        m.put("p99Ms", pct(sorted, 99));
        m.put("maxMs", sorted.isEmpty() ? 0.0 : sorted.get(sorted.size() - 1) / 1e6);
        Out.line(m);
        System.exit(code);
    }

    private static double pct(List<Long> sorted, int p) {
        if (sorted.isEmpty()) {
            return 0.0;
        }
        int i = (int) Math.min(sorted.size() - 1, Math.ceil(p / 100.0 * sorted.size()) - 1);
        return sorted.get(Math.max(0, i)) / 1e6;
    }
}
