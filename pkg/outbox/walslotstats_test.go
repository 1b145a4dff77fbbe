package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

const (
	slotRetained = "outbox_wal_slot_retained_wal_bytes"
	slotLag      = "outbox_wal_slot_lag_bytes"
	slotStatus   = "outbox_wal_slot_wal_status"
	slotExists   = "outbox_wal_slot_exists"
	slotActive   = "outbox_wal_slot_active"
	slotSafeSize = "outbox_wal_slot_safe_wal_size_bytes"
	activeReader = "outbox_wal_active_reader"
)

var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// acceptAll acknowledges every event.
var acceptAll = outbox.PublisherFunc(func(context.Context, []outbox.Event) []error { return nil })

// statsConfig is the fixture's relay config with the slot read every 50 ms.
func (f *walFixture) statsConfig(t *testing.T, id string, reg prometheus.Registerer) outbox.WALConfig {
	cfg := f.config(t, id, reg)
	cfg.StatsInterval = 50 * time.Millisecond
	return cfg
}

// walLSN is the server's current WAL position, in bytes.
func walLSN(t *testing.T, ctx context.Context, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queryInt(t, ctx, pool, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
}

// slotGauge reads one of the slot's gauges, labelled with its name.
func slotGauge(t *testing.T, reg *prometheus.Registry, name, slot string, labels ...string) float64 {
	t.Helper()
	return metricValue(t, reg, name, append([]string{"slot", slot}, labels...)...)
}

// reportsStatus reports whether the wal_status gauges show want (1 for it,
// 0 for the others; want "" for all 0).
func reportsStatus(t *testing.T, reg *prometheus.Registry, slot, want string) bool {
	t.Helper()
	for _, st := range walStatuses {
		w := 0.0
		if st == want {
			w = 1
		}
		if slotGauge(t, reg, slotStatus, slot, "status", st) != w {
			return false
		}
	}
	return true
}

// series counts reg's series of a metric.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A slot nobody reads keeps the WAL written since its restart position: a
// standby relay reports that retained WAL growing by at least what was
// written, its status, and no walsender; once the slot is dropped it
// reports the slot missing, with every other slot gauge at 0.
func TestWALSlotStatsReportRetainedWALAndAMissingSlot(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 1)
	ctx := testenv.Context(t)
	slot := f.cfg.Slot
	// Another relay holds the reader lease: this one stands by, so nothing
	// streams the slot and nothing moves its positions.
	if _, err := f.pool.Exec(ctx, `UPDATE outbox_wal_readers SET owner = 'elsewhere',
		leased_until = now() + interval '1 hour' WHERE slot = $1`, slot); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	startWALRelay(t, f, acceptAll, f.statsConfig(t, "standby", reg))

	testenv.Eventually(t, 30*time.Second, "the slot reported present and reserved", func() bool {
		return slotGauge(t, reg, slotExists, slot) == 1 && reportsStatus(t, reg, slot, "reserved")
	})
	// The server keeps WAL from before the confirmed position (decoding
	// restarts at the oldest transaction still running there): the
	// retained WAL exceeds the lag. Read retained first: with nothing
	// streaming both only grow, so a later lag can only be larger.
	testenv.Eventually(t, 30*time.Second, "retained WAL above the lag", func() bool {
		retained := slotGauge(t, reg, slotRetained, slot)
		return retained > slotGauge(t, reg, slotLag, slot)
	})
	if g := slotGauge(t, reg, slotActive, slot); g != 0 {
		t.Errorf("slot_active = %v with no reader connected, want 0", g)
	}
	if g := metricValue(t, reg, activeReader); g != 0 {
		t.Errorf("active_reader = %v on a standby, want 0", g)
	}
	var limit string
	if err := f.pool.QueryRow(ctx, "SELECT current_setting('max_slot_wal_keep_size')").Scan(&limit); err != nil {
		t.Fatal(err)
	}
	want := 1
	if limit == "-1" {
		want = 0 // no limit: safe_wal_size is null, and the series absent
	}
	if n := series(t, reg, slotSafeSize); n != want {
		t.Errorf("%d %s series with max_slot_wal_keep_size %s, want %d", n, slotSafeSize, limit, want)
	}

	retained0, lag0 := slotGauge(t, reg, slotRetained, slot), slotGauge(t, reg, slotLag, slot)
	from := walLSN(t, ctx, f.pool)
	seedOrders(t, ctx, f.pool, f.topic, 500, 2)
	written := float64(walLSN(t, ctx, f.pool) - from)
	if written < 256<<10 {
		t.Fatalf("the inserts wrote %.0f bytes of WAL: too little to show anything", written)
	}
	// Every reading after the inserts covers them: the slot's positions
	// have not moved, and the server wrote at least that much since the
	// readings above.
	testenv.Eventually(t, 30*time.Second, "the retained WAL and the lag grown by what was written", func() bool {
		return slotGauge(t, reg, slotRetained, slot) >= retained0+written &&
			slotGauge(t, reg, slotLag, slot) >= lag0+written
	})
	if !reportsStatus(t, reg, slot, "reserved") {
		t.Errorf("wal_status is not reserved after %.0f bytes of WAL", written)
	}

	f.dropSlot(t)
	testenv.Eventually(t, 30*time.Second, "the slot reported missing", func() bool { return slotGauge(t, reg, slotExists, slot) == 0 })
	for _, name := range []string{slotRetained, slotLag, slotActive} {
		if g := slotGauge(t, reg, name, slot); g != 0 {
			t.Errorf("%s = %v for a missing slot, want 0", name, g)
		}
	}
	if !reportsStatus(t, reg, slot, "") {
		t.Error("a missing slot reports a wal_status")
	}
	if n := series(t, reg, slotSafeSize); n != 0 {
		t.Errorf("%d %s series for a missing slot, want none", n, slotSafeSize)
	}
}

// While one relay streams the slot, every relay sharing it reports a
// walsender connected (slot_active 1), and only the reader holds the lease
// (active_reader 1).
func TestWALSlotStatsShowTheReader(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 1)
	slot := f.cfg.Slot
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	startWALRelay(t, f, acceptAll, f.statsConfig(t, "wal-a", regs[0]))
	startWALRelay(t, f, acceptAll, f.statsConfig(t, "wal-b", regs[1]))

	testenv.Eventually(t, 30*time.Second, "one reader, seen streaming by both relays", func() bool {
		readers := 0.0
		for _, reg := range regs {
			if slotGauge(t, reg, slotActive, slot) != 1 || slotGauge(t, reg, slotExists, slot) != 1 {
				return false
			}
			readers += metricValue(t, reg, activeReader)
		}
		return readers == 1
	})
}
