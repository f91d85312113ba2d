// sdk5-go: RocketMQ's 5.x Go SDK (github.com/apache/rocketmq-clients/golang/v5) against one gRPC endpoint, every
// scenario of tests/interop/test_grpc_go_node5.py in one process (one client start, one build): Producer normal,
// FIFO (message groups) and delay sends; SimpleConsumer receive → ack → no redelivery, no ack → redelivered with
// delivery attempt 2, change invisible duration (back after ~1 s, attempt 2), FIFO order per group, the delay's arrival. The Go SDK has no
// PushConsumer. Usage: sdk5-go ENDPOINT CONFIG_JSON; prints one line "RESULT {json}" (facts, no verdicts: the
// test judges them). The SDK always dials TLS (self-signed certificates accepted).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

type config struct {
	Topic       string `json:"topic"`
	FifoTopic   string `json:"fifo_topic"`
	DelayTopic  string `json:"delay_topic"`
	Group       string `json:"group"`
	FifoGroup   string `json:"fifo_group"`
	DelayGroup  string `json:"delay_group"`
	Invisible   int    `json:"invisible_s"`
	DelayMillis int64  `json:"delay_ms"`
	FifoGroups  int    `json:"fifo_groups"`
	FifoEach    int    `json:"fifo_each"`
}

type received struct {
	ID       string   `json:"id"`
	Body     string   `json:"body"`
	Tag      string   `json:"tag"`
	Keys     []string `json:"keys"`
	Group    string   `json:"group"`
	Attempt  int32    `json:"attempt"`
	AtMillis int64    `json:"at_ms"`
}

var errs []string // the first receive errors, for the test's failure message

func nowMs() int64 { return time.Now().UnixMilli() }

func view(m *rmq.MessageView) received {
	r := received{ID: m.GetMessageId(), Body: string(m.GetBody()), Keys: m.GetKeys(), Attempt: m.GetDeliveryAttempt(), AtMillis: nowMs()}
	if t := m.GetTag(); t != nil {
		r.Tag = *t
	}
	if g := m.GetMessageGroup(); g != nil {
		r.Group = *g
	}
	return r
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func consumer(endpoint, group, topic string, await time.Duration) rmq.SimpleConsumer {
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}},
		rmq.WithAwaitDuration(await),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	must(err, "new simple consumer "+group)
	must(c.Start(), "start simple consumer "+group)
	return c
}

// receive long-polls until want messages came or the deadline passed; ack decides per message whether to ack it.
func receive(c rmq.SimpleConsumer, want int, invisible time.Duration, deadline time.Time, ack func(*rmq.MessageView) bool) ([]received, []*rmq.MessageView) {
	var out []received
	var views []*rmq.MessageView
	for len(out) < want && time.Now().Before(deadline) {
		mvs, err := c.Receive(context.TODO(), 32, invisible)
		if err != nil { // MESSAGE_NOT_FOUND after an empty long poll is an error in this SDK
			if len(errs) < 20 {
				errs = append(errs, err.Error())
			}
			continue
		}
		for _, mv := range mvs {
			out = append(out, view(mv))
			views = append(views, mv)
			if ack(mv) {
				must(c.Ack(context.TODO(), mv), "ack")
			}
		}
	}
	return out, views
}

