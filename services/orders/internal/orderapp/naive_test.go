package orderapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// traced returns ctx in the caller's trace of traceparent, as the API's
// server span puts every call in it.
func traced(ctx context.Context) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// With the broker up, both naive modes do publish: the event the outbox
// relay would send, with the same encoding. (This is the check the hole
// tests below make fail.)
func TestNaiveModesPublishToKafka(t *testing.T) {
	t.Parallel()
	for _, mode := range []orderapp.Mode{orderapp.ModeNaive, orderapp.ModeNaivePublishFirst} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			topic := testenv.NewTopic(t, 1)
			b := setup(t, mode, topic, testenv.Brokers(), orderapp.Hooks{})
			out, err := b.app.PlacePayment(traced(testenv.Context(t)), payment, orderapp.Options{})
			if err != nil {
				t.Fatal(err)
			}
			id := out.Value.ID.String()
			m := consumeOne(t, testenv.Brokers(), topic)
			h := headers(m)
			if string(m.Key) != id || h[outbox.HeaderType] != "OrderCaptured" || h[outbox.HeaderSequence] != "1" ||
				h[outbox.HeaderSource] != "/paylab/orders" || h[outbox.HeaderSubject] != id || h[outbox.HeaderID] == "" ||
				h["traceparent"] != traceparent {
				t.Errorf("message key %s headers %v", m.Key, h)
			}
			var p order.Captured
			if err := json.Unmarshal(m.Value, &p); err != nil {
				t.Fatal(err)
			}
			if p.OrderID != id || p.Amount != 1999 || p.Sequence != 1 || p.SchemaVersion != 1 || p.Currency != "EUR" {
				t.Errorf("payload = %+v", p)
			}
			if n := b.count("SELECT count(*) FROM outbox"); n != 0 {
				t.Errorf("naive mode wrote %d outbox rows", n)
			}
			if got := naiveCount(t, b, "published"); got != 1 {
				t.Errorf("published counter = %v, want 1", got)
			}
		})
	}
}

// Kafka unreachable, naive mode: the capture commits, the caller is told it
// succeeded, and the event is gone — no outbox row, nothing on the wire.
// The dual-write hole, asserted.
func TestNaiveKafkaUnreachableLosesTheEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, orderapp.ModeNaive, "order-events", []string{testenv.ClosedAddr(t)}, orderapp.Hooks{})
	out, err := b.app.PlacePayment(testenv.Context(t), payment, orderapp.Options{})
	if err != nil {
		t.Fatalf("naive mode reports the failed publish: %v", err)
	}
	id := out.Value.ID.String()
	if s := b.status(id); s != "captured" {
		t.Fatalf("order status = %s, want captured (committed)", s)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 0 {
		t.Fatalf("outbox rows = %d, want 0", n)
	}
	if got := naiveCount(t, b, "failed"); got != 1 {
		t.Fatalf("failed publishes = %v, want 1", got)
	}
}

// The same outage in outbox mode: the capture commits WITH its event, which
// waits in the outbox for the relay. Kafka is not touched at all.
func TestOutboxKafkaUnreachableKeepsTheEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, orderapp.ModeOutbox, "order-events", []string{testenv.ClosedAddr(t)}, orderapp.Hooks{})
	out, err := b.app.PlacePayment(testenv.Context(t), payment, orderapp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.count("SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND dispatched_at IS NULL", out.Value.ID.String()); n != 1 {
		t.Fatalf("pending outbox rows = %d, want 1", n)
	}
}

// Kafka down while the capture happens, then back: in naive mode the event
// never arrives — it is not late, it is lost.
func TestNaiveEventLostForGoodWhenKafkaReturns(t *testing.T) {
	t.Parallel()
	k := testenv.StartKafka(t)
	topic := privateTopic(t, k.Brokers())
	b := setup(t, orderapp.ModeNaive, topic, k.Brokers(), orderapp.Hooks{})

	// The check can pass: with the broker up, the event arrives.
	if _, err := b.app.PlacePayment(testenv.Context(t), payment, orderapp.Options{}); err != nil {
		t.Fatal(err)
	}
	if n := published(t, k.Brokers(), topic); n != 1 {
		t.Fatalf("published = %d, want 1", n)
	}

	k.Stop(t)
	out, err := b.app.PlacePayment(testenv.Context(t), payment, orderapp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k.Start(t)
	if s := b.status(out.Value.ID.String()); s != "captured" {
		t.Fatalf("order status = %s, want captured", s)
	}
	if n := published(t, k.Brokers(), topic); n != 1 {
		t.Fatalf("published = %d after Kafka returned, want still 1: the second event is lost", n)
	}
	if n := b.count("SELECT count(*) FROM orders WHERE status = 'captured'"); n != 2 {
		t.Fatalf("captured orders = %d, want 2", n)
	}
}

// A failure between the commit and the publish (a crash, in real life)
// loses the event although Kafka is fine.
func TestNaiveFailureAfterCommitBeforePublishLosesTheEvent(t *testing.T) {
	t.Parallel()
	topic := testenv.NewTopic(t, 1)
	b := setup(t, orderapp.ModeNaive, topic, testenv.Brokers(), orderapp.Hooks{
		AfterCommitBeforePublish: func(context.Context, orderapp.Op) error { return errors.New("crash") },
	})
	out, err := b.app.PlacePayment(testenv.Context(t), payment, orderapp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := b.status(out.Value.ID.String()); s != "captured" {
		t.Fatalf("order status = %s, want captured", s)
	}
	if n := published(t, testenv.Brokers(), topic); n != 0 {
		t.Fatalf("published = %d, want 0 (the event is lost)", n)
	}
	if got := naiveCount(t, b, "skipped"); got != 1 {
		t.Fatalf("skipped publishes = %v, want 1", got)
	}
}

// Publish first, then a failure before the commit: the event is on the wire
// for an order that does not exist — a phantom.
func TestNaivePublishFirstFailureBeforeCommitLeavesAPhantom(t *testing.T) {
	t.Parallel()
	topic := testenv.NewTopic(t, 1)
	b := setup(t, orderapp.ModeNaivePublishFirst, topic, testenv.Brokers(), orderapp.Hooks{
		AfterPublishBeforeCommit: func(context.Context, orderapp.Op) error { return errors.New("crash") },
	})
	_, err := b.app.PlacePayment(testenv.Context(t), payment, orderapp.Options{})
	var stepErr *orderapp.StepError
	if !errors.As(err, &stepErr) || stepErr.Step != orderapp.StepAfterPublishBeforeCommit {
		t.Fatalf("err = %v, want the injected failure", err)
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("orders = %d, want 0 (rolled back)", n)
	}
	m := consumeOne(t, testenv.Brokers(), topic)
	if !strings.Contains(string(m.Value), `"order_id":"`+string(m.Key)+`"`) {
		t.Fatalf("message %s", m.Value)
	}
	t.Logf("phantom OrderCaptured for order %s, which does not exist", m.Key)
}

// Publish first with Kafka unreachable: nothing is committed, the caller
// gets ErrPublish.
func TestNaivePublishFirstKafkaUnreachableCommitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, orderapp.ModeNaivePublishFirst, "order-events", []string{testenv.ClosedAddr(t)}, orderapp.Hooks{})
	_, err := b.app.PlacePayment(testenv.Context(t), payment, orderapp.Options{})
	if !errors.Is(err, order.ErrPublish) {
		t.Fatalf("err = %v, want ErrPublish", err)
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("orders = %d, want 0", n)
	}
}

func naiveCount(t *testing.T, b *bundle, result string) float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "paylab_orders_naive_publish_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
