package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrRelayIDInUse is returned by Run when another running relay has the
// same ID on the same table. Lease fencing tells relays apart by
// their IDs: two live relays with one ID could record each other's rows.
var ErrRelayIDInUse = errors.New("outbox: the relay ID is in use by another running relay")

// ErrWALRelayRunning is returned by a polling relay's Run while a WAL relay
// (a reader or a standby) runs against the same table: the two modes would
// publish the same events, and out of order.
var ErrWALRelayRunning = errors.New("outbox: a WAL relay runs against the table")

// Relay modes, as the mode locks name them.
const (
	modePoll = "poll"
	modeWAL  = "wal"
)

// The guard's advisory locks use the two-key form, pg_*advisory_lock(int,
// int), whose key space is apart from the one-key form (SetupWAL's lock
// among others); advisory locks belong to one database:
//
//	relay ID  (hashtext('outbox_relay_id:' || table), hashtext(id))      exclusive
//	mode      (hashtext('outbox_mode:' || table), hashtext(poll | wal))  shared by the running relays of that mode
//	start     (hashtext('outbox_mode:' || table), hashtext('start'))     exclusive, for one start's check
//
// modeLookPause is how long a polling relay waits before it looks again
// when another relay's mode check held the lock it tried (takeMode).
const modeLookPause = 20 * time.Millisecond

func idLockClass(table string) string   { return "outbox_relay_id:" + table }
func modeLockClass(table string) string { return "outbox_mode:" + table }

// exclusion is what a relay's Run holds for its lifetime: its ID and its
// mode on its table (doc.go, "Running modes and relay IDs").
type exclusion struct {
	pool *pgxpool.Pool
	cfg  relayConfig
	mode string // modePoll or modeWAL
	log  *slog.Logger
	// notHeld, when set, is told why the relay publishes nothing: it waits
	// for the other mode's relays, or takes its guard again.
	notHeld func(error)
	// taken, when set, runs on the guard's connection once the relay holds
	// its mode, before anything else uses that connection.
	taken func(context.Context, *pgx.Conn)
}

// run runs run while the relay holds its guard: run's context ends with
// ctx or when the guard is lost. A lost guard (its connection broke) is
// taken again and run started again; Run's errors (ErrRelayIDInUse,
// ErrWALRelayRunning) end it. It returns nil once ctx ends.
func (e *exclusion) run(ctx context.Context, run func(context.Context) error) error {
	e.setNotHeld(errors.New("taking the relay's guard"))
	retake := false
	for {
		g, err := e.take(ctx, retake)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			e.log.ErrorContext(ctx, "the relay cannot run", "error", err)
			return err
		}
		err = run(g.ctx)
		lost := g.release()
		if err != nil || lost == nil || ctx.Err() != nil {
			return err
		}
		e.log.WarnContext(ctx, "lost the relay's guard: stopped publishing until it is taken again", "error", lost)
		e.setNotHeld(fmt.Errorf("taking the relay's guard again: %w", lost))
		retake = true
	}
}

func (e *exclusion) setNotHeld(err error) {
	if e.notHeld != nil {
		e.notHeld(err)
	}
}

// take connects, takes the relay's ID, then its mode, and returns the
// guard holding them. A polling relay gets ErrWALRelayRunning while a WAL
// relay runs; a WAL relay waits while polling relays run. The ID is
// refused at once at the first start; when retaking, and after any
// connection of its own broke, the relay's previous session may still hold
// it for a moment (the server has not noticed its end yet), so it is
// retried for up to LeaseTTL. Connection errors are retried.
func (e *exclusion) take(ctx context.Context, retake bool) (*guard, error) {
	var idDeadline time.Time // zero: refuse at once
	if retake {
		idDeadline = time.Now().Add(e.cfg.LeaseTTL)
	}
	backoff := min(100*time.Millisecond, e.cfg.PollInterval)
	waiting := false
	for {
		conn, err := e.connect(ctx)
		if err == nil {
			if err = e.takeID(ctx, conn); err == nil {
				var g *guard
				if g, err = e.takeMode(ctx, conn, &waiting); err == nil {
					return g, nil
				}
				idDeadline = time.Now().Add(e.cfg.LeaseTTL)
			}
			closeGuardConn(conn)
		}
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrWALRelayRunning):
			return nil, err
		case errors.Is(err, ErrRelayIDInUse):
			if time.Now().After(idDeadline) {
				return nil, err
			}
			pause(ctx, e.cfg.PollInterval)
		default:
			e.log.WarnContext(ctx, "taking the relay's guard failed; retrying", "error", err, "backoff", backoff)
			pause(ctx, backoff)
			backoff = min(2*backoff, e.cfg.PollInterval)
		}
	}
}

