package outbox_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// A commit is decoded (and streamed) as soon as its WAL record is flushed,
// and becomes visible to other sessions a moment later: after the
// committing backend leaves the process array, or after every synchronous
// standby confirmed it. An event published in that window is a real commit
// (it survives a crash), but its row is not yet there for the relay's
// DELETE. The relay must delete (or mark) it once it is visible, and must not
// confirm its position before: otherwise the row stays pending for good,
// and the publish-lag alarm fires on a healthy system.
//
// The window is held open here with synchronous replication to a standby
// that does not exist, on a server of the test's own: the commit is flushed
// and streamed, and waits invisible until the test cancels the wait.
func TestWALRelayRecordsAnEventWhoseCommitBecomesVisibleAfterItWasPublished(t *testing.T) {
	t.Parallel()
	f := walSetupPrivate(t, 1)
	ctx := testenv.Context(t)
	// Every session commits locally, except the one that opts in below.
	for _, sql := range []string{
		"ALTER SYSTEM SET synchronous_standby_names = 'absent_standby'",
		"ALTER SYSTEM SET synchronous_commit = 'local'",
		"SELECT pg_reload_conf()",
	} {
		if _, err := f.admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	testenv.Eventually(t, 30*time.Second, "the server's new settings", func() bool {
		var names string
		err := conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names)
		return err == nil && names == "absent_standby"
	})
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	startWALRelay(t, f, newKafkaPublisher(t, testenv.Brokers()), f.config(t, "wal-0", reg))

	e := event(f.topic, "order-invisible", 1)
	committed := make(chan error, 1)
	go func() {
		tx, err := conn.Begin(ctx)
		if err == nil {
			if err = outbox.Enqueue(ctx, tx, e); err == nil {
				err = tx.Commit(ctx)
			}
		}
		committed <- err
	}()
	// Published while its commit waits for the standby…
	consumeAll(t, testenv.Brokers(), f.topic, 1, 1, time.Minute)
	// …and recorded by the relay (before the fix: a DELETE that found
	// nothing, and a confirmed position) or held back until visible.
	testenv.Eventually(t, time.Minute, "the relay to record the batch or wait for its commit", func() bool {
		return metricValue(t, reg, "outbox_publish_latency_seconds") > 0 ||
			metricValue(t, reg, "outbox_wal_invisible_commit_waits_total") > 0
	})
	select {
	case err := <-committed:
		t.Fatalf("the commit did not wait for the standby (err %v): the window is not open", err)
	default:
	}
	// End the wait: the transaction, committed locally, becomes visible.
	if _, err := f.admin.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatalf("commit: %v", err)
	}
	testenv.Eventually(t, time.Minute, "the published event's row deleted", func() bool { return dispatched(t, ctx, f.pool) == 1 })
	if n := queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"); n != 0 {
		t.Errorf("%d rows pending", n)
	}
}
