package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// walBatch is a run of streamed events handed from the reader to the
// publisher, in commit order: whole transactions, except that a transaction
// larger than the batch size spans several batches.
type walBatch struct {
	events []walEvent
	endLSN pglogrepl.LSN // end of the last transaction completed in this batch; 0 if none
	// open: the batch may hold events whose commit position is not known —
	// of a transaction still being streamed, or read from the table — so
	// the standby guard waits for the primary's WAL end instead.
	open bool
}

const (
	walIdleWake    = time.Second            // reader wake-up when nothing arrives: status updates
	walLinger      = 5 * time.Millisecond   // how long a partial batch waits for a busy publisher before retrying the hand-off
	walStatusEvery = 200 * time.Millisecond // at most this often, a status update for an advanced position
	walStatusMax   = 10 * time.Second       // at least this often, a status update (well within wal_sender_timeout)
)

// serve runs the reader while the lease (lctx) is held and ctx lasts:
// before each stream, the slot is made usable and, for a slot generation
// not handed over for yet, the events that predate it are published from
// the table; then the stream, opened again whenever it breaks. While the
// slot cannot be streamed (missing and not creatable, invalidated, the
// publication wrong), the reader publishes what is pending from the table
// instead, every PollInterval, and says so.
func (r *WALRelay) serve(ctx, lctx context.Context) {
	both, cancel := context.WithCancel(lctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	defer r.wal.fallback.Set(0)
	r.held.reset()
	rs := &readerState{generation: -1}
	for {
		err := r.prepare(ctx, lctx, rs)
		if err == nil {
			err = r.stream(ctx, lctx, rs)
		}
		// ctx and lctx, not both: both ends a moment after them.
		if ctx.Err() != nil || lctx.Err() != nil {
			if err != nil && ctx.Err() == nil {
				r.log.WarnContext(context.WithoutCancel(ctx), "the stream ended with an error", "error", err)
			}
			return
		}
		if errors.Is(err, errSlotChanged) {
			r.log.WarnContext(ctx, "the slot was created again since the last hand-over; handing over before streaming it")
			continue
		}
		r.health.set(err)
		r.wal.reconnects.Inc()
		switch {
		case slotInUse(err):
			// Not ours yet: the previous reader's walsender still holds the
			// slot (PostgreSQL allows one consumer per slot). It goes when
			// its connection does.
			r.log.InfoContext(ctx, "the slot is still in use by the previous reader's connection; waiting", "error", err)
		case errors.Is(err, errPublication) || errors.Is(err, errSlotUnusable):
			r.metrics.relayErrors.Inc()
			r.log.ErrorContext(ctx, "the slot cannot be streamed; publishing from the table until it can", "error", err)
			r.wal.fallback.Set(1)
			if ferr := r.publishFromTable(ctx, lctx, rs); ferr != nil && ctx.Err() == nil && lctx.Err() == nil {
				r.log.ErrorContext(ctx, "publishing from the table failed", "error", ferr)
			}
		default:
			r.metrics.relayErrors.Inc()
			r.log.ErrorContext(ctx, "the replication stream broke; reconnecting", "error", err)
		}
		pause(both, r.cfg.PollInterval)
	}
}

// readerState is what a reader keeps across its streams while it holds
// the lease.
type readerState struct {
	generation int64 // the slot generation handed over for; -1 for none yet
	parked     map[aggKey]bool
}

var (
	// errSlotChanged: the slot attached to is of a generation not handed
	// over for (created again since); the stream is closed, the hand-over
	// runs, and the stream is opened again.
	errSlotChanged = errors.New("the slot's generation changed")
	// errSlotUnusable: the slot is missing and cannot be created, or is
	// invalidated and cannot be replaced.
	errSlotUnusable = errors.New("the replication slot cannot be used")
)

// prepare makes the slot usable (creating it, or replacing an invalidated
// one, with the hand-over protocol: see ensureSlot) and runs the hand-over
// of its generation if this reader has not run it yet.
func (r *WALRelay) prepare(ctx, lctx context.Context, rs *readerState) error {
	err := withSetupLock(lctx, r.pool, r.cfg, func(conn *pgxpool.Conn, q *outboxdb.Queries) error {
		return ensureSlot(lctx, conn, q, r.cfg, true)
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errSlotUnusable, err)
	}
	state, err := r.queries.WALReaderState(lctx, r.cfg.Slot)
	if err != nil {
		return fmt.Errorf("reading the slot's generation: %w", err)
	}
	if rs.parked, err = r.parkedAggregates(lctx); err != nil {
		return err
	}
	if state.SlotGeneration == rs.generation {
		return nil
	}
	if err := r.handover(ctx, lctx, state.HandoverMaxID, state.HandoverBefore, rs.parked); err != nil {
		return err
	}
	rs.generation = state.SlotGeneration
	return nil
}

// attached checks, once the stream is attached to the slot, that the slot
// is of the generation handed over for: one created again between prepare
// and the attach starts after events that only a hand-over publishes.
func (r *WALRelay) attached(ctx context.Context, rs *readerState) error {
	state, err := r.queries.WALReaderState(ctx, r.cfg.Slot)
	if err != nil {
		return fmt.Errorf("reading the slot's generation: %w", err)
	}
	if state.HandoverDue || state.SlotGeneration != rs.generation {
		return errSlotChanged
	}
	return nil
}

// publishFromTable publishes every event pending now from the table, as the
// hand-over does, while the slot cannot be streamed.
func (r *WALRelay) publishFromTable(ctx, lctx context.Context, rs *readerState) error {
	b, err := r.queries.WALTableBounds(lctx)
	if err != nil {
		return fmt.Errorf("reading the pending events' bounds: %w", err)
	}
	if rs.parked == nil {
		if rs.parked, err = r.parkedAggregates(lctx); err != nil {
			return err
		}
	}
	if err := r.retryHeld(lctx, rs.parked); err != nil {
		return err
	}
	return r.handover(ctx, lctx, b.MaxID, b.Before, rs.parked)
}

// stream reads the slot from its confirmed position and publishes what it
// reads, until ctx ends (clean stop: the batch being published is
// finished, and its position confirmed), the lease is lost (lctx: stop at
// once) or the connection breaks. Three stages: this goroutine reads and
// decodes, one publishes batches in order, one marks them dispatched and
// advances the position that the reader reports to the server.
func (r *WALRelay) stream(ctx, lctx context.Context, rs *readerState) (err error) {
	parked := rs.parked
	rctx, stopReading := context.WithCancel(lctx)
	defer stopReading()
	defer context.AfterFunc(ctx, stopReading)()

	table, err := r.checkPublication(rctx)
	if err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(rctx, r.repl)
	if err != nil {
		return fmt.Errorf("opening the replication connection: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	err = pglogrepl.StartReplication(rctx, conn, r.cfg.Slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", r.cfg.Publication),
			"binary 'true'"},
	})
	if err != nil {
		if missingOrInvalid(err) {
			err = fmt.Errorf("%w: %w", errSlotUnusable, err)
		}
		return fmt.Errorf("starting replication from slot %s: %w", r.cfg.Slot, err)
	}
	if err := r.attached(rctx, rs); err != nil {
		return err
	}
	r.wal.fallback.Set(0)

	var (
		confirmed atomic.Uint64 // end of the last transaction published and marked
		inflight  atomic.Int64  // batches handed to the publisher and not yet confirmed
		pubCh     = make(chan *walBatch)
		free      = make(chan *walBatch, 2) // batches marked, for the reader to fill again
		markCh    = make(chan *walBatch, 1)
		wg        sync.WaitGroup
		pubErr    error
		markErr   error
	)
	// drain ends when the reader stops: the publisher finishes the attempt
	// in progress but retries no more.
	drain, stopDrain := context.WithCancel(context.Background())
	defer stopDrain()
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(markCh)
		retry := time.NewTicker(r.cfg.RetryBackoff)
		defer retry.Stop()
		for {
			var b *walBatch
			open := true
			select {
			case b, open = <-pubCh:
			case <-retry.C:
			}
			if !open {
				return
			}
			// Held events whose retry is due go first (walheld.go).
			if err := r.retryHeld(lctx, parked); err != nil && lctx.Err() == nil {
				r.metrics.relayErrors.Inc()
				r.log.ErrorContext(lctx, "retrying the held events failed", "error", err)
			}
			if b == nil {
				continue
			}
			// No phantoms: the events go once the synchronous standbys
			// have their commits (walguard.go). The reader meanwhile reads
			// on and keeps reporting its (unchanged) confirmed position.
			var err error
			if len(b.events) > 0 {
				err = r.guard.wait(lctx, drain, b.endLSN, b.open)
			}
			if err == nil {
				err = r.resolve(lctx, drain, b.events, parked)
			}
			if err != nil {
				pubErr = err
				stopReading()
				for range pubCh { //nolint:revive // discard what the reader still hands over
				}
				return
			}
			if err := r.cfg.Hooks.afterPublishBeforeMark(context.WithoutCancel(lctx)); err != nil {
				pubErr = fmt.Errorf("after publish, before mark: %w", err)
				stopReading()
				for range pubCh { //nolint:revive // discard what the reader still hands over
				}
				return
			}
			markCh <- b
		}
	}()
	go func() {
		defer wg.Done()
		for b := range markCh {
			if err := r.markWithRetry(lctx, drain, b.events); err != nil {
				markErr = err
				stopReading()
				for range markCh { //nolint:revive // unconfirmed: streamed again
				}
				return
			}
			if b.endLSN > 0 {
				confirmed.Store(uint64(b.endLSN))
			}
			inflight.Add(-1)
			recycle(free, b)
		}
	}()

	rd := &walReader{r: r, conn: conn, rctx: rctx, pubCh: pubCh, confirmed: &confirmed, inflight: &inflight,
		free: free, dec: newWALDecoder(table), batch: r.newBatch(nil), lastStatus: time.Now(), checkedAt: time.Now()}
	r.health.set(nil)
	readErr := rd.run()
	stopDrain()
	close(pubCh)
	wg.Wait()
	if readErr == nil && lctx.Err() == nil {
		// The reader stopped (a stop, or the publisher or the marks gave
		// up) with the connection sound and the lease held: report the
		// final position — the end of what was published and marked, so
		// always safe — and wait until the server has it, so the next
		// reader starts after it instead of after the last periodic status.
		if err := rd.finalStatus(); err != nil {
			r.log.WarnContext(context.WithoutCancel(ctx), "confirming the final position failed; the next reader re-publishes from the last one", "error", err)
		}
	}
	return errors.Join(readErr, pubErr, markErr)
}

