package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// The timeline samples the deployment's databases on the shared stack: it
// sees pending outbox rows appear, records the marks of the deployment and
// of its processes in order, leaves out the figures of a database it cannot
// reach (a gap, not a zero) without failing, and records nothing after its
// stop.
func TestTimelineSamplesTheDatabasesAndRecordsTheMarks(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, ordersURL := testenv.NewPool(t, "orders")
	unreachable := fmt.Sprintf("postgres://ledger:ledger@%s/ledger?sslmode=disable&connect_timeout=1", testenv.ClosedAddr(t))
	relay := newProcess("relay-0", "http://"+testenv.ClosedAddr(t), token, nil)
	d := &Deployment{
		Src:    reconcile.Sources{OrdersURL: ordersURL, LedgerURL: unreachable, NotificationsURL: testenv.NewDatabase(t, "notifications")},
		Relays: []*Process{relay}, Orders: &Process{Name: "orders"}, Ledger: &Process{Name: "ledger"}, Notifications: &Process{Name: "notifications"},
	}
	d.mark("before the timeline") // no timeline yet: nothing happens

	tl := d.startTimeline(ctx)
	defer tl.stop()
	waitPending := func(want int64) Sample {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			tl.mu.Lock()
			samples := tl.tl.Samples
			tl.mu.Unlock()
			if n := len(samples); n > 0 && samples[n-1].Pending != nil && *samples[n-1].Pending == want {
				return samples[n-1]
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no sample saw %d pending rows", want)
		return Sample{}
	}
	first := waitPending(0)
	if first.OldestAge == nil || *first.OldestAge != 0 || first.Payments == nil || first.Receipts == nil || *first.Receipts != 0 {
		t.Errorf("first sample %s", show(first))
	}
	if first.Entries != nil {
		t.Errorf("the unreachable ledger gave %d entries", *first.Entries)
	}

	d.mark("Kafka stopped")
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var events []outbox.Event
		for range 3 {
			e := testenv.OrderCaptured(uuid.NewString(), "cus_1", "mer_1", 100, "EUR")
			e.Topic = "order-events"
			events = append(events, *e)
		}
		return outbox.Enqueue(ctx, tx, events...)
	}); err != nil {
		t.Fatal(err)
	}
	pending := waitPending(3)
	if pending.OldestAge == nil || *pending.OldestAge < 0 {
		t.Errorf("with rows pending: %s", show(pending))
	}
	relay.restarted("crashed", time.Second)
	relay.markBack(errors.New("did not come back"))
	d.markDisarmed() // nothing armed by chance: no mark
	d.markArmed("orders.before_commit fails 5%")
	d.markDisarmed()
	d.markEnd("Kafka started")

	got := tl.stop()
	if again := tl.stop(); len(again.Samples) != len(got.Samples) {
		t.Errorf("a second stop: %d samples, then %d", len(got.Samples), len(again.Samples))
	}
	d.mark("after the stop")
	relay.mark("killed")
	if after := tl.stop(); len(after.Marks) != len(got.Marks) {
		t.Errorf("marks after the stop were recorded: %+v", after.Marks)
	}
	want := []Mark{{Label: "Kafka stopped"}, {Label: "relay-0 crashed"}, {Label: "relay-0 ready", End: true},
		{Label: "orders.before_commit fails 5%"}, {Label: "faults disarmed", End: true}, {Label: "Kafka started", End: true}}
	if len(got.Marks) != len(want) {
		t.Fatalf("marks %+v, want %+v", got.Marks, want)
	}
	for i, m := range got.Marks {
		if m.Label != want[i].Label || m.End != want[i].End {
			t.Errorf("mark %d = %+v, want %+v", i, m, want[i])
		}
	}
	if crashed, ready := got.Marks[1].At, got.Marks[2].At; ready-crashed < 0.9 {
		t.Errorf("the crash is marked %.2fs before the return, want the second it was away", ready-crashed)
	}
	for i := 1; i < len(got.Samples); i++ {
		if got.Samples[i].At <= got.Samples[i-1].At {
			t.Errorf("samples out of order: %v then %v", got.Samples[i-1].At, got.Samples[i].At)
		}
	}
	if got.Every != timelineEvery || got.Start.IsZero() {
		t.Errorf("timeline %v every %v", got.Start, got.Every)
	}
}

// A nil timeline — a deployment no scenario samples — takes every call.
func TestNilTimelineIgnoresMarks(t *testing.T) {
	t.Parallel()
	d := &Deployment{}
	p := newProcess("relay-0", "http://127.0.0.1:1", token, func(context.Context) error { return nil })
	d.mark("x")
	d.markEnd("x")
	d.markArmed("x")
	d.markDisarmed()
	p.restarted("crashed", time.Second)
	p.mark("killed")
	p.markBack(nil)
	var tl *timeline
	if tl.stop() != nil {
		t.Error("a nil timeline stopped into one")
	}
}

func show(s Sample) string {
	deref := func(p *int64) any {
		if p == nil {
			return "gap"
		}
		return *p
	}
	age := any("gap")
	if s.OldestAge != nil {
		age = *s.OldestAge
	}
	return fmt.Sprintf("t=%.2f payments=%v pending=%v age=%v entries=%v receipts=%v", s.At, deref(s.Payments), deref(s.Pending), age, deref(s.Entries), deref(s.Receipts))
}
