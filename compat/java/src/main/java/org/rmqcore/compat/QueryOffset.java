/*
 * QueryOffset: what the broker holds for a consumer group on a topic, read through the Java client's
 * DefaultMQPullConsumer: per queue the committed offset (QUERY_CONSUMER_OFFSET, fromStore=true), the min and max
 * offsets (GET_MIN_OFFSET, GET_MAX_OFFSET). It commits nothing.
 *   --namesrv host:port --group G --topic T
 * Lines: {"event":"offset","brokerName","queueId","consumerOffset","minOffset","maxOffset"} per queue, then
 * {"event":"done","queues":n}. Single-threaded.
 */
package org.rmqcore.compat;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.common.message.MessageQueue;

public final class QueryOffset {
    private QueryOffset() {
    }

    @SuppressWarnings("deprecation")
    public static void main(String[] argv) {
        Args a = new Args(argv);
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(a.str("group"));
        consumer.setNamesrvAddr(a.str("namesrv"));
        consumer.setInstanceName(a.str("instance", "query-" + ProcessHandle.current().pid()));
        int code = 0;
        int n = 0;
        try {
            consumer.start();
            List<MessageQueue> mqs = new ArrayList<>(consumer.fetchSubscribeMessageQueues(a.str("topic")));
            mqs.sort(Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId));
            for (MessageQueue mq : mqs) {
                Map<String, Object> m = Out.obj("offset");
                m.put("brokerName", mq.getBrokerName());
                m.put("queueId", mq.getQueueId());
                m.put("consumerOffset", consumer.fetchConsumeOffset(mq, true));
                m.put("minOffset", consumer.minOffset(mq));
                m.put("maxOffset", consumer.maxOffset(mq));
                Out.line(m);
                n++;
            }
        } catch (Throwable e) {
            Out.error("query", e);
            code = 1;
        } finally {
            consumer.shutdown();
        }
        Map<String, Object> done = Out.obj("done");
        done.put("queues", n);
        Out.line(done);
        System.exit(code);
    }
}