// newBatch returns an empty batch: one from free, marked and no longer
// used, if there is one, or a new one with room for a full batch (up to
// walBatchRoom events), so that appending never copies the events.
func (r *WALRelay) newBatch(free <-chan *walBatch) *walBatch {
	select {
	case b := <-free:
		return b
	default:
		return &walBatch{events: make([]walEvent, 0, min(r.cfg.BatchSize, walBatchRoom))}
	}
}

// walBatchRoom bounds the room a new batch is given.
const walBatchRoom = 8192

// recycle empties a marked batch (so it keeps nothing of its events alive)
// and keeps it in free for the reader, unless free is full.
func recycle(free chan<- *walBatch, b *walBatch) {
	clear(b.events)
	*b = walBatch{events: b.events[:0]}
	select {
	case free <- b:
	default:
	}
}

// walReader is the reading stage of one stream.
type walReader struct {
	r         *WALRelay
	conn      *pgconn.PgConn
	rctx      context.Context
	pubCh     chan<- *walBatch
	free      <-chan *walBatch // marked batches, to fill again
	confirmed *atomic.Uint64
	inflight  *atomic.Int64
	dec       *walDecoder
	batch     *walBatch
	inTx      bool
	xid       uint32 // the transaction being received

	idle       pglogrepl.LSN // position confirmable while nothing is pending (keepalives, transactions without events)
	flushed    pglogrepl.LSN // position last reported
	lastStatus time.Time

	checkedAt time.Time // the last check of the publication

	sweptAt  time.Time     // the last sweep (see sweep)
	sweepLSN pglogrepl.LSN // the WAL position of the sweep's mark; 0 for none
	sweepIDs []int64       // the pending events the mark listed
}

