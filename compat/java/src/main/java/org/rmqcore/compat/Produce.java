/*
 * Produce: DefaultMQProducer, synchronous sends, one JSON line per SendResult.
 *   --namesrv host:port --topic T [--count 10] [--start 0] [--tags TagA,TagB,TagC] [--group compat_producer]
 *   [--key-prefix key-] [--body-prefix body-] [--property compatProp] [--timeout-ms 5000]
 * Message i (start <= i < start+count): tags = tags[i % len], keys = key-prefix+i, body = body-prefix+i,
 * user property <property> = "v-"+i. No client-side retries, so a broker refusal is reported, not hidden.
 * Lines: {"event":"send",...} per message, then {"event":"done","sent":n}; an exception prints {"event":"error"} and
 * exits 1. Single-threaded.
 * --deliver-after-ms N makes each a RocketMQ 5 timer message due N ms after it is built (Message.setDeliverTimeMs, called
 * reflectively so the harness still compiles against 4.9.7, whose Message lacks it); --delay-sec N uses
 * setDelayTimeSec. The send line then carries "deliverTimeMs" (epoch ms, or the build time + N s).
 */
package org.rmqcore.compat;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

public final class Produce {
    private Produce() {
    }

    public static void main(String[] argv) {
        Args a = new Args(argv);
        String[] tags = a.str("tags", "TagA,TagB,TagC").split(",");
        int start = a.integer("start", 0);
        int count = a.integer("count", 10);
        String property = a.str("property", "compatProp");
        DefaultMQProducer producer = new DefaultMQProducer(a.str("group", "compat_producer"), a.rpcHook());
        producer.setNamesrvAddr(a.str("namesrv"));
        producer.setInstanceName(a.str("instance", "produce-" + ProcessHandle.current().pid()));
        producer.setSendMsgTimeout(a.integer("timeout-ms", 5000));
        producer.setRetryTimesWhenSendFailed(0);
        int code = 0;
        int sent = 0;
        try {
            producer.start();
            for (int i = start; i < start + count; i++) {
                String tag = tags[i % tags.length];
                Message msg = new Message(a.str("topic"), tag, a.str("key-prefix", "key-") + i,
                    (a.str("body-prefix", "body-") + i).getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty(property, "v-" + i);
                long deliverAfter = a.integer("deliver-after-ms", 0);
                long delaySec = a.integer("delay-sec", 0);
                long deliverTimeMs = 0;
                if (deliverAfter > 0) {
                    deliverTimeMs = System.currentTimeMillis() + deliverAfter;
                    Message.class.getMethod("setDeliverTimeMs", long.class).invoke(msg, deliverTimeMs);
                } else if (delaySec > 0) {
                    deliverTimeMs = System.currentTimeMillis() + delaySec * 1000;
                    Message.class.getMethod("setDelayTimeSec", long.class).invoke(msg, delaySec);
                }
                SendResult r = producer.send(msg);
                Map<String, Object> m = Out.obj("send");
                m.put("i", i);
                m.put("status", r.getSendStatus().name());
                m.put("msgId", r.getMsgId());
                m.put("offsetMsgId", r.getOffsetMsgId());
                m.put("topic", r.getMessageQueue().getTopic());
                m.put("brokerName", r.getMessageQueue().getBrokerName());
                m.put("queueId", r.getMessageQueue().getQueueId());
                m.put("queueOffset", r.getQueueOffset());
                m.put("regionId", r.getRegionId());
                m.put("traceOn", r.isTraceOn());
                m.put("tags", tag);
                m.put("keys", msg.getKeys());
                if (deliverTimeMs > 0) {
                    m.put("deliverTimeMs", deliverTimeMs);
                    m.put("properties", new java.util.TreeMap<>(msg.getProperties()));
                }
                Out.line(m);
                sent++;
            }
        } catch (Throwable e) {
            Out.error("send", e);
            code = 1;
        } finally {
            producer.shutdown();
        }
        Map<String, Object> done = Out.obj("done");
        done.put("sent", sent);
        Out.line(done);
        System.exit(code);
    }
}
