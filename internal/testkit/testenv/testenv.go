// Package testenv gives tests their own databases and topics on the real local
// stack (scripts/stack.sh): PostgreSQL at PAYLAB_ADMIN_DATABASE_URL and Kafka
// at KAFKA_BROKERS, with the stack's defaults when they are unset.
//
// Every test gets a fresh database cloned from a migrated template, owned by
// the service's least-privilege role, and dropped at cleanup; tests that use
// testenv can run in parallel with each other and with other packages.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/db/migrations"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// Defaults of the local stack (scripts/stack.sh).
const (
	DefaultAdminURL = "postgres://postgres:postgres@127.0.0.1:55432/postgres?sslmode=disable"
	DefaultBrokers  = "127.0.0.1:59092"
)

// AdminURL is the URL of a PostgreSQL role that may create roles and databases.
func AdminURL() string { return envOr("PAYLAB_ADMIN_DATABASE_URL", DefaultAdminURL) }

// Brokers are the Kafka bootstrap servers.
func Brokers() []string { return broker.SplitBrokers(envOr("KAFKA_BROKERS", DefaultBrokers)) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Context returns a context cancelled when the test ends (or after three minutes).
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// NewDatabase creates a fresh database for service (orders, ledger or
// notifications) with all its migrations applied, owned by the service's role,
// and returns a URL that connects as that role. The database is dropped when
// the test ends.
func NewDatabase(t testing.TB, service string) string {
	t.Helper()
	ctx := Context(t)
	role := migrate.Database{Name: service, Role: service, Password: service}

	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("testenv: connecting to PostgreSQL (is the stack up? make env-up): %v", err)
	}
	defer admin.Close(context.Background())

	tmpl, err := template(ctx, admin, role)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	name := "t_" + service + "_" + randomHex(6)
	if err := createFromTemplate(ctx, admin, name, role.Role, tmpl); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { DropDatabase(t, name) })

	dbURL, err := migrate.URL(AdminURL(), name, role.Role, role.Password)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return dbURL
}

// NewPool is NewDatabase plus a pool on it, closed when the test ends.
func NewPool(t testing.TB, service string) (*pgxpool.Pool, string) {
	t.Helper()
	dbURL := NewDatabase(t, service)
	pool, err := pgxpool.New(Context(t), dbURL)
	if err != nil {
		t.Fatalf("testenv: opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, dbURL
}

// DropDatabase drops a database, disconnecting its sessions.
func DropDatabase(t testing.TB, name string) {
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
	if err := migrate.Drop(ctx, admin, name); err != nil {
		t.Errorf("testenv: %v", err)
	}
}

// template returns the name of a migrated template database for db, building
// it on first use. The name carries a hash of the migrations, so a changed
// migration gets a new template.
func template(ctx context.Context, admin *pgx.Conn, db migrate.Database) (string, error) {
	sum, err := migrationsHash(db.Name)
	if err != nil {
		return "", err
	}
	name := "tmpl_" + db.Name + "_" + sum
	// Serialise template builds across test binaries running in parallel.
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", name); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", name) //nolint:errcheck

	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	if err := migrate.Bootstrap(ctx, AdminURL(), []migrate.Database{db}); err != nil {
		return "", fmt.Errorf("bootstrapping %s: %w", db.Name, err)
	}
	building := name + "_build"
	if err := migrate.Drop(ctx, admin, building); err != nil {
		return "", err
	}
	if err := migrate.EnsureDatabase(ctx, admin, building, db.Role, ""); err != nil {
		return "", err
	}
	dbURL, err := migrate.URL(AdminURL(), building, db.Role, db.Password)
	if err != nil {
		return "", err
	}
	if _, err := migrate.Up(ctx, dbURL, db.Name); err != nil {
		return "", err
	}
	// Renaming last makes a half-built template impossible to pick up.
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s",
		pgx.Identifier{building}.Sanitize(), pgx.Identifier{name}.Sanitize())); err != nil {
		return "", fmt.Errorf("publishing template %s: %w", name, err)
	}
	return name, nil
}

func createFromTemplate(ctx context.Context, admin *pgx.Conn, name, owner, tmpl string) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		// CREATE DATABASE … TEMPLATE fails while another session is connected to
		// the template (e.g. a concurrent clone); it is brief, so retry.
		if err = migrate.EnsureDatabase(ctx, admin, name, owner, tmpl); err == nil ||
			!strings.Contains(err.Error(), "is being accessed by other users") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func migrationsHash(database string) (string, error) {
	fsys, err := migrations.FS(database)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	err = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12], err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// KafkaConfig returns paylab's sarama configuration for a test client.
func KafkaConfig() *sarama.Config { return broker.Config("paylab-test") }

var topicUnsafe = regexp.MustCompile(`[^a-z0-9._-]+`)

// NewTopic creates a topic with a unique name and the given number of
// partitions, deleted when the test ends.
func NewTopic(t testing.TB, partitions int32) string {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(Brokers(), KafkaConfig())
	if err != nil {
		t.Fatalf("testenv: connecting to Kafka (is the stack up? make env-up): %v", err)
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
