package outbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeStandbys is a scripted primary: each reading returns the next state
// (the last one repeats) and counts itself.
type fakeStandbys struct {
	states []standbyState
	reads  int
	// at, when set, runs at every reading with its number (from 1).
	at func(n int)
}

func (f *fakeStandbys) read(context.Context) (standbyState, error) {
	f.reads++
	if f.at != nil {
		f.at(f.reads)
	}
	s := f.states[min(f.reads, len(f.states))-1]
	return s, nil
}

// guardFor is a guard over f whose clock the test moves.
func guardFor(mode StandbyGuard, f *fakeStandbys) (*standbyGuard, *time.Time) {
	now := time.Unix(1_000_000, 0)
	g := newStandbyGuard(mode, "t_wal_", slog.New(slog.DiscardHandler), f.read)
	g.now = func() time.Time { return now }
	return g, &now
}

func synced(flushed pglogrepl.LSN) standbyState {
	return standbyState{synchronous: true, visible: true, standbys: 1, flushed: flushed, local: flushed}
}

func TestStandbyGuardWaitsUntilTheStandbyFlushedTheCommit(t *testing.T) {
	t.Parallel()
	f := &fakeStandbys{states: []standbyState{synced(100), synced(150), synced(199), synced(250)}}
	g, _ := guardFor(StandbyGuardOn, f)
	if err := g.wait(t.Context(), t.Context(), 200, false); err != nil {
		t.Fatal(err)
	}
	if f.reads != 4 {
		t.Fatalf("%d readings, want 4: it went before the standby passed 200, or read again after", f.reads)
	}
	// The last reading (250) stands: commits up to it go without a query.
	for _, target := range []pglogrepl.LSN{201, 250} {
		if err := g.wait(t.Context(), t.Context(), target, false); err != nil {
			t.Fatal(err)
		}
	}
	if f.reads != 4 {
		t.Fatalf("%d readings for commits the last reading covered, want none", f.reads-4)
	}
}

func TestStandbyGuardHoldsWithoutASynchronousStandby(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		state standbyState
	}{
		{"no standby streaming", standbyState{synchronous: true, visible: true, local: 500}},
		{"positions hidden from the role", standbyState{synchronous: true, visible: false, standbys: 0, local: 500}},
		{"guard on, no synchronous replication", standbyState{local: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			f := &fakeStandbys{states: []standbyState{tc.state}, at: func(n int) {
				if n == 5 {
					cancel()
				}
			}}
			g, _ := guardFor(StandbyGuardOn, f)
			err := g.wait(ctx, t.Context(), 100, false)
			if !errors.Is(err, errLeaseLost) {
				t.Fatalf("wait returned %v after %d readings, want it held until ctx ended", err, f.reads)
			}
			if f.reads != 5 {
				t.Fatalf("%d readings, want 5 (one per pause, then ctx ended)", f.reads)
			}
		})
	}
}

func TestStandbyGuardStopsWhenTheRelayStops(t *testing.T) {
	t.Parallel()
	drain, stop := context.WithCancel(t.Context())
	f := &fakeStandbys{states: []standbyState{synced(10)}, at: func(n int) {
		if n == 3 {
			stop()
		}
	}}
	g, _ := guardFor(StandbyGuardOn, f)
	if err := g.wait(t.Context(), drain, 100, false); !errors.Is(err, errStopping) {
		t.Fatalf("wait returned %v, want errStopping", err)
	}
	if got := testutil.ToFloat64(g.behind); got != 0 {
		t.Fatalf("behind = %v after the wait ended, want 0", got)
	}
}

// The pauses between readings double from 1 ms to 100 ms: a standby that
// stays behind costs at most ten readings a second, and no busy loop.
func TestStandbyGuardBacksOff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stamps []time.Time
	f := &fakeStandbys{states: []standbyState{synced(10)}, at: func(n int) {
		stamps = append(stamps, time.Now())
		if n == 10 {
			cancel()
		}
	}}
	g, _ := guardFor(StandbyGuardOn, f)
	_ = g.wait(ctx, t.Context(), 100, false)
	// Pauses 1+2+4+...+64 ms, then 100: at least 227 ms over ten readings.
	if d := stamps[len(stamps)-1].Sub(stamps[0]); d < 227*time.Millisecond {
		t.Fatalf("ten readings within %v: the guard does not back off", d)
	}
	if got := testutil.ToFloat64(g.checks); got != 10 {
		t.Fatalf("checks = %v, want 10", got)
	}
}

