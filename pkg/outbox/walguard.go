package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// StandbyGuard is whether the WAL relay waits, before it publishes what it
// streamed, until every synchronous standby has flushed the commit
// (WALConfig.StandbyGuard).
//
// Why: a logical walsender decodes a transaction as soon as its commit is
// flushed on the primary, before the synchronous standbys confirm it (the
// committing session is still waiting for them, or committed with
// synchronous_commit = local or off). If the primary dies then, the standby
// that is promoted never had the transaction, but the relay may have
// published its events: phantom events, for orders the new primary does not
// know. PostgreSQL 17 closes this in the server with failover slots: the
// walsender of a logical slot created with failover = true waits until the
// physical slots listed in synchronized_standby_slots have confirmed the WAL
// before it sends the decoded changes (PostgreSQL 17 release notes, "Logical
// Replication", https://www.postgresql.org/docs/17/release-17.html; the
// setting: https://www.postgresql.org/docs/17/runtime-config-replication.html#GUC-SYNCHRONIZED-STANDBY-SLOTS).
// On PostgreSQL 15 and 16 the relay does it itself: it reads the
// synchronous standbys' flush positions from pg_stat_replication and holds
// each batch until they have passed its last commit.
type StandbyGuard string

const (
	// StandbyGuardAuto (the default, also "") guards while the server has
	// synchronous replication (synchronous_standby_names set), read again at
	// most every second while it has none. It follows the server's own
	// promise: a commit the server acknowledges without a standby, a failover
	// may lose anyway. Patroni's synchronous_mode clears the setting when no
	// standby is healthy (and then promotes nobody automatically); the relay
	// publishes unguarded meanwhile. On a single server it costs one cheap
	// query a second.
	StandbyGuardAuto StandbyGuard = "auto"
	// StandbyGuardOn always guards: with no synchronous standby streaming
	// (none configured, or all of them gone) the relay publishes nothing and
	// waits, reporting it (<prefix>_wal_standby_behind_bytes and a warning).
	StandbyGuardOn StandbyGuard = "on"
	// StandbyGuardOff never guards: on PostgreSQL 15 with synchronous
	// replication, a failover can leave phantom events.
	StandbyGuardOff StandbyGuard = "off"
)

func (g StandbyGuard) validate() error {
	switch g {
	case "", StandbyGuardAuto, StandbyGuardOn, StandbyGuardOff:
		return nil
	}
	return fmt.Errorf("standby guard %q is not auto, on or off", string(g))
}

const (
	walStandbyMinWait = time.Millisecond       // the guard's first pause when a standby is behind
	walStandbyMaxWait = 100 * time.Millisecond // its longest pause
	walStandbyRecheck = time.Second            // auto: how long a reading without synchronous replication stands
	walStandbyWarn    = 5 * time.Second        // a wait this long is logged
)

// standbyState is one reading of the primary's replication state.
type standbyState struct {
	synchronous bool          // synchronous_standby_names is set
	visible     bool          // the role may see the standbys' positions (pg_read_all_stats)
	standbys    int           // synchronous (or quorum) standbys streaming
	flushed     pglogrepl.LSN // the lowest flush position among them; 0 with none
	local       pglogrepl.LSN // the primary's WAL end (insert position)
}

// standbyGuard holds batches until every synchronous standby has flushed
// their commits. It remembers the last reading and asks again only for a
// commit past it, pausing between readings (1 ms doubling to 100 ms) while a
// standby is behind. It is used by one goroutine at a time.
type standbyGuard struct {
	mode StandbyGuard
	read func(context.Context) (standbyState, error)
	now  func() time.Time
	log  *slog.Logger

	checks prometheus.Counter   // readings
	waits  prometheus.Histogram // per guarded batch, the time until it could go
	behind prometheus.Gauge     // while waiting, how far the slowest standby is behind

	passed    pglogrepl.LSN // every synchronous standby had flushed this far at the last reading
	unguarded time.Time     // auto: no synchronous replication, per the reading, until then
}

func newStandbyGuard(mode StandbyGuard, prefix string, log *slog.Logger, read func(context.Context) (standbyState, error)) *standbyGuard {
	if mode == "" {
		mode = StandbyGuardAuto
	}
	return &standbyGuard{mode: mode, read: read, now: time.Now, log: log,
		checks: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "standby_checks_total",
			Help: "Readings of the synchronous standbys' flush positions (pg_stat_replication) by the standby guard: about one per batch with synchronous replication, one a second without (auto)."}),
		waits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: prefix + "standby_wait_seconds",
			Help:    "Per batch the standby guard checked, how long it waited for every synchronous standby to flush its commits before it was published.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30}}),
		behind: prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "standby_behind_bytes",
			Help: "While the standby guard holds a batch: how many bytes of WAL the slowest synchronous standby has still to flush before it may go (the whole commit position when no synchronous standby streams); 0 otherwise."}),
	}
}

