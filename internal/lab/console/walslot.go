package console

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// walSlot reads the WAL relays' reader lease (outbox_wal_readers, one row
// per slot) and their replication slot (pg_replication_slots) from the
// orders database: the row whose lease runs, else the newest (a slot
// renamed with RELAY_SLOT leaves its old row behind). Before a relay has
// set the slot up there is no row, and st.WAL says so with an empty Slot.
func (c *collector) walSlot(ctx context.Context, st *State, probs *problems) {
	v := &WALView{}
	err := c.pools["orders"].QueryRow(ctx, `
		SELECT r.slot, COALESCE(r.owner, ''),
		       COALESCE(EXTRACT(EPOCH FROM r.leased_until - now()), 0)::float8,
		       s.slot_name IS NOT NULL, COALESCE(s.active, false), COALESCE(s.wal_status, ''),
		       COALESCE(s.confirmed_flush_lsn::text, ''), COALESCE(s.restart_lsn::text, ''),
		       COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn), 0)::bigint,
		       COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn), 0)::bigint,
		       s.safe_wal_size
		FROM outbox_wal_readers r
		LEFT JOIN pg_replication_slots s ON s.slot_name = r.slot AND s.database = current_database()
		ORDER BY COALESCE(r.owner IS NOT NULL AND r.leased_until > now(), false) DESC, r.created_at DESC
		LIMIT 1`).Scan(&v.Slot, &v.Owner, &v.LeaseLeft, &v.Exists, &v.Active, &v.WALStatus,
		&v.ConfirmedLSN, &v.RestartLSN, &v.LagBytes, &v.RetainedBytes, &v.SafeBytes)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		v = &WALView{}
	case err != nil:
		probs.add("the replication slot could not be read", err)
		return
	}
	st.WAL = v
	if v.WALStatus == "lost" {
		probs.add(fmt.Sprintf("replication slot %s is lost: it fell more than max_slot_wal_keep_size behind and PostgreSQL removed "+
			"the WAL it needed; the reading relay drops it, creates it again and hands over the events still pending "+
			"(if this stays, no relay reads it: see the relays card)", v.Slot), errors.New("wal_status lost"))
	}
}
