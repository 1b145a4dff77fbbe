package chaosrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The WAL relay's own faults: its replication slot dropped (or dropped and
// created again behind its back), its publication losing the outbox table
// for a while, an event it cannot publish among the others, and a rolling
// switch between the relay modes. They run on the local target in WAL mode
// (--relay-mode wal): they reach PostgreSQL as its superuser and start and
// stop relays of their own.

// walControl is what these scenarios need of the target beyond the
// admin APIs; the local target's deployments have it (localServers).
type walControl interface {
	startRelay(ctx context.Context, mode string) (*Process, error)
	stopRelay(p *Process) error
	restarts(p *Process) int
	superuserURL(dbURL string) (string, error)
	walSlot() string
}

// walRecoveryLimit bounds how long a scenario waits for the relays to
// publish what the fault held back; the scenario fails past it.
const walRecoveryLimit = 2 * time.Minute

func walControlOf(d *Deployment) (walControl, error) {
	if c, ok := d.servers.(walControl); ok && c.walSlot() != "" {
		return c, nil
	}
	return nil, errors.New("needs the local target in WAL mode (--target local --relay-mode wal): it drives the slot as PostgreSQL's superuser and starts relays")
}

// superuserConn connects to the deployment's orders database as the
// server's superuser.
func superuserConn(ctx context.Context, c walControl, d *Deployment) (*pgx.Conn, error) {
	u, err := c.superuserURL(d.Src.OrdersURL)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("connecting to the orders database as the superuser: %w", err)
	}
	return conn, nil
}

// underWALLoad is how the slot and publication scenarios start: load of
// seed, a relay streaming the slot, and a superuser connection to the
// orders database. done closes the connection, then stops the load.
func underWALLoad(ctx context.Context, d *Deployment, seed uint64) (c walControl, reader *Process, conn *pgx.Conn, done func(), err error) {
	if c, err = walControlOf(d); err != nil {
		return nil, nil, nil, nil, err
	}
	stopLoad := keepLoad(ctx, d, seed)
	if reader, err = awaitStreaming(ctx, d); err == nil {
		conn, err = superuserConn(ctx, c, d)
	}
	if err != nil {
		stopLoad()
		return nil, nil, nil, nil, err
	}
	return c, reader, conn, func() {
		conn.Close(context.WithoutCancel(ctx))
		stopLoad()
	}, nil
}

// awaitStreaming waits until a relay reads the slot and has published
// some of the load, and returns it.
func awaitStreaming(ctx context.Context, d *Deployment) (*Process, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		reader, err := d.walReader(ctx)
		if err != nil {
			return nil, err
		}
		if n, err := reader.Metric(ctx, "paylab_outbox_published_total"); err == nil && n > 0 {
			return reader, nil
		}
		pause(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no relay streamed the load: %w", ctx.Err())
		}
	}
}

// highWater is the outbox's last id so far, committed or not: rows
// committed later have larger ones. It is the id sequence's, since the WAL
// relay deletes the rows it published.
func highWater(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var id int64
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT s.last_value FROM pg_sequences s
		WHERE format('%I.%I', s.schemaname, s.sequencename) = pg_get_serial_sequence('public.outbox', 'id')), 0)`).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("reading the outbox's id sequence: %w", err)
	}
	return id, nil
}

// awaitRows waits until the outbox's high-water mark passes from+n: n
// payments committed since from.
func awaitRows(ctx context.Context, conn *pgx.Conn, from int64, n int, limit time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		hw, err := highWater(ctx, conn)
		if err == nil && hw >= from+int64(n) {
			return hw, nil
		}
		pause(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return hw, fmt.Errorf("fewer than %d outbox rows committed in %s", n, limit)
		}
	}
}

// awaitPublished waits until no outbox row up to id is pending (neither
// published nor parked), at most limit; on failure it says how many are.
func awaitPublished(ctx context.Context, conn *pgx.Conn, id int64, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	left := -1
	for {
		err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id <= $1 AND dispatched_at IS NULL AND parked_at IS NULL`, id).Scan(&left)
		if err == nil && left == 0 {
			return nil
		}
		pause(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("%d outbox rows up to id %d still pending after %s", left, id, limit)
		}
	}
}

// slotExists reports whether the replication slot exists.
func slotExists(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&ok)
	return ok, err
}

// dropSlotUnderReader drops the slot its reader streams, as an operator (or
// a failover to a server without it) would: it ends the walsender that
// holds the slot (pg_terminate_backend), then drops the slot, again until
// the drop wins the race with the reader's reconnection.
func dropSlotUnderReader(ctx context.Context, conn *pgx.Conn, slot string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
			WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot); err != nil {
			return fmt.Errorf("ending the walsender of slot %s: %w", slot, err)
		}
		_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "55006": // still active: the walsender is going
		default:
			return fmt.Errorf("dropping slot %s: %w", slot, err)
		}
		pause(ctx, 10*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("slot %s stayed in use: %w", slot, err)
		}
	}
}

