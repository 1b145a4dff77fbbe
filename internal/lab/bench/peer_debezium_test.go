package bench

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// The Debezium peer, built and run against the real stack, drains 500
// events written in 5 transactions: the topic then holds each of them once,
// keyed by its order id, its payload as written, with the 11 headers paylab
// sets; and the replication slot is gone.
func TestDebeziumPeerDrainsTheOutbox(t *testing.T) {
	admin := os.Getenv("PAYLAB_ADMIN_DATABASE_URL")
	if admin == "" {
		t.Skip("PAYLAB_ADMIN_DATABASE_URL is unset: the peer needs a superuser to grant REPLICATION")
	}
	for _, tool := range []string{"mvn", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the Debezium peer needs %s: %v", tool, err)
		}
	}
	// The first build resolves the dependencies from Maven Central.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	repo, err := localstack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	jar, err := buildDebeziumPeer(ctx, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEnv(ctx, Config{AdminURL: admin, Brokers: testenv.Brokers(), LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.close(); err != nil {
			t.Error(err)
		}
	})

	const n = 500
	res, err := e.debeziumDrain(ctx, jar, n, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events in %.3f s (%.0f/s), %.2f s of JVM CPU", res.Events, res.Seconds, res.PerSecond, res.PeerCPUSeconds)
	if res.Events != n || res.Seconds <= 0 || res.PerSecond <= 0 || res.PeerCPUSeconds <= 0 {
		t.Errorf("result %+v", res)
	}

	// What was written, by order id.
	if len(e.dbs) != 1 || len(e.topics) != 1 {
		t.Fatalf("databases %v, topics %v; want one of each", e.dbs, e.topics)
	}
	dbURL, err := migrate.URL(admin, e.dbs[0], e.role, e.password)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ id, payload, traceparent string }
	written := map[string]row{}
	var slots, txs int
	if err := withConn(ctx, dbURL, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT aggregateid, id::text, payload::text, traceparent FROM `+debeziumTable)
		if err != nil {
			return err
		}
		for rows.Next() {
			var key string
			var r row
			if err := rows.Scan(&key, &r.id, &r.payload, &r.traceparent); err != nil {
				return err
			}
			written[key] = r
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return c.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE database = current_database()),
			(SELECT count(DISTINCT xmin::text) FROM `+debeziumTable+`)`).Scan(&slots, &txs)
	}); err != nil {
		t.Fatal(err)
	}
	if len(written) != n || txs != 5 {
		t.Fatalf("%d distinct order ids written in %d transactions; want %d in 5", len(written), txs, n)
	}
	if slots != 0 {
		t.Errorf("%d replication slots left on the database", slots)
	}

	// What the topic holds.
	records := readTopic(t, e.topics[0])
	if len(records) != n {
		t.Errorf("the topic holds %d records; want %d", len(records), n)
	}
	traceparent := regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)
	want := append([]string{"id"}, debeziumHeaders...) // id: the router's own, always added
	slices.Sort(want)
	seen := map[string]bool{}
	for _, m := range records {
		key := string(m.Key)
		w, ok := written[key]
		if !ok || seen[key] {
			t.Errorf("record with key %q: written %v, seen before %v", key, ok, seen[key])
			continue
		}
		seen[key] = true
		if string(m.Value) != w.payload {
			t.Errorf("record %s: value %s; want the payload %s", key, m.Value, w.payload)
		}
		h := map[string]string{}
		var names []string
		for _, rh := range m.Headers {
			h[string(rh.Key)] = string(rh.Value)
			names = append(names, string(rh.Key))
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("record %s: headers %v; want %v", key, names, want)
			continue
		}
		for name, value := range map[string]string{
			"id": w.id, outbox.HeaderID: w.id, outbox.HeaderSubject: key, outbox.HeaderSpecVersion: outbox.SpecVersion,
			outbox.HeaderSource: debeziumSource, outbox.HeaderType: "OrderCaptured", outbox.HeaderSequence: "1",
			outbox.HeaderSchemaVersion: "1", outbox.HeaderAggregateType: "order",
			outbox.HeaderContentType: outbox.ContentTypeJSON, "traceparent": w.traceparent,
		} {
			if h[name] != value {
				t.Errorf("record %s: header %s = %q; want %q", key, name, h[name], value)
			}
		}
		if !traceparent.MatchString(h["traceparent"]) {
			t.Errorf("record %s: traceparent %q", key, h["traceparent"])
		}
		if at, err := time.Parse(time.RFC3339Nano, h[outbox.HeaderTime]); err != nil || at.UTC().Format(time.RFC3339Nano) != h[outbox.HeaderTime] {
			t.Errorf("record %s: %s %q is not as Go formats it (%v)", key, outbox.HeaderTime, h[outbox.HeaderTime], err)
		}
	}
}

