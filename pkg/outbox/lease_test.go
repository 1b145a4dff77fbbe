package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// Leases from both sides, step by step: while relay A holds a valid lease,
// relay B claims nothing; once the lease has expired (database clock), B
// takes the events over, counts the reclaims and publishes them; A's late
// outcome is then discarded (it no longer holds the rows).
func TestLeaseIsRespectedUntilItExpires(t *testing.T) {
	t.Parallel()
	pool, ctx := fiveOrders(t)

	release := make(chan struct{})
	stalled := outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
		<-release // a relay stuck mid-publish
		return nil
	})
	a, err := outbox.NewRelay(pool, stalled, outbox.RelayConfig{ID: "A", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b, err := outbox.NewRelay(pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{ID: "B", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	aDone := runBatch(ctx, a)
	testenv.Eventually(t, 30*time.Second, "A's lease", func() bool {
		return queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE lease_owner = 'A' AND leased_until > now()") == 5
	})

	if res, err := b.RunBatch(ctx); err != nil || res.Claimed != 0 {
		t.Fatalf("B during A's valid lease: %+v, %v; want nothing claimed", res, err)
	}

	expireLeases(t, ctx, pool, "A")
	res, err := b.RunBatch(ctx)
	if err != nil || res.Claimed != 5 || res.Reclaimed != 5 || res.Dispatched != 5 {
		t.Fatalf("B after A's lease expired: %+v, %v; want 5 claimed, reclaimed and dispatched", res, err)
	}

	close(release)
	if r := <-aDone; r.err != nil || r.res.Claimed != 5 || r.res.Dispatched != 0 {
		t.Fatalf("A's late outcome: %+v, %v; want 5 claimed, 0 recorded", r.res, r.err)
	}
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE dispatched_at IS NOT NULL AND attempts = 2"); n != 5 {
		t.Fatalf("%d events dispatched after the takeover, want 5", n)
	}
}

// Per-order ordering from both sides: while an order's first event is in
// flight, its later events are not claimable by any relay (other orders
// are); a claim without the oldest-undispatched check — written here as a
// second relay would without it — would take the order's second event and
// could put it on the topic before the first.
func TestOnlyTheOldestUndispatchedEventOfAnOrderIsClaimable(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)
	x1, x2, x3, y1 := event("t", "order-x", 1), event("t", "order-x", 2), event("t", "order-x", 3), event("t", "order-y", 1)
	enqueue(t, ctx, pool, x1, x2, x3, y1)

	release, aDone := make(chan struct{}), make(chan struct{})
	defer func() { close(release); <-aDone }()
	stalled := outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
		<-release
		return nil
	})
	a, err := outbox.NewRelay(pool, stalled, outbox.RelayConfig{ID: "A"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(aDone); _, _ = a.RunBatch(ctx) }()
	testenv.Eventually(t, 30*time.Second, "A's claim", func() bool {
		return queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE lease_owner = 'A'") > 0
	})
	claimed := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE lease_owner = 'A'")
	heads := queryInt(t, ctx, pool, `SELECT count(*) FROM outbox WHERE lease_owner = 'A' AND sequence = 1`)
	if claimed != 2 || heads != 2 {
		t.Fatalf("A claimed %d events (%d first events), want the first events of both orders only", claimed, heads)
	}
	b, err := outbox.NewRelay(pool, stalled, outbox.RelayConfig{ID: "B"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := b.RunBatch(ctx); err != nil || res.Claimed != 0 {
		t.Fatalf("B while order-x's first event is in flight: %+v, %v; want nothing claimable", res, err)
	}

	// The other side: without the check, order-x's second event is up for grabs.
	var naive []int64
	rows, err := pool.Query(ctx, `SELECT sequence FROM outbox
		WHERE dispatched_at IS NULL AND (leased_until IS NULL OR leased_until < now())
		ORDER BY id FOR UPDATE SKIP LOCKED`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s int64
		_ = rows.Scan(&s)
		naive = append(naive, s)
	}
	rows.Close()
	if len(naive) == 0 || naive[0] != 2 {
		t.Fatalf("a claim without the ordering check would take sequences %v; expected it to take order-x's 2 while 1 is in flight", naive)
	}
}

// The zombie case from both sides. Relay A stalls holding a lease (a GC
// pause, SIGSTOP) until it expires; B takes the rows over and is still
// publishing them when A wakes up and records its outcome. Fenced (the
// default), A's record is refused — the rows are B's — and counted in
// lease_lost_total; B records them. Unfenced (UnfencedComplete, written here
// to show what the owner check prevents), A records rows B holds, and B's
// own outcome then finds nothing to record.
func TestAStalledRelayCannotRecordRowsAnotherRelayNowHolds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		unfenced   bool
		deleting   bool // RelayConfig.DeleteDispatched: the outcome deletes the rows
		aRecords   int  // rows A's late outcome records
		bRecords   int
		aLeaseLost float64
	}{
		{name: "fenced", aRecords: 0, bRecords: 5, aLeaseLost: 5},
		{name: "fenced, deleting", deleting: true, aRecords: 0, bRecords: 5, aLeaseLost: 5},
		{name: "unfenced", unfenced: true, aRecords: 5, bRecords: 0, aLeaseLost: 0},
		{name: "unfenced, deleting", unfenced: true, deleting: true, aRecords: 5, bRecords: 0, aLeaseLost: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, ctx := fiveOrders(t)

			kafka := newKafkaPublisher(t, testenv.Brokers())
			stalledUntil := func(release <-chan struct{}) outbox.Publisher {
				return outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
					<-release
					return kafka.Publish(ctx, events)
				})
			}
			releaseA, releaseB := make(chan struct{}), make(chan struct{})
			regA := prometheus.NewRegistry()
			a, err := outbox.NewRelay(pool, stalledUntil(releaseA), outbox.RelayConfig{
				ID: "A", LeaseTTL: time.Minute, Registerer: regA, DeleteDispatched: tc.deleting,
				Unsafe: outbox.Unsafe{UnfencedComplete: tc.unfenced}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := outbox.NewRelay(pool, stalledUntil(releaseB), outbox.RelayConfig{ID: "B", LeaseTTL: time.Minute, DeleteDispatched: tc.deleting})
			if err != nil {
				t.Fatal(err)
			}
			aDone := runBatch(ctx, a)
			testenv.Eventually(t, 30*time.Second, "A's lease", func() bool {
				return queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE lease_owner = 'A'") == 5
			})
			expireLeases(t, ctx, pool, "A")
			bDone := runBatch(ctx, b)
			testenv.Eventually(t, 30*time.Second, "B's takeover", func() bool {
				return queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE lease_owner = 'B'") == 5
			})

			close(releaseA) // A wakes up while B holds the rows
			ra := <-aDone
			if ra.err != nil || ra.res.Dispatched != tc.aRecords {
				t.Fatalf("A's late outcome: %+v, %v; want %d recorded", ra.res, ra.err, tc.aRecords)
			}
			if got := metricValue(t, regA, "outbox_lease_lost_total"); got != tc.aLeaseLost {
				t.Errorf("A's lease_lost_total = %v, want %v", got, tc.aLeaseLost)
			}
			close(releaseB)
			rb := <-bDone
			if rb.err != nil || rb.res.Dispatched != tc.bRecords {
				t.Fatalf("B's outcome: %+v, %v; want %d recorded", rb.res, rb.err, tc.bRecords)
			}
			if n := undispatched(t, ctx, pool); n != 0 {
				t.Fatalf("%d events left undispatched", n)
			}
			if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox"); tc.deleting != (n == 0) {
				t.Fatalf("%d rows left in the outbox, deleting %v", n, tc.deleting)
			}
		})
	}
}

