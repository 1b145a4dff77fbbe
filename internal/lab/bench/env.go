package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// env is what a run creates on the stack, all of it named after the run so
// it never touches anybody else's data: one login role, a database per stage
// and per service, topics, consumer groups. close removes it all.
type env struct {
	cfg      Config
	run      string // short random id
	role     string
	password string
	admin    sarama.ClusterAdmin

	mu     sync.Mutex
	dbs    []string
	topics []string
	logs   []*os.File
	slots  []string // replication slots a peer may have left behind
}

func newEnv(ctx context.Context, cfg Config) (*env, error) {
	e := &env{cfg: cfg, run: randomHex(4), password: randomHex(16)}
	e.role = "paylab_bench_" + e.run
	conn, err := pgx.Connect(ctx, cfg.AdminURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL (is the stack up? make env-up): %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := migrate.EnsureRole(ctx, conn, e.role, e.password); err != nil {
		return nil, err
	}
	// Every figure is with synchronous commits, whatever the server's default.
	if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{e.role}.Sanitize()+" SET synchronous_commit = on"); err != nil {
		return nil, fmt.Errorf("setting synchronous_commit for %s: %w", e.role, err)
	}
	if e.admin, err = sarama.NewClusterAdmin(cfg.Brokers, broker.Config("paylab-bench")); err != nil {
		return nil, fmt.Errorf("connecting to Kafka at %v: %w", cfg.Brokers, err)
	}
	if e.cfg.LogDir == "" {
		if e.cfg.LogDir, err = os.MkdirTemp("", "paylab-bench-"); err != nil {
			return nil, err
		}
	}
	return e, os.MkdirAll(e.cfg.LogDir, 0o755)
}

// database creates a fresh database of kind (orders or ledger) for stage
// and returns its URL.
func (e *env) database(ctx context.Context, stage, kind string) (string, error) {
	name := fmt.Sprintf("bench_%s_%s_%s", e.run, stage, kind)
	e.mu.Lock()
	e.dbs = append(e.dbs, name)
	e.mu.Unlock()
	url, err := migrate.Fresh(ctx, e.cfg.AdminURL, name, kind, e.role, e.password)
	if err != nil {
		return "", fmt.Errorf("database for %s: %w", stage, err)
	}
	return url, nil
}

// databaseAndTopic creates a fresh orders database and a topic for stage.
func (e *env) databaseAndTopic(ctx context.Context, stage string) (dbURL, topic string, err error) {
	if dbURL, err = e.database(ctx, stage, "orders"); err != nil {
		return "", "", err
	}
	topic, err = e.topic(stage)
	return dbURL, topic, err
}

// topic creates a topic of six partitions (as paylab init does) for stage.
func (e *env) topic(stage string) (string, error) {
	name := fmt.Sprintf("paylab-bench-%s-%s", e.run, stage)
	e.mu.Lock()
	e.topics = append(e.topics, name)
	e.mu.Unlock()
	return name, broker.EnsureTopic(e.admin, name, 6)
}

// group names a consumer group of the run.
func (e *env) group(stage string) string { return fmt.Sprintf("paylab-bench-%s-%s", e.run, stage) }

// logFile opens the log of a child process.
func (e *env) logFile(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(e.cfg.LogDir, name+".log"))
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.logs = append(e.logs, f)
	e.mu.Unlock()
	return f, nil
}

// close drops the replication slots a peer left, then the databases and the
// role, and deletes the topics, unless the run keeps them.
func (e *env) close() error {
	defer e.admin.Close()
	for _, f := range e.logs {
		f.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Slots go even from a kept run: a slot pins WAL for as long as it
	// exists, and a database cannot be dropped while a slot is streaming
	// from it (the inactive ones go with it).
	errs := []error{e.dropSlots(ctx)}
	if e.cfg.Keep {
		return errors.Join(errs...)
	}
	for _, t := range e.topics {
		if err := e.admin.DeleteTopic(t); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("deleting topic %s: %w", t, err))
		}
	}
	errs = append(errs, e.dropDatabases(ctx))
	if err := withConn(ctx, e.cfg.AdminURL, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{e.role}.Sanitize())
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("dropping role %s: %w", e.role, err))
	}
	return errors.Join(errs...)
}

// dropDatabases drops the databases the run has made so far, unless it
// keeps them.
func (e *env) dropDatabases(ctx context.Context) error {
	if e.cfg.Keep {
		return nil
	}
	e.mu.Lock()
	dbs := e.dbs
	e.dbs = nil
	e.mu.Unlock()
	return e.dropEach(ctx, dbs, migrate.Drop)
}

// dropEach drops each of names with drop, on one admin connection, and
// joins the errors.
func (e *env) dropEach(ctx context.Context, names []string, drop func(context.Context, *pgx.Conn, string) error) error {
	if len(names) == 0 {
		return nil
	}
	return withConn(ctx, e.cfg.AdminURL, func(c *pgx.Conn) error {
		var errs []error
		for _, n := range names {
			errs = append(errs, drop(ctx, c, n))
		}
		return errors.Join(errs...)
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
