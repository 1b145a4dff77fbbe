// Package smoke proves the local stack is real: it talks to the PostgreSQL
// server and the Apache Kafka broker that scripts/stack.sh started, prints
// their versions, round-trips every migration, and round-trips messages
// through an idempotent producer and a consumer group.
package smoke

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for goose
	"github.com/pressly/goose/v3"

	"github.com/paylab/paylab/db/migrations"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

func TestSmokePostgres(t *testing.T) {
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	defer conn.Close(context.Background())
	var version string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("smoke: PostgreSQL server: %s\n", version)

	for _, name := range migrations.Databases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testMigrationRoundTrip(t, name)
		})
	}
}

// testMigrationRoundTrip applies every migration of one database to an empty
// database, rolls them all back, and applies them again.
func testMigrationRoundTrip(t *testing.T, database string) {
	ctx := testenv.Context(t)
	admin, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	if err := migrate.Bootstrap(ctx, testenv.AdminURL(), []migrate.Database{{Name: database, Role: database, Password: database}}); err != nil {
		t.Fatal(err)
	}
	name := "t_smoke_" + database + "_" + fmt.Sprint(time.Now().UnixNano())
	if err := migrate.EnsureDatabase(ctx, admin, name, database, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DropDatabase(t, name) })
	dbURL, err := migrate.URL(testenv.AdminURL(), name, database, database)
	if err != nil {
		t.Fatal(err)
	}

	up, err := migrate.Up(ctx, dbURL, database)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if up == 0 {
		t.Fatalf("up: schema version 0 after applying migrations")
	}
	tables := countTables(t, dbURL)
	if tables == 0 {
		t.Fatalf("up: no tables after migrating %s", database)
	}
	down, err := migrateDown(ctx, dbURL, database)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	if down != 0 || countTables(t, dbURL) != 0 {
		t.Fatalf("down: version %d, %d tables left; want 0 and 0", down, countTables(t, dbURL))
	}
	again, err := migrate.Up(ctx, dbURL, database)
	if err != nil || again != up || countTables(t, dbURL) != tables {
		t.Fatalf("up again: version %d (want %d), %d tables (want %d), err %v", again, up, countTables(t, dbURL), tables, err)
	}
	fmt.Printf("smoke: migrations of %s: up to version %d (%d tables), down to 0, up again\n", database, up, tables)
}

// migrateDown rolls every migration of database back with goose (the
// binaries only ever migrate up) and returns the schema version left.
func migrateDown(ctx context.Context, dbURL, database string) (version int64, err error) {
	fsys, err := migrations.FS(database)
	if err != nil {
		return 0, err
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys)
	if err != nil {
		return 0, err
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

// countTables counts the tables in the public schema, the migrations' own
// bookkeeping table excluded.
func countTables(t *testing.T, dbURL string) int {
	t.Helper()
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name <> 'goose_db_version'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSmokeKafka(t *testing.T) {
	cfg := testenv.KafkaConfig()
	admin, err := sarama.NewClusterAdmin(testenv.Brokers(), cfg)
	if err != nil {
		t.Fatalf("connecting to Kafka: %v", err)
	}
	defer admin.Close()
	brokers, controller, err := admin.DescribeCluster()
	if err != nil {
		t.Fatalf("describing the cluster: %v", err)
	}
	if len(brokers) == 0 {
		t.Fatal("the cluster has no brokers")
	}
	versions, err := apiVersions(brokers[0], cfg)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("smoke: Kafka cluster: %d broker(s) at %s, controller %d, Produce API up to v%d, Fetch up to v%d\n",
		len(brokers), brokers[0].Addr(), controller, versions[0], versions[1])

	topic := testenv.NewTopic(t, 3)
	const n = 100
	sent := produce(t, topic, n)
	got := consume(t, topic, n)
	for key, value := range sent {
		if got[key] != value {
			t.Fatalf("message %s: consumed %q, produced %q", key, got[key], value)
		}
	}
	fmt.Printf("smoke: Kafka round trip: %d messages through an idempotent producer (acks=all) and a consumer group\n", n)
}

// apiVersions asks the broker which versions of Produce (0) and Fetch (1) it serves.
func apiVersions(b *sarama.Broker, cfg *sarama.Config) ([2]int16, error) {
	var out [2]int16
	if err := b.Open(cfg); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
		return out, err
	}
	defer b.Close()
	res, err := b.ApiVersions(&sarama.ApiVersionsRequest{Version: 3, ClientSoftwareName: "paylab-smoke", ClientSoftwareVersion: "1"})
	if err != nil {
		return out, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range res.ApiKeys {
		if k.ApiKey == 0 || k.ApiKey == 1 {
			out[k.ApiKey] = k.MaxVersion
		}
	}
	return out, nil
}

func produce(t *testing.T, topic string, n int) map[string]string {
	t.Helper()
	p, err := sarama.NewSyncProducer(testenv.Brokers(), broker.ProducerConfig("paylab-smoke"))
	if err != nil {
		t.Fatalf("idempotent producer: %v", err)
	}
	defer p.Close()
	sent := make(map[string]string, n)
	msgs := make([]*sarama.ProducerMessage, 0, n)
	for i := range n {
		key, value := fmt.Sprintf("order-%03d", i), fmt.Sprintf("event %d", i)
		sent[key] = value
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)})
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("producing: %v", err)
	}
	return sent
}

func consume(t *testing.T, topic string, n int) map[string]string {
	t.Helper()
	cfg := testenv.KafkaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	group, err := sarama.NewConsumerGroup(testenv.Brokers(), "smoke-"+topic, cfg)
	if err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	defer group.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &collector{want: n, got: map[string]string{}, done: cancel}
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			t.Fatalf("consuming: %v", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) != n {
		t.Fatalf("consumed %d distinct messages, want %d", len(h.got), n)
	}
	return h.got
}

type collector struct {
	want int
	done context.CancelFunc

	mu  sync.Mutex
	got map[string]string
}

func (*collector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*collector) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (c *collector) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		c.mu.Lock()
		c.got[string(msg.Key)] = string(msg.Value)
		complete := len(c.got) >= c.want
		c.mu.Unlock()
		s.MarkMessage(msg, "")
		if complete {
			c.done()
		}
	}
	return nil
}