// connect opens the guard's connection, to the pool's database. The
// session's TCP keepalives make the server end it within about three
// quarters of LeaseTTL if the relay vanishes without closing it (a crashed
// host, a cut network), which releases its locks. The pool's tracer is not
// given to it: its statements (a lock check every third of LeaseTTL) are
// the guard's, not the relay's work on the table.
func (e *exclusion) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := e.pool.Config().ConnConfig.Copy()
	cfg.Tracer = nil
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = e.cfg.Table + "-guard"
	cctx, cancel := context.WithTimeout(ctx, e.cfg.LeaseTTL)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	secs := strconv.Itoa(max(1, int(e.cfg.LeaseTTL/4/time.Second)))
	if _, err := conn.Exec(cctx, `SELECT set_config('tcp_keepalives_idle', $1, false),
		set_config('tcp_keepalives_interval', $1, false), set_config('tcp_keepalives_count', '2', false)`, secs); err != nil {
		closeGuardConn(conn)
		return nil, fmt.Errorf("setting the guard session's keepalives: %w", err)
	}
	return conn, nil
}

// takeID takes the relay ID's lock, or returns ErrRelayIDInUse.
func (e *exclusion) takeID(ctx context.Context, conn *pgx.Conn) error {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.LeaseTTL)
	defer cancel()
	var ok bool
	if err := conn.QueryRow(cctx, "SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))",
		idLockClass(e.cfg.Table), e.cfg.ID).Scan(&ok); err != nil {
		return fmt.Errorf("taking the relay ID's lock: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: relay %q, table %s", ErrRelayIDInUse, e.cfg.ID, e.cfg.Table)
	}
	return nil
}

// takeMode takes the relay's mode and returns the guard. While relays of
// the other mode run, a polling relay gets ErrWALRelayRunning and a WAL
// relay waits, trying again every PollInterval; waiting tells whether that
// was logged.
func (e *exclusion) takeMode(ctx context.Context, conn *pgx.Conn, waiting *bool) (*guard, error) {
	for {
		taken, err := e.tryMode(ctx, conn)
		var walRunning bool
		if err == nil && !taken && e.mode == modePoll {
			walRunning, err = e.walRelayRuns(ctx, conn)
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("taking the relay mode's lock: %w", err)
		case taken:
			if *waiting {
				e.log.InfoContext(ctx, "the polling relays have stopped: the WAL relay starts")
			}
			if e.taken != nil {
				e.taken(ctx, conn)
			}
			return e.hold(ctx, conn), nil
		case e.mode == modePoll && !walRunning:
			// Another relay starting at the same moment holds a mode lock
			// for its check's transaction, and the server releases that
			// transaction's locks one by one: the start lock may reach this
			// relay before the mode lock is free. Only a running WAL relay
			// holds the WAL mode's lock shared, for its lifetime: look again.
			pause(ctx, modeLookPause)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		case e.mode == modePoll:
			return nil, fmt.Errorf("%w: table %s (a polling relay starts once every WAL relay has stopped)", ErrWALRelayRunning, e.cfg.Table)
		}
		if !*waiting {
			e.log.WarnContext(ctx, "polling relays run against the table: waiting for them to stop before setting up the slot", "table", e.cfg.Table)
			*waiting = true
		}
		e.setNotHeld(fmt.Errorf("polling relays run against table %s: waiting for them to stop", e.cfg.Table))
		pause(ctx, e.cfg.PollInterval)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// tryMode takes the relay's mode lock, shared with the relays of its mode,
// unless relays of the other mode hold theirs. The check and the take are
// one transaction under the start lock, so that two relays of different
// modes starting together cannot both pass the check; the other mode's
// lock is taken exclusively for the transaction only, which succeeds only
// while no relay of that mode holds it.
func (e *exclusion) tryMode(ctx context.Context, conn *pgx.Conn) (taken bool, err error) {
	other := modeWAL
	if e.mode == modeWAL {
		other = modePoll
	}
	class := modeLockClass(e.cfg.Table)
	cctx, cancel := context.WithTimeout(ctx, e.cfg.LeaseTTL)
	defer cancel()
	err = pgx.BeginFunc(cctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(cctx, "SELECT pg_advisory_xact_lock(hashtext($1), hashtext('start'))", class); err != nil {
			return err
		}
		var free bool
		if err := tx.QueryRow(cctx, "SELECT pg_try_advisory_xact_lock(hashtext($1), hashtext($2))", class, other).Scan(&free); err != nil || !free {
			return err
		}
		return tx.QueryRow(cctx, "SELECT pg_try_advisory_lock_shared(hashtext($1), hashtext($2))", class, e.mode).Scan(&taken)
	})
	return taken, err
}

// walRelayRuns reports whether a session holds the WAL mode's lock shared:
// a running WAL relay (doc.go's mode lock), not another relay's check, which
// holds it exclusively for a moment.
func (e *exclusion) walRelayRuns(ctx context.Context, conn *pgx.Conn) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.LeaseTTL)
	defer cancel()
	var n int
	err := conn.QueryRow(cctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND mode = 'ShareLock' AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = hashtext($1)::oid AND objid = hashtext($2)::oid`,
		modeLockClass(e.cfg.Table), modeWAL).Scan(&n)
	return n > 0, err
}

// guard holds a relay's ID and mode locks on its own connection, and
// watches it.
type guard struct {
	ctx    context.Context // ends with the relay's context, or when the guard is lost
	cancel context.CancelFunc
	conn   *pgx.Conn
	done   chan struct{}
	lost   error // why the guard was lost; set before done is closed
}

// hold starts watching conn, whose session holds the relay's locks.
func (e *exclusion) hold(ctx context.Context, conn *pgx.Conn) *guard {
	gctx, cancel := context.WithCancel(ctx)
	g := &guard{ctx: gctx, cancel: cancel, conn: conn, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		if err := e.watch(gctx, conn); err != nil {
			g.lost = err
			cancel()
		}
	}()
	return g
}

// watch returns nil when ctx ends, or why the guard was lost. It reads the
// idle connection, so that a connection the server closes (a restart, a
// terminated backend) is noticed at once, and every third of LeaseTTL
// checks that the session still holds the locks: a connection that stopped
// answering, or a pooler that does not keep sessions, loses the guard too.
func (e *exclusion) watch(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, e.cfg.LeaseTTL/3)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case conn.IsClosed():
			return fmt.Errorf("the guard's connection closed: %w", err)
		}
		held, err := e.held(ctx, conn)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("checking the guard's locks: %w", err)
		case !held:
			return errors.New("the guard's session no longer holds its locks (a pooler that does not keep sessions?)")
		}
	}
}

// held reports whether conn's session holds the ID and mode locks.
func (e *exclusion) held(ctx context.Context, conn *pgx.Conn) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.LeaseTTL/2)
	defer cancel()
	var n int
	err := conn.QueryRow(cctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 2
		  AND (classid, objid) IN ((hashtext($1)::oid, hashtext($2)::oid), (hashtext($3)::oid, hashtext($4)::oid))`,
		idLockClass(e.cfg.Table), e.cfg.ID, modeLockClass(e.cfg.Table), e.mode).Scan(&n)
	return n == 2, err
}