// Auto: without synchronous replication the batch goes after one reading,
// and for walStandbyRecheck after it without any.
func TestStandbyGuardAutoWithoutSynchronousReplicationCostsOneReadingASecond(t *testing.T) {
	t.Parallel()
	f := &fakeStandbys{states: []standbyState{{local: 900}}}
	g, now := guardFor(StandbyGuardAuto, f)
	for target := pglogrepl.LSN(100); target < 200; target++ {
		if err := g.wait(t.Context(), t.Context(), target, target%7 == 0); err != nil {
			t.Fatal(err)
		}
	}
	if f.reads != 1 {
		t.Fatalf("%d readings for 100 batches within a second, want 1", f.reads)
	}
	*now = now.Add(walStandbyRecheck)
	if err := g.wait(t.Context(), t.Context(), 300, false); err != nil {
		t.Fatal(err)
	}
	if f.reads != 2 {
		t.Fatalf("%d readings after the recheck interval, want 2", f.reads)
	}
}

// Auto with synchronous replication guards as on does.
func TestStandbyGuardAutoWithSynchronousReplicationGuards(t *testing.T) {
	t.Parallel()
	f := &fakeStandbys{states: []standbyState{synced(50), synced(50), synced(120)}}
	g, _ := guardFor(StandbyGuardAuto, f)
	if err := g.wait(t.Context(), t.Context(), 100, false); err != nil {
		t.Fatal(err)
	}
	if f.reads != 3 {
		t.Fatalf("%d readings, want 3", f.reads)
	}
}

// An open batch (a transaction still being streamed, rows from the table)
// waits for the primary's WAL end at the first reading.
func TestStandbyGuardOpenBatchWaitsForThePrimarysWALEnd(t *testing.T) {
	t.Parallel()
	first := synced(100)
	first.local = 400
	then := synced(399)
	then.local = 600
	f := &fakeStandbys{states: []standbyState{first, then, synced(400)}}
	g, _ := guardFor(StandbyGuardOn, f)
	if err := g.wait(t.Context(), t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	if f.reads != 3 {
		t.Fatalf("%d readings, want 3: the target is the WAL end of the first reading (400), not a later one", f.reads)
	}
}

// The cache is the last reading, not the highest ever: when the
// synchronous standby changes to one further behind, commits past its
// position wait again.
func TestStandbyGuardFollowsAStandbyThatMovedBack(t *testing.T) {
	t.Parallel()
	f := &fakeStandbys{states: []standbyState{synced(500), synced(300), synced(300), synced(600)}}
	g, _ := guardFor(StandbyGuardOn, f)
	if err := g.wait(t.Context(), t.Context(), 450, false); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(t.Context(), t.Context(), 550, false); err != nil {
		t.Fatal(err)
	}
	if f.reads != 4 {
		t.Fatalf("%d readings, want 4", f.reads)
	}
	if err := g.wait(t.Context(), t.Context(), 600, false); err != nil || f.reads != 4 {
		t.Fatalf("a commit at the last reading: err %v, %d readings, want none more", err, f.reads)
	}
}

func TestStandbyGuardOffNeverReads(t *testing.T) {
	t.Parallel()
	f := &fakeStandbys{states: []standbyState{{}}}
	g, _ := guardFor(StandbyGuardOff, f)
	if err := g.wait(t.Context(), t.Context(), 1<<40, true); err != nil || f.reads != 0 {
		t.Fatalf("off: err %v, %d readings, want nil and none", err, f.reads)
	}
	if err := (WALConfig{StandbyGuard: "sometimes"}).Validate(); err == nil {
		t.Fatal(`StandbyGuard "sometimes" validated`)
	}
	reg := prometheus.NewRegistry()
	for _, c := range g.collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
}
