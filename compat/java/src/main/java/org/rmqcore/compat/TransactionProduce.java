/*
 * TransactionProduce: TransactionMQProducer (4.9 TransactionListener API), one JSON line per send and per check.
 *   --namesrv host:port --topic T [--count 4] [--group compat_tx_producer]
 *   [--plan COMMIT_MESSAGE,ROLLBACK_MESSAGE,UNKNOW:COMMIT_MESSAGE,UNKNOW:ROLLBACK_MESSAGE] [--wait-checks-ms 30000]
 * Message i: keys key-i, body body-i, tags TagTx; its plan entry plan[i % len] is "EXEC[:CHECK]": what
 * executeLocalTransaction returns, and what checkLocalTransaction returns (default UNKNOW).
 * Lines: {"event":"send",...,"localTransactionState"} per message, {"event":"check","keys","topic","state",
 * "thread"} per check-back; after the sends the program waits (up to wait-checks-ms) until every message whose
 * execute said UNKNOW has had a check answered COMMIT/ROLLBACK, then {"event":"done","sent":n}. An exception prints
 * {"event":"error"} and exits 1.
 */
package org.rmqcore.compat;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public final class TransactionProduce {
    private TransactionProduce() {
    }

    public static void main(String[] argv) throws Exception {
        Args a = new Args(argv);
        int count = a.integer("count", 4);
        String[] plan = a.str("plan", "COMMIT_MESSAGE,ROLLBACK_MESSAGE,UNKNOW:COMMIT_MESSAGE,UNKNOW:ROLLBACK_MESSAGE")
            .split(",");
        Set<String> pending = ConcurrentHashMap.newKeySet();
        TransactionMQProducer producer = new TransactionMQProducer(a.str("group", "compat_tx_producer"));
        producer.setNamesrvAddr(a.str("namesrv"));
        producer.setInstanceName(a.str("instance", "txproduce-" + ProcessHandle.current().pid()));
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.valueOf(((String) arg).split(":")[0]);
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int i = Integer.parseInt(msg.getKeys().substring("key-".length()));
                String[] entry = plan[i % plan.length].split(":");
                LocalTransactionState state = LocalTransactionState.valueOf(entry.length > 1 ? entry[1] : "UNKNOW");
                Map<String, Object> m = Out.obj("check");
                m.put("keys", msg.getKeys());
                m.put("topic", msg.getTopic());
                m.put("state", state.name());
                m.put("thread", Thread.currentThread().getName());
                Out.line(m);
                if (state != LocalTransactionState.UNKNOW) {
                    pending.remove(msg.getKeys());
                }
                return state;
            }
        });
        int code = 0;
        int sent = 0;
        try {
            producer.start();
            for (int i = 0; i < count; i++) {
                String entry = plan[i % plan.length];
                Message msg = new Message(a.str("topic"), "TagTx", "key-" + i,
                    ("body-" + i).getBytes(StandardCharsets.UTF_8));
                if (entry.startsWith("UNKNOW")) {
                    pending.add("key-" + i);
                }
                TransactionSendResult r = producer.sendMessageInTransaction(msg, entry);
                Map<String, Object> m = Out.obj("send");
                m.put("i", i);
                m.put("status", r.getSendStatus().name());
                m.put("localTransactionState", r.getLocalTransactionState().name());
                m.put("msgId", r.getMsgId());
                m.put("offsetMsgId", r.getOffsetMsgId());
                m.put("queueId", r.getMessageQueue().getQueueId());
                m.put("queueOffset", r.getQueueOffset());
                m.put("keys", msg.getKeys());
                Out.line(m);
                sent++;
            }
            long deadline = System.currentTimeMillis() + a.integer("wait-checks-ms", 30000);
            while (!pending.isEmpty() && System.currentTimeMillis() < deadline) {
                Thread.sleep(50);
            }
            Thread.sleep(300); // the last END_TRANSACTION (oneway) leaves before the shutdown
        } catch (Throwable e) {
            Out.error("send", e);
            code = 1;
        } finally {
            producer.shutdown();
        }
        Map<String, Object> done = Out.obj("done");
        done.put("sent", sent);
        done.put("unresolved", pending.size());
        Out.line(done);
        System.exit(code);
    }
}
