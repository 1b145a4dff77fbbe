package bench

import (
	"context"
	"os"
	"os/exec"
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