// swept sums the relays' wal_swept_total: events the stream had passed and
// the sweep found still pending.
func (d *Deployment) swept(ctx context.Context) float64 {
	var n float64
	for _, r := range d.Relays {
		v, _ := r.Metric(ctx, "paylab_outbox_wal_swept_total")
		n += v
	}
	return n
}

// walSlotDropped drops the slot under its reader while payments flow: the
// walsender is ended and the slot dropped, as a failover to a server
// without it, or an operator, would. The reader must notice, create the
// slot again and hand over what the new slot cannot stream: everything
// pending, and everything committed while no slot existed, is published.
func walSlotDropped(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	c, reader, conn, done, err := underWALLoad(ctx, d, 91)
	if err != nil {
		return "", 0, err
	}
	defer done()
	ready := watchReadiness(ctx, d.Relays)
	defer ready.stop()
	if err := dropSlotUnderReader(ctx, conn, c.walSlot()); err != nil {
		return "", 0, err
	}
	dropped := time.Now()
	d.mark("slot dropped")
	// Wait for the slot to come back, then for everything committed until
	// then — the gap no slot recorded — to be published.
	back, err := awaitSlot(ctx, conn, c.walSlot(), walRecoveryLimit)
	if err != nil {
		return "", 0, fmt.Errorf("slot %s dropped under %s: not created again within %s; %s", c.walSlot(), reader.Name, walRecoveryLimit, ready.stop())
	}
	hw, err := highWater(ctx, conn)
	if err != nil {
		return "", 0, err
	}
	if err := awaitPublished(ctx, conn, hw, walRecoveryLimit); err != nil {
		return "", 0, fmt.Errorf("slot %s dropped under %s and back after %s: %w; %s", c.walSlot(), reader.Name, back.Sub(dropped).Round(10*time.Millisecond), err, ready.stop())
	}
	recovered := time.Since(dropped)
	d.markEnd("everything committed meanwhile published")
	return fmt.Sprintf("slot %s dropped under %s (the reader): back after %s, everything committed meanwhile published %s after the drop; %s",
		c.walSlot(), reader.Name, back.Sub(dropped).Round(10*time.Millisecond), recovered.Round(10*time.Millisecond), ready.stop()), recovered, nil
}

