package outbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// The standby guard on the local stack's server, which has no standby.
// On: the relay streams the events and publishes none, reading the
// (absent) standbys' positions again and again, and confirms no position
// past the commits it holds. Auto: no synchronous replication, so the
// events go at once, after one reading. Off: they go without any. (The
// guard against a real synchronous standby: internal/testkit/pgha,
// TestWALRelayStandbyGuard.)
func TestWALRelayStandbyGuardWithoutStandbys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		guard outbox.StandbyGuard
		held  bool
	}{
		{outbox.StandbyGuardOn, true},
		{outbox.StandbyGuardAuto, false},
		{outbox.StandbyGuardOff, false},
	} {
		t.Run(string(tc.guard), func(t *testing.T) {
			t.Parallel()
			const events = 20
			f := walSetup(t, 1)
			ctx := testenv.Context(t)
			reg := prometheus.NewRegistry()
			cfg := f.config(t, "guard-"+string(tc.guard), reg)
			cfg.StandbyGuard = tc.guard
			var published atomic.Int64
			pub := outbox.PublisherFunc(func(_ context.Context, batch []outbox.Event) []error {
				published.Add(int64(len(batch)))
				return make([]error, len(batch))
			})
			startWALRelay(t, f, pub, cfg)
			var before string
			if err := f.admin.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
				t.Fatal(err)
			}
			seedBacklog(t, ctx, f.pool, f.topic, "order", events, 5)
			checks := func() float64 { return metricValue(t, reg, "outbox_wal_standby_checks_total") }

			if !tc.held {
				testenv.Eventually(t, time.Minute, "every event published and recorded", func() bool {
					return dispatched(t, ctx, f.pool) == events
				})
				if n := checks(); tc.guard == outbox.StandbyGuardOff && n != 0 || tc.guard == outbox.StandbyGuardAuto && n < 1 {
					t.Errorf("guard %s read the standbys' positions %v times", tc.guard, n)
				}
				return
			}
			// Counted work, not time: 20 readings, with the backoff about
			// a second and a half on an idle machine.
			testenv.Eventually(t, time.Minute, "20 readings of the standbys' positions", func() bool {
				return checks() >= 20
			})
			if n := published.Load(); n != 0 {
				t.Fatalf("%d events published with the guard on and no standby", n)
			}
			if b := metricValue(t, reg, "outbox_wal_standby_behind_bytes"); b <= 0 {
				t.Errorf("outbox_wal_standby_behind_bytes = %v while holding the events, want > 0", b)
			}
			var confirmedBefore bool
			if err := f.admin.QueryRow(ctx, "SELECT confirmed_flush_lsn <= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1",
				f.cfg.Slot, before).Scan(&confirmedBefore); err != nil {
				t.Fatal(err)
			}
			if !confirmedBefore {
				t.Errorf("the slot's confirmed position passed %s, the WAL before the held commits", before)
			}
			if n := dispatched(t, ctx, f.pool); n != 0 {
				t.Errorf("%d events recorded as published", n)
			}
		})
	}
}