// position is what may be reported as flushed: the end of the last
// transaction whose events were all acknowledged and marked or, when
// nothing is pending at all, the server's position from its keepalives.
func (rd *walReader) position() pglogrepl.LSN {
	pos := pglogrepl.LSN(rd.confirmed.Load())
	if rd.inflight.Load() == 0 && !rd.inTx && len(rd.batch.events) == 0 && rd.batch.endLSN == 0 {
		pos = lsnMax(pos, rd.idle)
	}
	return lsnMax(pos, rd.flushed)
}

func (rd *walReader) sendStatus(reply bool) error {
	pos := rd.position()
	err := pglogrepl.SendStandbyStatusUpdate(rd.rctx, rd.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos, ReplyRequested: reply,
	})
	if err != nil {
		return fmt.Errorf("sending the standby status: %w", err)
	}
	rd.flushed, rd.lastStatus = pos, time.Now()
	return nil
}

// maybeStatus reports an advanced position at most every walStatusEvery,
// and the position anyway every walStatusMax.
func (rd *walReader) maybeStatus() error {
	since := time.Since(rd.lastStatus)
	if (since >= walStatusEvery && rd.position() != rd.flushed) || since >= walStatusMax {
		return rd.sendStatus(false)
	}
	return nil
}

func (rd *walReader) pending() bool { return len(rd.batch.events) > 0 || rd.batch.endLSN > 0 }

