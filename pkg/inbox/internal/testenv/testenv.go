// Package testenv gives the package's tests their own databases and topics
// on a running PostgreSQL and Kafka: PostgreSQL at TEST_ADMIN_DATABASE_URL (a
// role that may create roles and databases) and Kafka at KAFKA_BROKERS,
// with defaults for a local stack (127.0.0.1:55432 as postgres/postgres,
// 127.0.0.1:59092) when they are unset.
//
// Every test gets a fresh database, owned by a role of the tests' own
// (inbox_test: LOGIN, no superuser) and migrated with the
// function the test passes (the package's own Migrate), dropped at cleanup;
// tests run in parallel with each other and with other test binaries.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of a local stack.
const (
	DefaultAdminURL = "postgres://postgres:postgres@127.0.0.1:55432/postgres?sslmode=disable"
	DefaultBrokers  = "127.0.0.1:59092"
)

// role owns the tests' databases (LOGIN, nothing more); its password is its name.
const role = "inbox_test"

// AdminURL is the URL of a PostgreSQL role that may create roles and
// databases: TEST_ADMIN_DATABASE_URL, else PAYLAB_ADMIN_DATABASE_URL (what
// paylab's `make env` exports), else DefaultAdminURL.
func AdminURL() string {
	for _, k := range []string{"TEST_ADMIN_DATABASE_URL", "PAYLAB_ADMIN_DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return DefaultAdminURL
}

// Brokers are the Kafka bootstrap servers (KAFKA_BROKERS, comma-separated).
func Brokers() []string {
	list := os.Getenv("KAFKA_BROKERS")
	if list == "" {
		list = DefaultBrokers
	}
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Context returns a context cancelled when the test ends (or after three minutes).
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Migrator applies a schema to a fresh database (the package's Migrate).
type Migrator func(ctx context.Context, pool *pgxpool.Pool) error

// NewPool creates a fresh database owned by the tests' role, opens a pool
// on it as that role, applies migrate and returns the pool and the
// database's URL. The database is dropped, and the pool closed, when the
// test ends.
func NewPool(t testing.TB, migrate Migrator) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := Context(t)
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("testenv: connecting to PostgreSQL (is it up?): %v", err)
	}
	defer admin.Close(context.Background())
	if err := ensureRole(ctx, admin); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	name := "t_" + role + "_" + randomHex(6)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{role}.Sanitize())); err != nil {
		t.Fatalf("testenv: creating database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, name) })

	u, err := url.Parse(AdminURL())
	if err != nil {
		t.Fatalf("testenv: parsing the admin URL: %v", err)
	}
	u.User = url.UserPassword(role, role)
	u.Path = "/" + name
	dbURL := u.String()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("testenv: opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if migrate != nil {
		if err := migrate(ctx, pool); err != nil {
			t.Fatalf("testenv: migrating %s: %v", name, err)
		}
	}
	return pool, dbURL
}

// ensureRole creates the tests' role once; concurrent test binaries are
// serialised by an advisory lock.
func ensureRole(ctx context.Context, admin *pgx.Conn) error {
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", "testenv:"+role); err != nil {
		return err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", "testenv:"+role) //nolint:errcheck
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
		return fmt.Errorf("looking up role %s: %w", role, err)
	}
	if exists {
		return nil
	}
	ident := pgx.Identifier{role}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident+" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '"+role+"'"); err != nil {
		return fmt.Errorf("creating role %s: %w", role, err)
	}
	return nil
}

// dropDatabase drops a database, disconnecting its sessions.
func dropDatabase(t testing.TB, name string) {
	t.Helper()
	// DROP DATABASE waits for a checkpoint, and drops queue behind each
	// other's: on a loaded machine that takes a while. The bound only
	// catches a server that does not answer.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Errorf("testenv: dropping %s: %v", name, err)
		return
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Errorf("testenv: dropping database %s: %v", name, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// KafkaVersion is the Kafka protocol version the tests speak (Kafka 4
// removed the older ones).
var KafkaVersion = sarama.V4_0_0_0

// KafkaConfig returns a sarama configuration for a test client.
func KafkaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = KafkaVersion
	cfg.ClientID = "inbox-test"
	return cfg
}

// ProducerConfig returns the configuration of an idempotent producer for a
// test: every write acknowledged by all in-sync replicas, successes and
// errors returned.
func ProducerConfig() *sarama.Config {
	cfg := KafkaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	return cfg
}

var topicUnsafe = regexp.MustCompile(`[^a-z0-9._-]+`)

// NewTopic creates a topic with a unique name and the given number of
// partitions, deleted when the test ends.
func NewTopic(t testing.TB, partitions int32) string {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(Brokers(), KafkaConfig())
	if err != nil {
		t.Fatalf("testenv: connecting to Kafka (is it up?): %v", err)
	}
	name := "t-" + topicUnsafe.ReplaceAllString(strings.ToLower(t.Name()), "-") + "-" + randomHex(4)
	if len(name) > 200 {
		name = name[len(name)-200:]
	}
	err = admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
	if err != nil {
		admin.Close()
		t.Fatalf("testenv: creating topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := admin.DeleteTopic(name); err != nil {
			t.Logf("testenv: deleting topic %s: %v", name, err)
		}
		admin.Close()
	})
	return name
}
