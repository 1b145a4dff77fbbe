package pgha_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/pgha"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// setup starts a private cluster replicating as r, removed at cleanup. The
// test runs only with PAYLAB_PG_HA=1 (make test-ha): it starts etcd and three
// PostgreSQL servers, about a minute of a 2-core machine.
func setup(t *testing.T, r pgha.Replication) *pgha.Cluster {
	t.Helper()
	if os.Getenv("PAYLAB_PG_HA") == "" {
		t.Skip("PAYLAB_PG_HA=1 runs it (make test-ha): it starts a Patroni cluster of three PostgreSQL members")
	}
	c, err := pgha.New(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster at the end:\n%s", c.Status())
			if os.Getenv("PAYLAB_PG_HA_KEEP") != "" {
				t.Logf("kept: %s", c.Dir())
				if err := c.Stop(); err != nil {
					t.Errorf("stopping the cluster: %v", err)
				}
				return
			}
		}
		if err := c.Remove(); err != nil {
			t.Errorf("removing the cluster: %v", err)
		}
	})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLeaderKilledSynchronousCommitSurvives: with synchronous replication, a
// commit returns only once the synchronous standby has flushed it, and a row
// whose commit returned is on the member Patroni promotes after the leader's
// PostgreSQL is SIGKILLed; a pgx pool listing every member with
// target_session_attrs=read-write writes to the new leader without being
// rebuilt; the WAL relay's permanent slot exists there.
func TestLeaderKilledSynchronousCommitSurvives(t *testing.T) {
	c := setup(t, pgha.Synchronous)
	ctx := testenv.Context(t)

	pool, err := pgxpool.New(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	old := c.Leader(ctx)
	if old == 0 {
		t.Fatal("no leader after start")
	}
	if port := serverPort(ctx, t, pool); port != c.Port(old) {
		t.Fatalf("the read-write pool is on port %d, the leader (member %d) on %d", port, old, c.Port(old))
	}

	// The database of the WAL relay's slot: Patroni creates the slot on the
	// leader and copies it to both replicas.
	if _, err := pool.Exec(ctx, "CREATE DATABASE orders"); err != nil {
		t.Fatal(err)
	}
	for m := 1; m <= pgha.Members; m++ {
		testenv.Eventually(t, 2*time.Minute, "the permanent slot outbox_wal_relay on every member", func() bool {
			return hasSlot(ctx, c.MemberURL(m, "postgres"), "outbox_wal_relay")
		})
	}

	// Each replica restarted to load the slot, and the leader went on
	// without a synchronous standby meanwhile; Patroni promotes only the
	// synchronous standby, so wait for one to be named again.
	var standby int
	testenv.Eventually(t, 2*time.Minute, "a synchronous standby", func() bool {
		standby = synchronized(ctx, c, pool)
		return standby != 0
	})

	if _, err := pool.Exec(ctx, "CREATE TABLE acknowledged (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	// Committed (synchronous_commit=on): the synchronous standby flushed it.
	if _, err := pool.Exec(ctx, "INSERT INTO acknowledged VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	// With the walsenders frozen, as in the asynchronous test, a commit
	// does not return: the standby has not flushed it.
	senders := freezeWALSenders(ctx, t, pool)
	pending := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, "INSERT INTO acknowledged VALUES (3)")
		pending <- err
	}()
	select {
	case err := <-pending:
		t.Fatalf("a commit returned (error %v) while no standby received WAL", err)
	case <-time.After(2 * time.Second):
	}

	killed := time.Now()
	crash(t, c, old, senders)
	if err := <-pending; err == nil {
		t.Fatal("the commit waiting for the standby returned without an error when the leader died")
	}
	var leader int
	testenv.Eventually(t, 2*time.Minute, "a new leader", func() bool {
		leader = c.Leader(ctx)
		return leader != 0 && leader != old
	})
	if leader != standby {
		t.Fatalf("member %d was promoted, not the synchronous standby (member %d)", leader, standby)
	}
	elected := time.Since(killed)

	// The same pool, not rebuilt: its connections to the dead leader fail,
	// new ones find the member that takes writes.
	testenv.Eventually(t, time.Minute, "a write through the pool on the new leader", func() bool {
		_, err := pool.Exec(ctx, "INSERT INTO acknowledged VALUES (2)")
		return err == nil
	})
	writable := time.Since(killed)
	t.Logf("leader member %d killed; member %d elected after %s, the pool writing again after %s",
		old, leader, elected.Round(time.Millisecond), writable.Round(time.Millisecond))
	if port := serverPort(ctx, t, pool); port != c.Port(leader) {
		t.Fatalf("the pool is on port %d, the new leader (member %d) on %d", port, leader, c.Port(leader))
	}

	conn, err := pgx.Connect(ctx, c.MemberURL(leader, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM acknowledged WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("the row committed before the kill is not on the new leader (member %d)", leader)
	}
	if !hasSlot(ctx, c.MemberURL(leader, "postgres"), "outbox_wal_relay") {
		t.Fatalf("the permanent slot outbox_wal_relay is not on the new leader (member %d)", leader)
	}

	// The old leader comes back as a replica of the new one.
	testenv.Eventually(t, 2*time.Minute, "the old leader streaming as a replica", func() bool {
		s, err := c.Member(ctx, old)
		return err == nil && s.State == "running" && s.Role == "replica"
	})
}

// TestLeaderKilledAsynchronousCommitLost is the other side: with
// asynchronous replication a commit returns before any replica has it, and
// when the leader dies before sending it (its walsenders frozen here, then
// killed with it), the promoted replica does not have the row.
func TestLeaderKilledAsynchronousCommitLost(t *testing.T) {
	c := setup(t, pgha.Asynchronous)
	ctx := testenv.Context(t)

	pool, err := pgxpool.New(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	old := c.Leader(ctx)
	if old == 0 {
		t.Fatal("no leader after start")
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE acknowledged (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for m := 1; m <= pgha.Members; m++ {
		testenv.Eventually(t, time.Minute, "the table on every member", func() bool {
			return hasTable(ctx, c.MemberURL(m, "postgres"), "acknowledged")
		})
	}

	// The leader's walsenders stop sending: the next commit stays on the
	// leader alone, and it returns all the same.
	senders := freezeWALSenders(ctx, t, pool)
	if _, err := pool.Exec(ctx, "INSERT INTO acknowledged VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	crash(t, c, old, senders)
	var leader int
	testenv.Eventually(t, 2*time.Minute, "a new leader", func() bool {
		leader = c.Leader(ctx)
		return leader != 0 && leader != old
	})
	testenv.Eventually(t, time.Minute, "a write through the pool on the new leader", func() bool {
		_, err := pool.Exec(ctx, "INSERT INTO acknowledged VALUES (2)")
		return err == nil
	})
	conn, err := pgx.Connect(ctx, c.MemberURL(leader, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM acknowledged WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the row committed on the old leader alone is on the new leader (member %d): the hole did not open", leader)
	}
	t.Logf("asynchronous: the commit acknowledged by member %d is not on member %d, the new leader", old, leader)
}

// synchronized is the synchronous standby when Patroni names one and the
// leader's PostgreSQL waits for it: listed in synchronous_standby_names and
// streaming as sync; 0 otherwise (as while Patroni reassigns it).
func synchronized(ctx context.Context, c *pgha.Cluster, pool *pgxpool.Pool) int {
	standby := c.SynchronousStandby(ctx)
	if standby == 0 {
		return 0
	}
	name := fmt.Sprintf("pg%d", standby)
	var ok bool
	err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names') LIKE '%' || $1 || '%'
		AND EXISTS (SELECT FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming' AND sync_state = 'sync')`,
		name).Scan(&ok)
	if err != nil || !ok {
		return 0
	}
	return standby
}

// freezeWALSenders SIGSTOPs the leader's walsenders: from then on no
// replica receives WAL.
func freezeWALSenders(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(ctx, "SELECT pid FROM pg_stat_replication")
	if err != nil {
		t.Fatal(err)
	}
	senders, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if len(senders) != pgha.Members-1 {
		t.Fatalf("%d walsenders on the leader, want %d", len(senders), pgha.Members-1)
	}
	for _, pid := range senders {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	return senders
}

// crash is PostgreSQL's crash on member m: its postmaster SIGKILLed, and
// the frozen walsenders with it, so they never send what they held.
func crash(t *testing.T, c *pgha.Cluster, m int, senders []int) {
	t.Helper()
	if err := c.KillPostmaster(m); err != nil {
		t.Fatal(err)
	}
	for _, pid := range senders {
		_ = syscall.Kill(pid, syscall.SIGKILL) // gone already if it noticed the postmaster die
	}
}

func serverPort(ctx context.Context, t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var port int
	if err := pool.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

func hasSlot(ctx context.Context, url, slot string) bool {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var ok bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1)", slot).Scan(&ok)
	return err == nil && ok
}

func hasTable(ctx context.Context, url, table string) bool {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var ok bool
	err = conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok)
	return err == nil && ok
}
