package chaosrun

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/chaos"
)

// zombieAudit records, in the deployment's orders database, every row a
// session changes while the row is leased to someone else — marked
// dispatched, or released — other than to claim it: each relay's sessions
// carry its RELAY_ID as application_name, and lease_owner is that name. The
// relays' own fence makes such a write impossible; the audit sees it when
// the fence is off. The trigger runs with its creator's rights (SECURITY
// DEFINER): the relays' runtime role may not write the audit table, and an
// audit that failed their UPDATE would hide the very write it looks for.
const zombieAudit = `
CREATE TABLE IF NOT EXISTS chaos_zombie_writes (
    id bigint, written_by text, holder text, at timestamptz DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION chaos_zombie_write() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.lease_owner IS DISTINCT FROM current_setting('application_name')
       AND NEW.lease_owner IS DISTINCT FROM current_setting('application_name')
       AND (NEW.dispatched_at IS DISTINCT FROM OLD.dispatched_at OR NEW.lease_owner IS DISTINCT FROM OLD.lease_owner) THEN
        INSERT INTO chaos_zombie_writes (id, written_by, holder)
        VALUES (OLD.id, current_setting('application_name'), OLD.lease_owner);
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS chaos_zombie_write ON outbox;
CREATE TRIGGER chaos_zombie_write BEFORE UPDATE ON outbox
    FOR EACH ROW EXECUTE FUNCTION chaos_zombie_write();`

