/*
 * The 5.x scenarios on Apache's Java gRPC client (rocketmq-client-java), all in one JVM, each in its own thread
 * with its own clients, topics and groups (names PREFIX + suffix, created beforehand by the test):
 *   Grpc5Scenarios ENDPOINT TLS(true|false) PREFIX [SCENARIO,...]
 * One JSON line per scenario, {"event":"scenario","name":...,<what it saw>} or {"event":"error",...}, then
 * {"event":"done"}. It reports what happened (bodies, delivery attempts, timings); the test asserts.
 *   normal   Normal/_ack_cg: 2 sync + 2 async sends; SimpleConsumer receive (10 s invisible), ack n0 n1, n2 left,
 *            n3's invisible time changed to 1 s; then everything redelivered until n2 and n3 are back, and one
 *            receive more, acked; two refusals (a 5 s invisible time, an ack with an expired handle).
 *   fifo     Fifo/_fifo_cg (orderly group): 3 message groups x 4, received and acked batch by batch, in order.
 *   delay    Delay/_delay_cg: 2 messages due in 3 s; how early/late each was received.
 *   txn      Txn/_txn_cg: commit, rollback, and an orphan the checker commits on the broker's check-back (once:
 *            a repeated or raced check is answered UNKNOWN, as an application that knows its transactions would).
 *   push_dlq Push/_push_cg (retryMaxTimes 1): a PushConsumer answering FAILURE; its attempts; the DLQ's content.
 *   fifo_push FifoPush/_fifo_push_cg (orderly, retryMaxTimes 1): a PushConsumer failing x0 of message group gx:
 *            x0 twice, then forwarded to the DLQ (ForwardMessageToDeadLetterQueue), and only then x1.
 *   filter   Filter/_tag_cg "A||B" and Filter/_sql_cg SQL92 "n BETWEEN 2 AND 5 AND TAGS <> 'A'".
 */
package org.rmqcore.compat.grpc5;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

public final class Grpc5Scenarios {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();
    private static final Duration AWAIT = Duration.ofSeconds(5);
    private static final Duration INVISIBLE = Duration.ofSeconds(10);
    private static final List<String> ALL =
        Arrays.asList("normal", "fifo", "delay", "txn", "push_dlq", "fifo_push", "filter");

    private final ClientConfiguration config;
    private final String p;

    private Grpc5Scenarios(String endpoint, boolean tls, String prefix) {
        this.config = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(tls)
            .setRequestTimeout(Duration.ofSeconds(5)).build();
        this.p = prefix;
    }

    public static void main(String[] args) throws Exception {
        Grpc5Scenarios s = new Grpc5Scenarios(args[0], Boolean.parseBoolean(args[1]), args[2]);
        List<String> names = args.length > 3 ? Arrays.asList(args[3].split(",")) : ALL;
        ExecutorService pool = Executors.newFixedThreadPool(names.size());
        List<Future<?>> futures = new ArrayList<>();
        for (String name : names) {
            futures.add(pool.submit(() -> s.run(name)));
        }
        for (Future<?> f : futures) {
            f.get(120, TimeUnit.SECONDS);
        }
        pool.shutdown();
        Json.line(obj("done"));
        System.exit(0); // the clients' non-daemon threads would keep the JVM up
    }

    private void run(String name) {
        Map<String, Object> out = obj("scenario");
        out.put("name", name);
        long start = System.currentTimeMillis();
        try {
            switch (name) {
                case "normal": normal(out); break;
                case "fifo": fifo(out); break;
                case "delay": delay(out); break;
                case "txn": txn(out); break;
                case "push_dlq": pushDlq(out); break;
                case "fifo_push": fifoPush(out); break;
                case "filter": filter(out); break;
                default: throw new IllegalArgumentException("unknown scenario " + name);
            }
            out.put("seconds", (System.currentTimeMillis() - start) / 1000.0);
            Json.line(out);
        } catch (Throwable e) {
            Map<String, Object> m = obj("error");
            m.put("where", name);
            m.put("error", String.valueOf(e));
            StringWriter sw = new StringWriter();
            e.printStackTrace(new PrintWriter(sw));
            m.put("trace", sw.toString());
            Json.line(m);
        }
    }