// handoff gives the batch to the publisher: at once if it is idle, or, with
// block, waiting for it (and still reporting status, so the server does not
// time the connection out while the broker is slow). It returns false when
// the batch was kept.
func (rd *walReader) handoff(block bool) bool {
	b := rd.batch
	// Handed over inside a transaction, the batch ends with events whose
	// commit has not been streamed yet (kept as it was if not handed over).
	wasOpen := b.open
	b.open = wasOpen || rd.inTx
	n := len(b.events) // b is the publisher's once handed over, then recycled
	rd.inflight.Add(1)
	if !block {
		select {
		case rd.pubCh <- b:
		default:
			rd.inflight.Add(-1)
			b.open = wasOpen
			return false
		}
	} else {
		t := time.NewTicker(walIdleWake)
		defer t.Stop()
	wait:
		for {
			select {
			case rd.pubCh <- b:
				break wait
			case <-t.C:
				if err := rd.maybeStatus(); err != nil {
					rd.r.log.WarnContext(rd.rctx, "status update failed while the publisher is busy", "error", err)
				}
			case <-rd.rctx.Done():
				rd.inflight.Add(-1)
				b.open = wasOpen
				return false
			}
		}
	}
	if n > 0 {
		rd.r.metrics.batchSize.Observe(float64(n))
	}
	rd.batch = rd.r.newBatch(rd.free)
	return true
}