// fiveOrders enqueues the first event of five orders, on a topic of their
// own, in a database of the test's own.
func fiveOrders(t *testing.T) (*pgxpool.Pool, context.Context) {
	t.Helper()
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	events := make([]outbox.Event, 5)
	for i := range events {
		events[i] = event(topic, fmt.Sprintf("order-%d", i), 1)
	}
	enqueue(t, ctx, pool, events...)
	return pool, ctx
}

// batchOutcome is what one RunBatch returned.
type batchOutcome struct {
	res outbox.BatchResult
	err error
}

// runBatch runs one batch of r in the background and hands its outcome
// over on the channel.
func runBatch(ctx context.Context, r *outbox.Relay) <-chan batchOutcome {
	done := make(chan batchOutcome, 1)
	go func() {
		res, err := r.RunBatch(ctx)
		done <- batchOutcome{res, err}
	}()
	return done
}

// expireLeases ends owner's leases now (database clock), as if owner had
// stalled past them.
func expireLeases(t *testing.T, ctx context.Context, pool *pgxpool.Pool, owner string) {
	t.Helper()
	if _, err := pool.Exec(ctx, "UPDATE outbox SET leased_until = now() - interval '1 second' WHERE lease_owner = $1", owner); err != nil {
		t.Fatal(err)
	}
}