// awaitSlot waits until the slot exists, at most limit, and returns when
// it was seen.
func awaitSlot(ctx context.Context, conn *pgx.Conn, slot string, limit time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if ok, err := slotExists(ctx, conn, slot); err == nil && ok {
			return time.Now(), nil
		}
		pause(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
}

// walSlotRecreated drops the slot and creates it again behind the reader's
// back, as a restore or a careless operator would: the reader is frozen
// (SIGSTOP) for the moment, its walsender ended and the slot dropped;
// payments commit while no slot exists; then the superuser creates the slot
// (pg_create_logical_replication_slot, no hand-over recorded) and the
// reader is woken. The new slot streams only what commits after it: what
// was committed in the gap, and what the old slot had streamed but the
// reader not yet recorded, must still be published.
func walSlotRecreated(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	c, reader, conn, done, err := underWALLoad(ctx, d, 90)
	if err != nil {
		return "", 0, err
	}
	defer done()
	sweptBefore := d.swept(ctx)
	_, wake, err := reader.freeze(d)
	if err != nil {
		return "", 0, err
	}
	defer wake()
	if err := dropSlotUnderReader(ctx, conn, c.walSlot()); err != nil {
		return "", 0, err
	}
	dropped := time.Now()
	d.mark("slot dropped")
	from, err := highWater(ctx, conn)
	if err != nil {
		return "", 0, err
	}
	gapEnd, err := awaitRows(ctx, conn, from, 20, 30*time.Second)
	if err != nil {
		return "", 0, fmt.Errorf("while the slot was gone: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, c.walSlot()); err != nil {
		return "", 0, fmt.Errorf("creating slot %s again: %w", c.walSlot(), err)
	}
	d.mark("slot created again by the superuser")
	if err := wake(); err != nil {
		return "", 0, err
	}
	hw, err := highWater(ctx, conn)
	if err != nil {
		return "", 0, err
	}
	if err := awaitPublished(ctx, conn, hw, walRecoveryLimit); err != nil {
		return "", 0, fmt.Errorf("slot %s dropped and created again under %s, at least %d payments committed in between: %w",
			c.walSlot(), reader.Name, gapEnd-from, err)
	}
	recovered := time.Since(dropped)
	d.markEnd("the gap published")
	return fmt.Sprintf("slot %s dropped and created again by the superuser under %s (frozen meanwhile), at least %d outbox rows committed in between: all published %s after the drop; %.0f events published again by the sweep",
		c.walSlot(), reader.Name, gapEnd-from, recovered.Round(10*time.Millisecond), d.swept(ctx)-sweptBefore), recovered, nil
}

// walDriftHold is how long the publication goes without the outbox table.
const walDriftHold = 5 * time.Second

// walPublicationDrift removes the outbox table from the relay's
// publication under load, for walDriftHold and until payments committed
// meanwhile, then adds it back (ALTER PUBLICATION … DROP TABLE / ADD
// TABLE). The inserts committed meanwhile are in no stream: they must
// still be published. The note says whether the relays reported not ready
// while the reader could not stream.
func walPublicationDrift(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	_, reader, conn, done, err := underWALLoad(ctx, d, 89)
	if err != nil {
		return "", 0, err
	}
	defer done()
	var pubs []string
	rows, err := conn.Query(ctx, `SELECT pubname FROM pg_publication_tables WHERE schemaname = 'public' AND tablename = 'outbox'`)
	if err == nil {
		pubs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return "", 0, fmt.Errorf("finding the relay's publication: %w", err)
	}
	if len(pubs) != 1 {
		return "", 0, fmt.Errorf("the outbox is in %d publications %v, want the relay's one", len(pubs), pubs)
	}
	pub := pgx.Identifier{pubs[0]}.Sanitize()
	ready := watchReadiness(ctx, d.Relays)
	defer ready.stop()
	if _, err := conn.Exec(ctx, `ALTER PUBLICATION `+pub+` DROP TABLE public.outbox`); err != nil {
		return "", 0, fmt.Errorf("removing the outbox from %s: %w", pub, err)
	}
	removed := time.Now()
	d.mark("outbox removed from the publication")
	restore := func() error {
		_, err := conn.Exec(context.WithoutCancel(ctx), `ALTER PUBLICATION `+pub+` ADD TABLE public.outbox`)
		return err
	}
	from, err := highWater(ctx, conn)
	if err == nil {
		_, err = awaitRows(ctx, conn, from, 20, 30*time.Second)
	}
	pause(ctx, time.Until(removed.Add(walDriftHold)))
	if err != nil {
		return "", 0, errors.Join(fmt.Errorf("while the outbox was out of the publication: %w", err), restore())
	}
	if err := restore(); err != nil {
		return "", 0, fmt.Errorf("adding the outbox back to %s: %w", pub, err)
	}
	restored := time.Now()
	drift := restored.Sub(removed)
	d.markEnd("outbox back in the publication")
	hw, err := highWater(ctx, conn)
	if err != nil {
		return "", 0, err
	}
	if err := awaitPublished(ctx, conn, hw, walRecoveryLimit); err != nil {
		return "", 0, fmt.Errorf("the outbox out of publication %s for %s under %s: %w; %s", pubs[0], drift.Round(100*time.Millisecond), reader.Name, err, ready.stop())
	}
	recovered := time.Since(restored)
	d.markEnd("everything committed meanwhile published")
	return fmt.Sprintf("the outbox out of publication %s for %s under %s (the reader); everything committed meanwhile published %s after it was back; %s",
		pubs[0], drift.Round(100*time.Millisecond), reader.Name, recovered.Round(10*time.Millisecond), ready.stop()), recovered, nil
}

// readinessWatch probes processes' /readyz every 100 ms and records how
// long each answered not ready, and why.
type readinessWatch struct {
	mu      sync.Mutex
	down    map[string]time.Duration
	reasons map[string]string // the first reason each gave
	order   []string
	once    sync.Once
	summary string
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchReadiness(ctx context.Context, ps []*Process) *readinessWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &readinessWatch{down: map[string]time.Duration{}, reasons: map[string]string{}, cancel: cancel, done: make(chan struct{})}
	ps = slices.Clone(ps)
	go func() {
		defer close(w.done)
		client := &http.Client{Timeout: time.Second}
		last := time.Now()
		for ctx.Err() == nil {
			pause(ctx, 100*time.Millisecond)
			now := time.Now()
			for _, p := range ps {
				if reason, ok := notReady(ctx, client, p); ok {
					w.note(p.Name, now.Sub(last), reason)
				}
			}
			last = now
		}
	}()
	return w
}

// notReady probes p once: whether it answered not ready, and its reason.
// A process that does not answer is not counted.
func notReady(ctx context.Context, client *http.Client, p *Process) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Admin+"/readyz", nil)
	if err != nil {
		return "", false
	}
	res, err := client.Do(req)
	if err != nil {
		return "", false
	}
	defer res.Body.Close()
	if res.StatusCode/100 == 2 {
		return "", false
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	var checks map[string]string
	if json.Unmarshal(body, &checks) == nil {
		var failed []string
		for name, v := range checks {
			if v != "ok" {
				failed = append(failed, name+": "+v)
			}
		}
		slices.Sort(failed)
		return strings.Join(failed, "; "), true
	}
	return res.Status, true
}

func (w *readinessWatch) note(name string, d time.Duration, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.down[name]; !seen {
		w.order = append(w.order, name)
		w.reasons[name] = reason
	}
	w.down[name] += d
}

// stop ends the watch and describes what it saw; it may be called again.
func (w *readinessWatch) stop() string {
	w.once.Do(func() {
		w.cancel()
		<-w.done
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.order) == 0 {
			w.summary = "no relay reported not ready"
			return
		}
		var parts []string
		for _, name := range w.order {
			parts = append(parts, fmt.Sprintf("%s not ready for %s (%s)", name, w.down[name].Round(100*time.Millisecond), truncate(w.reasons[name], 160)))
		}
		w.summary = strings.Join(parts, ", ")
	})
	return w.summary
}