// run reads until rctx ends (nil) or the stream fails. Its wake-ups are
// read deadlines on the connection rather than a context per receive,
// which pgconn would watch, at a few allocations per message; the end of
// rctx sets a deadline too. The connection has no read deadline after run.
func (rd *walReader) run() error {
	nc := rd.conn.Conn()
	var (
		mu       sync.Mutex // orders the end of rctx against the wake-ups and the return
		stopped  bool       // rctx ended: the deadline stays in the past
		returned bool
		deadline time.Time
	)
	stopWatch := context.AfterFunc(rd.rctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !returned {
			stopped = true
			_ = nc.SetReadDeadline(time.Now())
		}
	})
	defer func() {
		stopWatch()
		mu.Lock()
		defer mu.Unlock()
		returned = true
		_ = nc.SetReadDeadline(time.Time{})
	}()
	wake := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		deadline = time.Now().Add(d)
		if !stopped {
			_ = nc.SetReadDeadline(deadline)
		}
	}
	wake(walIdleWake)
	for {
		msg, err := rd.conn.ReceiveMessage(context.Background())
		if err != nil {
			if rd.rctx.Err() != nil {
				return nil
			}
			if !pgconn.Timeout(err) {
				return fmt.Errorf("receiving from the replication stream: %w", err)
			}
			// The wake-up: hand a waiting batch over, report progress.
			if rd.pending() {
				rd.handoff(false)
			}
			if err := rd.maybeStatus(); err != nil {
				return err
			}
			if err := rd.recheck(); err != nil {
				return err
			}
			if err := rd.sweep(); err != nil && rd.rctx.Err() == nil {
				rd.r.log.WarnContext(rd.rctx, "the sweep failed; it runs again later", "error", err)
			}
			if rd.pending() {
				wake(walLinger)
			} else {
				wake(walIdleWake)
			}
			continue
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if err := rd.copyData(msg.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return pgconn.ErrorResponseToPgError(msg)
		case *pgproto3.CopyDone:
			return errors.New("the server ended the replication stream")
		default:
			return fmt.Errorf("unexpected replication message %T", msg)
		}
		if rd.pending() && time.Until(deadline) > walLinger {
			wake(walLinger)
		}
		if err := rd.maybeStatus(); err != nil {
			return err
		}
	}
}

func (rd *walReader) copyData(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parsing a keepalive: %w", err)
		}
		rd.idle = lsnMax(rd.idle, pkm.ServerWALEnd)
		if pkm.ReplyRequested {
			return rd.sendStatus(false)
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parsing WAL data: %w", err)
		}
		if len(xld.WALData) > 0 && xld.WALData[0] == byte(pglogrepl.MessageTypeInsert) {
			return rd.insert(xld.WALData[1:]) // most messages: decoded in place
		}
		m, err := pglogrepl.Parse(xld.WALData)
		if err != nil {
			return fmt.Errorf("decoding a pgoutput message: %w", err)
		}
		return rd.message(m)
	}
	return nil
}

func (rd *walReader) message(m pglogrepl.Message) error {
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		return rd.dec.relation(m)
	case *pglogrepl.BeginMessage:
		rd.inTx, rd.xid = true, m.Xid
	case *pglogrepl.CommitMessage:
		rd.inTx = false
		if rd.pending() || rd.inflight.Load() > 0 {
			rd.batch.endLSN = m.TransactionEndLSN
			rd.handoff(false)
		} else {
			rd.idle = lsnMax(rd.idle, m.TransactionEndLSN)
		}
	}
	return nil
}

// insert takes an Insert message (after its type byte) into the batch if
// it is an outbox event.
func (rd *walReader) insert(src []byte) error {
	e, ok, err := rd.dec.insert(src)
	if err != nil {
		return fmt.Errorf("decoding an outbox insert: %w", err)
	}
	if !ok {
		return nil
	}
	e.xid = rd.xid
	rd.batch.events = append(rd.batch.events, e)
	if len(rd.batch.events) >= rd.r.cfg.BatchSize {
		rd.handoff(true)
	}
	return nil
}

// finalStatus reports the confirmed position and waits until the server
// answers, which it does after recording it.
func (rd *walReader) finalStatus() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rd.rctx = ctx
	if err := rd.sendStatus(true); err != nil {
		return err
	}
	for {
		msg, err := rd.conn.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		if cd, ok := msg.(*pgproto3.CopyData); ok && len(cd.Data) > 0 && cd.Data[0] == pglogrepl.PrimaryKeepaliveMessageByteID {
			return nil
		}
	}
}

// recheck checks the publication again every StatsInterval: one that
// changed under a running stream ends it, with the reason.
func (rd *walReader) recheck() error {
	if time.Since(rd.checkedAt) < rd.r.cfg.StatsInterval {
		return nil
	}
	rd.checkedAt = time.Now()
	t, err := rd.r.checkPublication(rd.rctx)
	if rd.rctx.Err() != nil {
		return nil
	}
	if err == nil && t != rd.dec.table {
		err = fmt.Errorf("%w: the outbox table is %s now, the stream decodes %s", errPublication, t, rd.dec.table)
	}
	return err
}
