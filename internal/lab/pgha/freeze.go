package pgha

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// Frozen is a replica whose walreceiver is stopped (SIGSTOP): it receives,
// writes and flushes no more WAL, and reports no progress to the leader, whose
// pg_stat_replication keeps showing the flush LSN it had when it froze. The
// replica's PostgreSQL and its Patroni run on and answer queries. It is how a
// standby falls behind: the leader's commits with synchronous_commit=local (or
// any commit of an asynchronous cluster) are then on the leader alone.
//
// The leader's walsender gives up on a silent standby after wal_sender_timeout
// (60 s by default) and drops its row from pg_stat_replication; Patroni then
// names another synchronous standby if one streams. Keep a freeze shorter than
// that, or expect it.
type Frozen struct {
	// Member is the frozen replica's member number.
	Member int
	// PID is its walreceiver's process id.
	PID int
	// FlushLSN is the WAL position the replica had flushed when it froze
	// (pg_stat_wal_receiver.flushed_lsn), as PostgreSQL prints an LSN.
	FlushLSN string

	once sync.Once
	err  error
}

// FreezeReplica stops replica m's walreceiver with SIGSTOP. Thaw resumes it;
// until then stopping the cluster waits for it, so a caller thaws before
// Stop or Remove (a test: t.Cleanup(func() { f.Thaw() }) after the cluster's
// own cleanup was registered).
func (c *Cluster) FreezeReplica(ctx context.Context, m int) (*Frozen, error) {
	conn, err := pgx.Connect(ctx, c.MemberURL(m, "postgres"))
	if err != nil {
		return nil, fmt.Errorf("connecting to member %d: %w", m, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var recovering bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
		return nil, fmt.Errorf("asking member %d whether it is a replica: %w", m, err)
	}
	if !recovering {
		return nil, fmt.Errorf("member %d is not a replica", m)
	}
	f := &Frozen{Member: m}
	err = conn.QueryRow(ctx, "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'").Scan(&f.PID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("member %d has no streaming walreceiver", m)
	}
	if err != nil {
		return nil, fmt.Errorf("finding member %d's walreceiver: %w", m, err)
	}
	if err := syscall.Kill(f.PID, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("stopping member %d's walreceiver (pid %d): %w", m, f.PID, err)
	}
	// Read after the stop: the walreceiver publishes its flush position in
	// shared memory, which no longer moves.
	if err := conn.QueryRow(ctx, "SELECT flushed_lsn::text FROM pg_stat_wal_receiver WHERE pid = $1", f.PID).Scan(&f.FlushLSN); err != nil {
		return nil, errors.Join(fmt.Errorf("reading member %d's flush position: %w", m, err), f.Thaw())
	}
	return f, nil
}

// Kill ends the frozen walreceiver (SIGKILL) instead of thawing it: a crash
// of the replica's PostgreSQL, which restarts from what it had flushed, so
// the WAL the frozen process held unread in its socket is never applied.
// Only the first of Kill and Thaw acts.
func (f *Frozen) Kill() error {
	f.once.Do(func() {
		if err := syscall.Kill(f.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			f.err = fmt.Errorf("killing member %d's walreceiver (pid %d): %w", f.Member, f.PID, err)
		}
	})
	return f.err
}

// Thaw resumes the walreceiver (SIGCONT): it flushes what the leader sends
// and reports it, or, if the leader's walsender gave up on it meanwhile,
// exits and is started again, and the replica catches up. Thaw may be called
// more than once; only the first of Kill and Thaw acts.
func (f *Frozen) Thaw() error {
	f.once.Do(func() {
		if err := syscall.Kill(f.PID, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			f.err = fmt.Errorf("resuming member %d's walreceiver (pid %d): %w", f.Member, f.PID, err)
		}
	})
	return f.err
}
