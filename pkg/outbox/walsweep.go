package outbox

import (
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// walSweepRows bounds how many pending events one sweep mark lists: the
// oldest, which are the ones that can have been lost.
const walSweepRows = 1000

// sweep is the reader's check that the table and the stream agree, every
// StatsInterval. It lists the oldest pending events together with the WAL
// position (a mark); once the stream's confirmed position has passed the
// mark, every event listed was streamed and recorded, and one still pending
// was lost on the way (a slot recreated without a hand-over, say). Those are
// published again, behind what the reader has read, and counted in
// <prefix>_wal_swept_total, which should stay at 0: the table stays the
// source of truth whatever happened to the slot.
func (rd *walReader) sweep() error {
	if rd.inTx || time.Since(rd.sweptAt) < rd.r.cfg.StatsInterval {
		return nil
	}
	rd.sweptAt = time.Now()
	q := rd.r.queries
	if rd.sweepLSN != 0 {
		if rd.position() < rd.sweepLSN {
			return nil // the stream has not reached the mark yet
		}
		var rows []outboxdb.WALSweepEventsRow
		var err error
		if len(rd.sweepIDs) > 0 {
			if rows, err = q.WALSweepEvents(rd.rctx, rd.sweepIDs); err != nil {
				return fmt.Errorf("reading the events a sweep listed: %w", err)
			}
		}
		rd.sweepLSN, rd.sweepIDs = 0, nil
		// Events held aside for a retry are pending on purpose.
		rows = slices.DeleteFunc(rows, func(x outboxdb.WALSweepEventsRow) bool { return rd.r.held.contains(x.ID) })
		if len(rows) > 0 {
			events := make([]walEvent, len(rows))
			for i, x := range rows {
				events[i] = walEventFromHandover(outboxdb.WALHandoverEventsRow(x))
			}
			rd.r.wal.swept.Add(float64(len(events)))
			rd.r.log.WarnContext(rd.rctx, "events the stream passed are still pending; publishing them again",
				"events", len(events), "first_outbox_id", events[0].id, "confirmed", rd.position())
			if rd.pending() && !rd.handoff(true) {
				return nil
			}
			rd.batch = &walBatch{events: events, open: true}
			if !rd.handoff(true) {
				return nil
			}
		}
	}
	m, err := q.WALSweepMark(rd.rctx, walSweepRows)
	if err != nil {
		return fmt.Errorf("marking the pending events for the sweep: %w", err)
	}
	lsn, err := pglogrepl.ParseLSN(m.Lsn)
	if err != nil {
		return fmt.Errorf("parsing the WAL position %q: %w", m.Lsn, err)
	}
	rd.sweepLSN, rd.sweepIDs = lsn, m.Ids
	return nil
}