func main() {
	endpoint := os.Args[1]
	var cfg config
	must(json.Unmarshal([]byte(os.Args[2]), &cfg), "config")
	invisible := time.Duration(cfg.Invisible) * time.Second
	// a receive's long poll: Apache's proxy refuses a deadline under its 5 s minimum (grpcClientConsumerMin-
	// LongPollingTimeoutMillis) and this SDK's deadline is the await duration + its 3 s request timeout
	await := 5 * time.Second
	res := map[string]any{}
	t0 := time.Now()

	producer, err := rmq.NewProducer(&rmq.Config{Endpoint: endpoint, Credentials: &credentials.SessionCredentials{}},
		rmq.WithTopics(cfg.Topic, cfg.FifoTopic, cfg.DelayTopic))
	must(err, "new producer")
	must(producer.Start(), "start producer")
	res["producer_start_ms"] = time.Since(t0).Milliseconds()

	send := func(m *rmq.Message) string {
		r, err := producer.Send(context.TODO(), m)
		must(err, "send to "+m.Topic)
		return r[0].MessageID
	}
	// normal: three messages with tag and keys
	var normal []string
	for i := 0; i < 3; i++ {
		m := &rmq.Message{Topic: cfg.Topic, Body: []byte(fmt.Sprintf("normal-%d", i))}
		m.SetTag("tagA")
		m.SetKeys(fmt.Sprintf("key-%d", i))
		normal = append(normal, send(m))
	}
	res["normal_sent"] = normal
	// FIFO: fifo_each messages in each of fifo_groups message groups, interleaved
	var fifo []string
	for i := 0; i < cfg.FifoEach; i++ {
		for g := 0; g < cfg.FifoGroups; g++ {
			m := &rmq.Message{Topic: cfg.FifoTopic, Body: []byte(fmt.Sprintf("g%d-%d", g, i))}
			m.SetMessageGroup(fmt.Sprintf("g%d", g))
			fifo = append(fifo, send(m))
		}
	}
	res["fifo_sent"] = fifo

	// SimpleConsumer: ack the first, leave the second, change the third's invisible duration to 1 s
	sc := consumer(endpoint, cfg.Group, cfg.Topic, await)
	first, views := receive(sc, 3, invisible, time.Now().Add(20*time.Second), func(*rmq.MessageView) bool { return false })
	res["first"] = first
	if len(views) >= 3 {
		must(sc.Ack(context.TODO(), views[0]), "ack")
		res["acked"] = first[0].ID
		res["unacked"] = first[1].ID
		must(sc.ChangeInvisibleDuration(views[2], time.Second), "change invisible duration")
		res["changed"] = first[2].ID
		res["changed_at_ms"] = nowMs()
		// the changed one comes back first, with delivery attempt 2
		res["changed_back"], _ = receive(sc, 1, invisible, time.Now().Add(invisible-time.Second), func(*rmq.MessageView) bool { return true })
	}

	// FIFO consumption while the unacked message is invisible
	fc := consumer(endpoint, cfg.FifoGroup, cfg.FifoTopic, await)
	res["fifo_received"], _ = receive(fc, cfg.FifoEach*cfg.FifoGroups, invisible, time.Now().Add(20*time.Second), func(*rmq.MessageView) bool { return true })
	fc.GracefulStop()

	// delay: consumer waiting before the message is sent
	dc := consumer(endpoint, cfg.DelayGroup, cfg.DelayTopic, await)
	dm := &rmq.Message{Topic: cfg.DelayTopic, Body: []byte("delayed")}
	due := time.Now().Add(time.Duration(cfg.DelayMillis) * time.Millisecond)
	dm.SetDelayTimestamp(due)
	res["delay_sent"] = send(dm)
	res["delay_due_ms"] = due.UnixMilli()
	res["delay_received"], _ = receive(dc, 1, invisible, time.Now().Add(time.Duration(cfg.DelayMillis)*time.Millisecond+15*time.Second), func(*rmq.MessageView) bool { return true })
	dc.GracefulStop()

	// the unacked one after its invisible time; then nothing more
	res["redelivery_phase_ms"] = nowMs()
	again, _ := receive(sc, 1, invisible, time.Now().Add(invisible+15*time.Second), func(*rmq.MessageView) bool { return true })
	res["redelivered"] = again
	after, _ := receive(sc, 1, invisible, time.Now().Add(await), func(*rmq.MessageView) bool { return true })
	res["after"] = after
	sc.GracefulStop()
	producer.GracefulStop()
	res["total_ms"] = time.Since(t0).Milliseconds()
	res["receive_errors"] = errs
	out, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", out)
}