// release stops watching and ends the guard's session, and returns why the
// guard was lost (nil: it was held until ctx ended). A held guard unlocks
// before it closes: closing only asks the server to end the session, which
// it does a moment later, and the ID is to be free once Run has returned.
func (g *guard) release() error {
	g.cancel()
	<-g.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if g.lost == nil {
		_, _ = g.conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	}
	_ = g.conn.Close(ctx)
	return g.lost
}

func closeGuardConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// runExclusive runs run while the polling relay holds its guard, having
// dropped a WAL slot left behind.
func (r *Relay) runExclusive(ctx context.Context, run func(context.Context) error) error {
	e := &exclusion{pool: r.pool, cfg: r.cfg, mode: modePoll, log: r.log, taken: r.retireWAL}
	return e.run(ctx, run)
}

// retireWAL drops the replication slots that WAL relays streamed this
// table from (the slots named in its reader table) and that still exist in
// this database, on the guard's connection. The polling relay holds its
// mode, so no WAL relay runs against the table, and a slot nobody reads
// keeps the server's WAL from its position on. The publication stays: it
// costs nothing without a slot (DropWAL drops both). A failure is logged:
// the relay polls all the same.
func (r *Relay) retireWAL(ctx context.Context, conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.LeaseTTL)
	defer cancel()
	rows, err := conn.Query(cctx, `SELECT s.slot_name FROM pg_replication_slots s
		JOIN `+pgx.Identifier{r.cfg.Table + "_wal_readers"}.Sanitize()+` w ON w.slot = s.slot_name
		WHERE s.database = current_database()`)
	var slots []string
	if err == nil {
		slots, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	for _, slot := range slots {
		if err != nil {
			break
		}
		r.log.WarnContext(ctx, "dropping a WAL relay's replication slot: no WAL relay runs against the table, and a slot nobody reads keeps the server's WAL",
			"slot", slot)
		_, err = conn.Exec(cctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE slot_name = $1 AND database = current_database()`, slot)
	}
	if err != nil && ctx.Err() == nil {
		r.metrics.relayErrors.Inc()
		r.log.ErrorContext(ctx, "retiring the WAL relay's slots failed; drop them as a role with REPLICATION (SELECT pg_drop_replication_slot(…))",
			"slots", slots, "error", err)
	}
}

// runExclusive runs run while the WAL relay holds its guard, once the slot
// is set up: SetupWAL runs only when no polling relay runs, so the
// hand-over it records covers what they left pending. Ready reports the
// wait and a failing setup.
func (r *WALRelay) runExclusive(ctx context.Context, run func(context.Context) error) error {
	e := &exclusion{pool: r.pool, cfg: r.cfg, mode: modeWAL, log: r.log, notHeld: r.health.set}
	return e.run(ctx, func(ctx context.Context) error {
		if !r.setup(ctx) {
			return nil
		}
		return run(ctx)
	})
}

// setup runs SetupWAL until it succeeds (false: ctx ended first), retrying
// every PollInterval.
func (r *WALRelay) setup(ctx context.Context) bool {
	for {
		err := setupWAL(ctx, r.pool, r.cfg)
		if err == nil {
			r.health.set(nil)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		r.health.set(err)
		r.metrics.relayErrors.Inc()
		r.log.ErrorContext(ctx, "setting up the slot failed; retrying", "error", err)
		pause(ctx, r.cfg.PollInterval)
	}
}
