/*
 * JSON lines on stdout: one object per line, keys in insertion order, flushed per line. The only writer of stdout
 * in the harness (the RocketMQ client logs to files). Thread-safe: line() is synchronized so lines never interleave.
 */
package org.rmqcore.compat;

import com.alibaba.fastjson.JSON;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.common.message.MessageExt;

final class Out {
    private static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true);

    private Out() {
    }

    static Map<String, Object> obj(String event) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        return m;
    }

    static synchronized void line(Map<String, Object> m) {
        String s = JSON.toJSONString(m);
        byte[] b = (s + "\n").getBytes(StandardCharsets.UTF_8);
        OUT.write(b, 0, b.length);
        OUT.flush();
    }

    static void error(String where, Throwable e) {
        Map<String, Object> m = obj("error");
        m.put("where", where);
        m.put("error", String.valueOf(e));
        StringWriter sw = new StringWriter();
        e.printStackTrace(new PrintWriter(sw));
        m.put("trace", sw.toString());
        line(m);
    }

    static Map<String, Object> message(String event, MessageExt msg) {
        Map<String, Object> m = obj(event);
        m.put("msgId", msg.getMsgId());
        m.put("topic", msg.getTopic());
        m.put("tags", msg.getTags());
        m.put("keys", msg.getKeys());
        m.put("body", msg.getBody() == null ? null : new String(msg.getBody(), StandardCharsets.UTF_8));
        m.put("queueId", msg.getQueueId());
        m.put("queueOffset", msg.getQueueOffset());
        m.put("commitLogOffset", msg.getCommitLogOffset());
        m.put("reconsumeTimes", msg.getReconsumeTimes());
        m.put("storeHost", String.valueOf(msg.getStoreHost()));
        m.put("bornHost", String.valueOf(msg.getBornHost()));
        m.put("bornTimestamp", msg.getBornTimestamp());
        m.put("storeTimestamp", msg.getStoreTimestamp());
        m.put("sysFlag", msg.getSysFlag());
        m.put("properties", new TreeMap<>(msg.getProperties()));
        m.put("printedMs", System.currentTimeMillis());  // when this line was made: not before the client had it
        return m;
    }
}
