/*
 * BenchProduce: send throughput of DefaultMQProducer, for benches/bench_client.py.
 *   --namesrv host:port --topic T [--count 20000] [--size 1024] [--threads 4] [--mode sync|async]
 *   [--window 128] [--timeout-ms 10000] [--warmup 0] [--batch 32]
 * sync: --threads threads each send count/threads messages with send(msg). async: one thread issues send(msg,
 * callback) keeping at most --window in flight (a semaphore). batch: --threads threads each send count/threads
 * messages as send(Collection) of --batch messages (one MessageBatch request each; the last one may be shorter). A warm-up send (route, connection) is not timed, nor
 * are --warmup more sends made the same way first (a long-running producer's JIT-compiled send path; a cold JVM's
 * first ~50,000 sends measure its compiler more than the broker).
 * Prints one line {"event":"result","mode":m,"count":n,"failed":f,"seconds":s,"msgsPerSec":r}.
 * Threads: the sender threads share the producer (thread-safe in RocketMQ) and atomic counters.
 */
package org.rmqcore.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

public final class BenchProduce {
    private BenchProduce() {
    }

    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv);
        final String topic = a.str("topic");
        final int count = a.integer("count", 20000);
        final int threads = a.integer("threads", 4);
        final String mode = a.str("mode", "sync");
        final int warmup = a.integer("warmup", 0);
        final int window = a.integer("window", 128);
        final int batch = a.integer("batch", 32);
        final byte[] body = new byte[a.integer("size", 1024)];
        new Random(7).nextBytes(body);
        final AtomicLong ok = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        DefaultMQProducer producer = new DefaultMQProducer(a.str("group", "bench_java_producer"));
        producer.setNamesrvAddr(a.str("namesrv"));
        producer.setInstanceName("bench-produce-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(a.integer("timeout-ms", 10000));
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        int code = 0;
        double seconds = 0;
        try {
            producer.start();
            producer.send(new Message(topic, "TagA", body));
            if (warmup > 0) { // the same sends, untimed and uncounted: the JIT compiles the client's send path
                run(producer, topic, body, mode, warmup, threads, window, batch, new AtomicLong(), new AtomicLong());
            }
            long t0 = System.nanoTime();
            run(producer, topic, body, mode, count, threads, window, batch, ok, failed);
            seconds = (System.nanoTime() - t0) / 1e9;
        } catch (Throwable e) {
            Out.error("send", e);
            code = 1;
        } finally {
            producer.shutdown();
        }
        Map<String, Object> m = Out.obj("result");
        m.put("mode", mode);
        if ("batch".equals(mode)) {
            m.put("batch", batch);
        }
        m.put("warmup", warmup);
        m.put("count", ok.get());
        m.put("failed", failed.get());
        m.put("seconds", seconds);
        m.put("msgsPerSec", seconds > 0 ? ok.get() / seconds : 0.0);
        Out.line(m);
        System.exit(code);
    }

    /**
     * {@code count} messages: sync from {@code threads} threads, async keeping {@code window} in flight, or sync
     * batches of {@code batch} from {@code threads} threads.
     */
    private static void run(DefaultMQProducer producer, String topic, byte[] body, String mode, int count,
            int threads, int window, int batch, AtomicLong ok, AtomicLong failed) throws InterruptedException {
        if ("async".equals(mode)) {
            final Semaphore inFlight = new Semaphore(window);
            final CountDownLatch all = new CountDownLatch(count);
            for (int i = 0; i < count; i++) {
                inFlight.acquire();
                try {
                    producer.send(new Message(topic, "TagA", body), new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            (r.getSendStatus() == SendStatus.SEND_OK ? ok : failed).incrementAndGet();
                            inFlight.release();
                            all.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            failed.incrementAndGet();
                            inFlight.release();
                            all.countDown();
                        }
                    });
                } catch (Exception e) { // not sent: the callback will not run
                    failed.incrementAndGet();
                    inFlight.release();
                    all.countDown();
                }
            }
            all.await();
            return;
        }
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int n = count / threads + (t < count % threads ? 1 : 0);
            Thread w = new Thread(() -> {
                if ("batch".equals(mode)) {
                    for (int i = 0; i < n; i += batch) {
                        List<Message> msgs = new ArrayList<>();
                        for (int j = i; j < Math.min(n, i + batch); j++) {
                            msgs.add(new Message(topic, "TagA", body));
                        }
                        try {
                            SendResult r = producer.send(msgs);
                            (r.getSendStatus() == SendStatus.SEND_OK ? ok : failed).addAndGet(msgs.size());
                        } catch (Exception e) {
                            failed.addAndGet(msgs.size());
                        }
                    }
                    return;
                }
                for (int i = 0; i < n; i++) {
                    try {
                        SendResult r = producer.send(new Message(topic, "TagA", body));
                        (r.getSendStatus() == SendStatus.SEND_OK ? ok : failed).incrementAndGet();
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                }
            }, "bench-sender-" + t);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
    }
}