// readTopic reads every record of topic's partitions, up to their high
// water marks.
func readTopic(t *testing.T, topic string) []*sarama.ConsumerMessage {
	t.Helper()
	client, err := sarama.NewClient(testenv.Brokers(), broker.Config("paylab-bench-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	partitions, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []*sarama.ConsumerMessage
	for _, p := range partitions {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		if start >= end {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, start)
		if err != nil {
			t.Fatal(err)
		}
		for offset := start; offset < end; {
			select {
			case m := <-pc.Messages():
				out, offset = append(out, m), m.Offset+1
			case <-time.After(30 * time.Second):
				t.Fatalf("partition %d of %s: nothing after offset %d of %d", p, topic, offset, end)
			}
		}
		pc.Close()
	}
	return out
}

// A slot left by a peer that hung (its drain never dropped it, a walsender
// still streams from it) goes at env.close, even from a run that keeps its
// databases: a slot pins WAL for as long as it exists.
func TestEnvCloseDropsALeftoverSlot(t *testing.T) {
	admin := os.Getenv("PAYLAB_ADMIN_DATABASE_URL")
	if admin == "" {
		t.Skip("PAYLAB_ADMIN_DATABASE_URL is unset: creating a replication slot needs a superuser")
	}
	recv, err := exec.LookPath("pg_recvlogical")
	if err != nil {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_recvlogical")
		if len(found) == 0 {
			t.Skip("no pg_recvlogical to stream from the slot")
		}
		recv = found[0]
	}
	ctx := testenv.Context(t)
	e, err := newEnv(ctx, Config{AdminURL: admin, Brokers: testenv.Brokers(), LogDir: t.TempDir(), Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.database(ctx, "slot", "orders"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // what the kept run keeps
		if err := withConn(context.Background(), admin, func(c *pgx.Conn) error {
			if err := migrate.Drop(context.Background(), c, e.dbs[0]); err != nil {
				return err
			}
			_, err := c.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{e.role}.Sanitize())
			return err
		}); err != nil {
			t.Error(err)
		}
	})
	slot := "paylab_bench_" + e.run + "_leftover"
	e.slots = append(e.slots, slot)

	// A logical slot belongs to a database: created and streamed from
	// there, by PostgreSQL's own client in the hung peer's place.
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + e.dbs[0]
	dbURL := u.String()
	if err := withConn(ctx, dbURL, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, slot)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	streamer := exec.Command(recv, "--dbname", dbURL, "--slot", slot, "--start", "--file", os.DevNull, "--no-loop")
	if err := streamer.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- streamer.Wait() }()
	t.Cleanup(func() {
		_ = streamer.Process.Kill()
		<-exited
	})
	for active := false; !active; {
		if err := withConn(ctx, admin, func(c *pgx.Conn) error {
			return c.QueryRow(ctx, `SELECT count(*) = 1 FROM pg_replication_slots WHERE slot_name = $1 AND active`, slot).Scan(&active)
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			t.Fatalf("pg_recvlogical exited before streaming: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}

	if err := e.close(); err != nil {
		t.Fatal(err)
	}
	var slots, dbs int
	if err := withConn(ctx, admin, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1),
			(SELECT count(*) FROM pg_database WHERE datname = $2)`, slot, e.dbs[0]).Scan(&slots, &dbs)
	}); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || dbs != 1 {
		t.Errorf("after close: %d slots named %s, %d databases named %s; want 0 and the kept 1", slots, slot, dbs, e.dbs[0])
	}
}