func (g *standbyGuard) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.checks, g.waits, g.behind}
}

// wait returns nil once every synchronous standby has flushed through
// target, the end of a batch's last commit. With open, the batch also holds
// events whose commit position is not known (a transaction still being
// streamed, rows read from the table): the target is then at least the
// primary's WAL end at the first reading, which is past their commits (a
// walsender decodes only flushed WAL; a visible row's commit was inserted).
// It returns errLeaseLost when lctx ends and errStopping when drain does.
func (g *standbyGuard) wait(lctx, drain context.Context, target pglogrepl.LSN, open bool) error {
	if g.mode == StandbyGuardOff || !open && target <= g.passed {
		return nil
	}
	start := g.now()
	if g.mode == StandbyGuardAuto && start.Before(g.unguarded) {
		return nil
	}
	pause, warned, reason := walStandbyMinWait, false, ""
	for {
		s, err := g.read(lctx)
		g.checks.Inc()
		switch {
		case lctx.Err() != nil:
			g.behind.Set(0)
			return errLeaseLost
		case err != nil:
			reason = err.Error()
		case g.mode == StandbyGuardAuto && !s.synchronous:
			g.unguarded, g.passed = g.now().Add(walStandbyRecheck), 0
			g.done(start)
			return nil
		default:
			if open {
				target, open = lsnMax(target, s.local), false
			}
			g.passed, reason = 0, ""
			switch {
			case !s.visible:
				reason = "the relay's role cannot see the standbys' positions in pg_stat_replication: grant it pg_read_all_stats"
			case s.standbys == 0:
				reason = "no synchronous standby is streaming"
			default:
				g.passed = s.flushed
			}
			if target <= g.passed {
				g.done(start)
				return nil
			}
			if reason == "" {
				reason = "a synchronous standby has not flushed the commit yet"
			}
			g.behind.Set(float64(target - g.passed))
		}
		if !warned && g.now().Sub(start) >= walStandbyWarn {
			warned = true
			g.log.WarnContext(lctx, "holding streamed events until the synchronous standbys have them",
				"reason", reason, "commit_lsn", target.String(), "standby_flush_lsn", g.passed.String())
		}
		select {
		case <-time.After(pause):
		case <-lctx.Done():
			g.behind.Set(0)
			return errLeaseLost
		case <-drain.Done():
			g.behind.Set(0)
			return errStopping
		}
		pause = min(2*pause, walStandbyMaxWait)
	}
}

// done records a wait that ended with the batch free to go.
func (g *standbyGuard) done(start time.Time) {
	g.behind.Set(0)
	waited := g.now().Sub(start)
	g.waits.Observe(waited.Seconds())
	if waited >= walStandbyWarn {
		g.log.Info("the synchronous standbys caught up; publishing the held events", "waited", waited)
	}
}

// readStandbys reads the primary's replication state in one statement. The
// positions in pg_stat_replication are NULL for a role without the
// privileges of pg_read_all_stats (superusers have them).
func readStandbys(pool *pgxpool.Pool) func(context.Context) (standbyState, error) {
	return func(ctx context.Context) (standbyState, error) {
		var s standbyState
		var flushed, local int64
		err := pool.QueryRow(ctx, `-- name: StandbyPositions :one
			SELECT current_setting('synchronous_standby_names') <> '',
			       pg_has_role('pg_read_all_stats', 'USAGE'),
			       count(*) FILTER (WHERE sync_state IN ('sync', 'quorum') AND flush_lsn IS NOT NULL),
			       COALESCE((min(flush_lsn) FILTER (WHERE sync_state IN ('sync', 'quorum')) - '0/0'::pg_lsn)::bigint, 0),
			       (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint
			  FROM pg_stat_replication`).Scan(&s.synchronous, &s.visible, &s.standbys, &flushed, &local)
		if err != nil {
			return s, fmt.Errorf("reading the synchronous standbys' positions: %w", err)
		}
		s.flushed, s.local = pglogrepl.LSN(flushed), pglogrepl.LSN(local)
		return s, nil
	}
}