    // --- helpers -------------------------------------------------------------------------------------------------
    static Map<String, Object> obj(String event) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        return m;
    }

    private Producer producer(String topic, TransactionChecker checker) throws Exception {
        org.apache.rocketmq.client.apis.producer.ProducerBuilder b = PROVIDER.newProducerBuilder()
            .setClientConfiguration(config).setTopics(topic);
        if (checker != null) {
            b.setTransactionChecker(checker);
        }
        return b.build();
    }

    private SimpleConsumer simple(String group, String topic, FilterExpression filter) throws Exception {
        return PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config).setConsumerGroup(group)
            .setAwaitDuration(AWAIT).setSubscriptionExpressions(Collections.singletonMap(topic, filter)).build();
    }

    /** A SimpleConsumer of a topic that exists only once a message goes there (a DLQ): built again until the
     *  topic has a route or {@code deadlineMs} passed. */
    private SimpleConsumer simpleOnceRouted(String group, String topic, long deadlineMs) throws Exception {
        long end = System.currentTimeMillis() + deadlineMs;
        while (true) {
            try {
                return simple(group, topic, FilterExpression.SUB_ALL);
            } catch (IllegalStateException e) {
                if (System.currentTimeMillis() > end) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    private static Message message(String topic, String body, String tag) {
        MessageBuilder b = PROVIDER.newMessageBuilder().setTopic(topic)
            .setBody(body.getBytes(StandardCharsets.UTF_8)).setKeys("k-" + body);
        if (tag != null) {
            b.setTag(tag);
        }
        return b.build();
    }

    static String body(MessageView v) {
        byte[] b = new byte[v.getBody().remaining()];
        v.getBody().duplicate().get(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    private static Map<String, Object> seen(MessageView v, long since) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("body", body(v));
        m.put("attempt", v.getDeliveryAttempt());
        m.put("tag", v.getTag().orElse(null));
        m.put("keys", new ArrayList<>(v.getKeys()));
        m.put("group", v.getMessageGroup().orElse(null));
        m.put("msgId", v.getMessageId().toString());
        m.put("after_ms", System.currentTimeMillis() - since);
        return m;
    }

    /** Receive (acking each) until {@code want} messages came or {@code deadlineMs} passed; then one more receive
     *  shows nothing else is there (its messages are counted too). */
    private static List<MessageView> drain(SimpleConsumer c, int want, long deadlineMs) throws Exception {
        List<MessageView> got = new ArrayList<>();
        long end = System.currentTimeMillis() + deadlineMs;
        while (got.size() < want && System.currentTimeMillis() < end) {
            for (MessageView v : c.receive(32, INVISIBLE)) {
                got.add(v);
                c.ack(v);
            }
        }
        for (MessageView v : c.receive(32, INVISIBLE)) {
            got.add(v);
            c.ack(v);
        }
        return got;
    }

    interface Call {
        Object call() throws Exception;
    }

    /** "accepted", or the refusal's class and the status code in its message ("response-code=N"). */
    private static String refusal(Call call) {
        try {
            call.call();
            return "accepted";
        } catch (Exception e) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("response-code=(\\d+)")
                .matcher(String.valueOf(e.getMessage()));
            return e.getClass().getSimpleName() + (m.find() ? " " + m.group(1) : " " + e.getMessage());
        }
    }

    private static List<String> bodies(List<MessageView> views) {
        List<String> out = new ArrayList<>();
        for (MessageView v : views) {
            out.add(body(v));
        }
        Collections.sort(out);
        return out;
    }

    // --- scenarios -----------------------------------------------------------------------------------------------
    private void normal(Map<String, Object> out) throws Exception {
        String topic = p + "Normal";
        List<String> ids = new ArrayList<>();
        try (Producer producer = producer(topic, null)) {
            for (int i = 0; i < 2; i++) {
                ids.add(producer.send(message(topic, "n" + i, "TagA")).getMessageId().toString());
            }
            List<CompletableFuture<SendReceipt>> async = new ArrayList<>();
            for (int i = 2; i < 4; i++) {
                async.add(producer.sendAsync(message(topic, "n" + i, "TagA")));
            }
            for (CompletableFuture<SendReceipt> f : async) {
                ids.add(f.get(10, TimeUnit.SECONDS).getMessageId().toString());
            }
        }
        out.put("sent_ids", ids);
        try (SimpleConsumer c = simple(p + "_ack_cg", topic, FilterExpression.SUB_ALL)) {
            out.put("short_invisible", refusal(() -> c.receive(16, Duration.ofSeconds(5))));
            long t0 = System.currentTimeMillis();
            Map<String, MessageView> first = new TreeMap<>();
            List<Map<String, Object>> firstSeen = new ArrayList<>();
            while (first.size() < 4 && System.currentTimeMillis() - t0 < 20000) {
                for (MessageView v : c.receive(16, INVISIBLE)) {
                    first.put(body(v), v);
                    firstSeen.add(seen(v, t0));
                }
            }
            out.put("first", firstSeen);
            long t1 = System.currentTimeMillis();
            c.ack(first.get("n0"));
            c.ack(first.get("n1"));
            c.changeInvisibleDuration(first.get("n3"), Duration.ofSeconds(1));
            // until n2 and n3 are back (Apache's revive takes up to ~16 s for n2), then one receive more: what was
            // acked (invisible as long as n2) must not come back
            List<Map<String, Object>> again = new ArrayList<>();
            java.util.Set<String> back = new java.util.HashSet<>();
            while (!back.containsAll(Arrays.asList("n2", "n3")) && System.currentTimeMillis() - t1 < 25000) {
                for (MessageView v : c.receive(16, INVISIBLE)) {
                    again.add(seen(v, t1));
                    back.add(body(v));
                    c.ack(v);
                }
            }
            for (MessageView v : c.receive(16, INVISIBLE)) {
                again.add(seen(v, t1));
                c.ack(v);
            }
            out.put("redelivered", again);
            out.put("stale_ack", refusal(() -> {
                c.ack(first.get("n2")); // its first receipt handle: expired, the message since redelivered and acked
                return null;
            }));
        }
    }

    private void fifo(Map<String, Object> out) throws Exception {
        String topic = p + "Fifo";
        try (Producer producer = producer(topic, null)) {
            for (int i = 0; i < 4; i++) {
                for (int g = 0; g < 3; g++) {
                    producer.send(PROVIDER.newMessageBuilder().setTopic(topic).setMessageGroup("g" + g)
                        .setBody(("g" + g + "-" + i).getBytes(StandardCharsets.UTF_8)).build());
                }
            }
        }
        try (SimpleConsumer c = simple(p + "_fifo_cg", topic, FilterExpression.SUB_ALL)) {
            List<Map<String, Object>> order = new ArrayList<>();
            long t0 = System.currentTimeMillis();
            while (order.size() < 12 && System.currentTimeMillis() - t0 < 25000) {
                for (MessageView v : c.receive(32, INVISIBLE)) {
                    order.add(seen(v, t0));
                    c.ack(v);
                }
            }
            out.put("received", order);
        }
    }

    private void delay(Map<String, Object> out) throws Exception {
        String topic = p + "Delay";
        long due;
        try (Producer producer = producer(topic, null)) {
            due = System.currentTimeMillis() + 3000;
            for (int i = 0; i < 2; i++) {
                producer.send(PROVIDER.newMessageBuilder().setTopic(topic).setDeliveryTimestamp(due)
                    .setBody(("d" + i).getBytes(StandardCharsets.UTF_8)).build());
            }
        }
        out.put("sent_before_due_ms", due - System.currentTimeMillis());
        try (SimpleConsumer c = simple(p + "_delay_cg", topic, FilterExpression.SUB_ALL)) {
            List<Map<String, Object>> got = new ArrayList<>();
            long t0 = System.currentTimeMillis();
            while (got.size() < 2 && System.currentTimeMillis() - t0 < 15000) {
                for (MessageView v : c.receive(16, INVISIBLE)) {
                    Map<String, Object> m = seen(v, t0);
                    m.put("late_ms", System.currentTimeMillis() - due);
                    m.put("delivery_timestamp_ok", v.getDeliveryTimestamp().orElse(-1L) == due);
                    got.add(m);
                    c.ack(v);
                }
            }
            out.put("received", got);
        }
    }

    private void txn(Map<String, Object> out) throws Exception {
        String topic = p + "Txn";
        List<String> checked = new CopyOnWriteArrayList<>();
        // as an application that knows its transactions: the orphan is committed once; a transaction already
        // resolved (a check that raced its EndTransaction) or the orphan asked again is UNKNOWN (no duplicate)
        TransactionChecker checker = view -> {
            String what = body(view);
            checked.add(what);
            return what.equals("orphan") && !checked.subList(0, checked.size() - 1).contains("orphan")
                ? TransactionResolution.COMMIT : TransactionResolution.UNKNOWN;
        };
        try (Producer producer = producer(topic, checker);
             SimpleConsumer c = simple(p + "_txn_cg", topic, FilterExpression.SUB_ALL)) {
            for (String what : Arrays.asList("commit", "rollback", "orphan")) {
                Transaction tx = producer.beginTransaction();
                producer.send(message(topic, what, null), tx);
                if (what.equals("commit")) {
                    tx.commit();
                } else if (what.equals("rollback")) {
                    tx.rollback();
                }
            }
            long t0 = System.currentTimeMillis();
            List<MessageView> got = drain(c, 2, 30000);
            out.put("received", bodies(got));
            out.put("orphan_after_ms", System.currentTimeMillis() - t0);
            out.put("checked", new ArrayList<>(checked));
        }
    }

    private void pushDlq(Map<String, Object> out) throws Exception {
        String topic = p + "Push";
        String group = p + "_push_cg";
        List<Map<String, Object>> attempts = new CopyOnWriteArrayList<>();
        long t0 = System.currentTimeMillis();
        try (PushConsumer push = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(v -> {
                attempts.add(seen(v, t0));
                return ConsumeResult.FAILURE;
            }).build()) {
            try (Producer producer = producer(topic, null)) {
                producer.send(message(topic, "fail-me", "TagF"));
            }
            try (SimpleConsumer dlq = simpleOnceRouted(p + "_dlq_reader_cg", "%DLQ%" + group, 60000)) {
                List<MessageView> got = drain(dlq, 1, 40000);
                out.put("dlq", bodies(got));
                List<Map<String, Object>> dlqSeen = new ArrayList<>();
                for (MessageView v : got) {
                    dlqSeen.add(seen(v, t0));
                }
                out.put("dlq_seen", dlqSeen);
            }
        }
        out.put("attempts", attempts);
    }

    private void fifoPush(Map<String, Object> out) throws Exception {
        String topic = p + "FifoPush";
        String group = p + "_fifo_push_cg";
        List<Map<String, Object>> seenAll = new CopyOnWriteArrayList<>();
        java.util.concurrent.CountDownLatch x1 = new java.util.concurrent.CountDownLatch(1);
        long t0 = System.currentTimeMillis();
        try (PushConsumer push = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(v -> {
                seenAll.add(seen(v, t0));
                if (body(v).equals("x0")) {
                    return ConsumeResult.FAILURE;
                }
                x1.countDown();
                return ConsumeResult.SUCCESS;
            }).build()) {
            try (Producer producer = producer(topic, null)) {
                for (String b : Arrays.asList("x0", "x1")) {
                    producer.send(PROVIDER.newMessageBuilder().setTopic(topic).setMessageGroup("gx")
                        .setBody(b.getBytes(StandardCharsets.UTF_8)).build());
                }
            }
            out.put("x1_consumed", x1.await(40, TimeUnit.SECONDS));
            try (SimpleConsumer dlq = simpleOnceRouted(p + "_fifo_dlq_reader_cg", "%DLQ%" + group, 20000)) {
                out.put("dlq", bodies(drain(dlq, 1, 20000)));
            }
        }
        out.put("consumed", seenAll);
    }

    private void filter(Map<String, Object> out) throws Exception {
        String topic = p + "Filter";
        try (Producer producer = producer(topic, null)) {
            String[] tags = {"A", "B", "C"};
            for (int n = 1; n <= 6; n++) {
                String tag = tags[(n - 1) % 3];
                producer.send(PROVIDER.newMessageBuilder().setTopic(topic).setTag(tag).addProperty("n", String.valueOf(n))
                    .setBody((tag + n).getBytes(StandardCharsets.UTF_8)).build());
            }
        }
        try (SimpleConsumer tag = simple(p + "_tag_cg", topic, new FilterExpression("A||B", FilterExpressionType.TAG));
             SimpleConsumer sql = simple(p + "_sql_cg", topic,
                 new FilterExpression("n BETWEEN 2 AND 5 AND TAGS <> 'A'", FilterExpressionType.SQL92))) {
            out.put("tag", bodies(drain(tag, 4, 15000)));
            out.put("sql", bodies(drain(sql, 3, 15000)));
        }
    }
}
