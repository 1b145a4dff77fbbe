package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

func TestMigrationsRenderTheTableName(t *testing.T) {
	t.Parallel()
	ms, err := outbox.Migrations("shop_outbox")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Version != 1 {
		t.Fatalf("migrations %+v, want versions from 1", ms)
	}
	all := ""
	for i, m := range ms {
		if m.Version != i+1 || m.Up == "" || m.Down == "" {
			t.Errorf("migration %d: %+v", i, m)
		}
		all += m.Up + m.Down
	}
	for _, want := range []string{"CREATE TABLE shop_outbox (", "shop_outbox_pending_idx ON shop_outbox"} {
		if !strings.Contains(all, want) {
			t.Errorf("rendered SQL lacks %q", want)
		}
	}
	if strings.Contains(all, "TEMPLATE") {
		t.Error("rendered SQL still holds a template marker")
	}
	for _, bad := range []string{"Shop", "shop-outbox", "s.outbox", strings.Repeat("x", 41), "1outbox"} {
		if _, err := outbox.Migrations(bad); err == nil {
			t.Errorf("Migrations(%q) accepted the name", bad)
		}
		if err := (outbox.Config{Table: bad}).Validate(); err == nil {
			t.Errorf("Config{Table: %q}.Validate() = nil", bad)
		}
	}
}

// A table of another name, in a database that also holds the default one:
// Migrate creates it (twice is a no-op), a Writer fills it, a Relay with
// the same Config drains it under its own metric names, and the default
// table is never touched.
func TestCustomTable(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := testenv.NewPool(t, migrate)
	cfg := outbox.Config{Table: "shop_outbox"}
	for range 2 {
		if err := outbox.Migrate(ctx, pool, cfg); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	w, err := outbox.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	events := []outbox.Event{event("t", "cart-1", 1), event("t", "cart-1", 2)}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return w.Enqueue(ctx, tx, events...) }); err != nil {
		t.Fatal(err)
	}

	var (
		mu   sync.Mutex
		seen []uuid.UUID
	)
	pub := outbox.PublisherFunc(func(_ context.Context, evs []outbox.Event) []error {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			seen = append(seen, e.ID)
		}
		return make([]error, len(evs))
	})
	reg := prometheus.NewRegistry()
	rcfg := cfg.RelayConfig()
	rcfg.Registerer = reg
	relay, err := outbox.NewRelay(pool, pub, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // one event of the aggregate per batch
		if _, err := relay.RunBatch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 || seen[0] != events[0].ID || seen[1] != events[1].ID {
		t.Errorf("published %v, want %v then %v", seen, events[0].ID, events[1].ID)
	}
	if got := metricValue(t, reg, "shop_outbox_published_total"); got != 2 {
		t.Errorf("shop_outbox_published_total = %v, want 2", got)
	}
	var pending, defaults int
	if err := pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE dispatched_at IS NULL) FROM shop_outbox").Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&defaults); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || defaults != 0 {
		t.Errorf("pending in shop_outbox %d, rows in outbox %d; want 0 and 0", pending, defaults)
	}
}

// Sequence 0 is unordered: such events are claimed at once, several per
// aggregate, and do not hold back the aggregate's ordered events; the
// ordered ones still go one at a time, in sequence.
func TestUnorderedEvents(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, _ := testenv.NewPool(t, migrate)
	unordered1, unordered2 := event("t", "ord-u", 0), event("t", "ord-u", 0)
	first, second := event("t", "ord-u", 1), event("t", "ord-u", 2)
	enqueue(t, ctx, pool, unordered1, first, second, unordered2)

	var batches [][]outbox.Event
	pub := outbox.PublisherFunc(func(_ context.Context, evs []outbox.Event) []error {
		batches = append(batches, append([]outbox.Event(nil), evs...))
		return make([]error, len(evs))
	})
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := relay.RunBatch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(evs []outbox.Event) map[uuid.UUID]bool {
		m := map[uuid.UUID]bool{}
		for _, e := range evs {
			m[e.ID] = true
		}
		return m
	}
	if len(batches) != 2 || len(batches[0]) != 3 || !ids(batches[0])[unordered1.ID] || !ids(batches[0])[unordered2.ID] ||
		!ids(batches[0])[first.ID] || len(batches[1]) != 1 || batches[1][0].ID != second.ID {
		t.Fatalf("batches %v; want both unordered events with sequence 1, then sequence 2", batches)
	}
	msg := unordered1.ProducerMessage("/test")
	for _, h := range msg.Headers {
		if string(h.Key) == outbox.HeaderSequence {
			t.Errorf("an unordered event carries %s %q", h.Key, h.Value)
		}
	}
}