// relayPausedPastLease is the zombie case of every lease scheme. relay-0 is
// frozen (SIGSTOP) holding a leased batch; its lease expires and relay-1
// takes the rows over (held there by a delay, as a slow publish would); then
// relay-0 wakes up (SIGCONT), unaware, publishes its stale batch again and
// tries to record it. Fenced, that record is refused (lease_lost_total) and
// the duplicates it published are absorbed by the inbox; unfenced
// (RELAY_LEASE_FENCING=false), it records (or, its acknowledgements too slow,
// releases) rows relay-1 holds, which the audit trigger counts as zombie
// writes.
func relayPausedPastLease(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	conn, err := pgx.Connect(ctx, d.Src.OrdersURL)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, zombieAudit); err != nil {
		return "", 0, fmt.Errorf("installing the audit trigger: %w", err)
	}
	zombie, taker := d.Relays[0], d.Relays[1]
	defer keepLoad(ctx, d, 96)()
	// A short delay right after each claim holds relay-0 on its lease long
	// enough to freeze it there; it is disarmed once relay-0 is woken.
	if err := zombie.Arm(ctx, "relay.after_lease", chaos.Fault{Action: chaos.Delay, Delay: chaos.Duration(2 * time.Second)}); err != nil {
		return "", 0, err
	}
	if err := zombie.waitFired(ctx, "relay.after_lease"); err != nil {
		return "", 0, fmt.Errorf("%s never leased a batch", zombie.Name)
	}
	stopped, resume, err := zombie.freeze(d)
	if err != nil {
		return "", 0, err
	}
	defer resume()
	var held []int64
	rows, err := conn.Query(ctx, `SELECT id FROM outbox WHERE lease_owner = $1 AND dispatched_at IS NULL`, zombie.Name)
	if err == nil {
		held, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		return "", 0, err
	}
	if len(held) == 0 {
		return "", 0, fmt.Errorf("%s was frozen holding no lease", zombie.Name)
	}
	// relay-1 now sits on whatever it claims for 10 s, as a slow publish
	// would: once relay-0's lease expires, that is relay-0's batch.
	if err := taker.Arm(ctx, "relay.after_lease", chaos.Fault{Action: chaos.Delay, Delay: chaos.Duration(10 * time.Second)}); err != nil {
		return "", 0, err
	}
	for {
		var taken int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id = ANY($1) AND lease_owner = $2 AND dispatched_at IS NULL`,
			held, taker.Name).Scan(&taken)
		if err == nil && taken == len(held) {
			break
		}
		pause(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return "", 0, fmt.Errorf("%s did not take over %s's %d rows", taker.Name, zombie.Name, len(held))
		}
	}
	frozen := time.Since(stopped)
	if err := resume(); err != nil {
		return "", 0, err
	}
	woke := time.Now()
	if err := zombie.chaos.DisarmAll(ctx); err != nil {
		return "", 0, fmt.Errorf("disarming %s: %w", zombie.Name, err)
	}
	// Wait for relay-0's attempt to record its batch: refused (fenced) or
	// written over relay-1's lease (unfenced).
	var lost float64
	var writes int
	for time.Since(woke) < 30*time.Second && ctx.Err() == nil {
		lost, _ = zombie.Metric(ctx, "paylab_outbox_lease_lost_total")
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM chaos_zombie_writes`).Scan(&writes)
		if lost > 0 || writes > 0 {
			break
		}
		pause(ctx, 50*time.Millisecond)
	}
	if err := taker.chaos.DisarmAll(ctx); err != nil {
		return "", 0, fmt.Errorf("disarming %s: %w", taker.Name, err)
	}
	pause(ctx, 10*time.Second) // relay-1's delayed batch completes
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM chaos_zombie_writes`).Scan(&writes)
	d.zombie = writes
	note := fmt.Sprintf("%s frozen %s holding %d leased rows (TTL %s), taken over by %s; woken, it published them again: "+
		"%.0f of its records refused (lease lost), %d rows recorded or released over %s's lease (zombie writes)",
		zombie.Name, frozen.Round(100*time.Millisecond), len(held), d.LeaseTTL, taker.Name, lost, writes, taker.Name)
	if lost == 0 && writes == 0 {
		return note, 0, fmt.Errorf("%s never tried to record its stale batch", zombie.Name)
	}
	return note, time.Since(stopped), nil
}

// ledgerPaused freezes one of two ledger instances (SIGSTOP) in the middle
// of applying a batch — its transaction open, its inbox rows written but not
// committed — past the consumer group's session timeout: the coordinator
// evicts it and its partitions move to the other instance, which meets the
// same events. Woken (SIGCONT), the frozen one commits what it applied: the
// other's attempt must then be skipped as a duplicate by the inbox, and the
// woken one's offset commits, from a stale generation, refused — a committed
// offset going backwards counts as a zombie write.
func ledgerPaused(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	w, stop, err := watchLedgerGroup(ctx, d, 95)
	if err != nil {
		return "", 0, err
	}
	defer stop()
	zombie := d.Ledgers[0]
	duplicates := func() float64 {
		var n float64
		for _, l := range d.Ledgers {
			v, _ := l.Metric(ctx, "paylab_inbox_duplicates_total")
			n += v
		}
		return n
	}
	dupsBefore := duplicates()
	// A delay inside the transaction holds it there long enough to freeze.
	const point = "ledger.after_apply_before_commit"
	if err := zombie.Arm(ctx, point, chaos.Fault{Action: chaos.Delay, Delay: chaos.Duration(2 * time.Second)}); err != nil {
		return "", 0, err
	}
	if err := zombie.waitFired(ctx, point); err != nil {
		return "", 0, fmt.Errorf("%s never applied a batch", zombie.Name)
	}
	stopped, wake, err := zombie.freeze(d)
	if err != nil {
		return "", 0, err
	}
	defer wake()
	if err := w.waitMembers(ctx, func(n int) bool { return n < len(d.Ledgers) }); err != nil {
		return "", 0, fmt.Errorf("%s was not evicted from the group: %w", zombie.Name, err)
	}
	evicted := time.Since(stopped)
	pause(ctx, 2*time.Second) // the other takes its partitions over meanwhile
	if err := wake(); err != nil {
		return "", 0, err
	}
	woke := time.Now()
	if err := zombie.chaos.DisarmAll(ctx); err != nil {
		return "", 0, fmt.Errorf("disarming %s: %w", zombie.Name, err)
	}
	if err := w.waitMembers(ctx, d.allLedgers); err != nil {
		return "", 0, fmt.Errorf("%s did not rejoin the group: %w", zombie.Name, err)
	}
	rejoined := time.Since(woke)
	pause(ctx, 3*time.Second) // its first commits of the new generation
	d.zombie = w.stop()
	return fmt.Sprintf("%s frozen inside a transaction; evicted from the group after %s, its partitions moved; woken after %s, rejoined in %s; "+
		"%.0f deliveries skipped as duplicates by the inboxes; committed offsets went back %d times",
		zombie.Name, evicted.Round(100*time.Millisecond), woke.Sub(stopped).Round(100*time.Millisecond),
		rejoined.Round(100*time.Millisecond), duplicates()-dupsBefore, d.zombie), rejoined, nil
}
