package chaosrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/lab/supervise"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// Env is the local target: it starts each scenario's processes itself, as
// supervised children restarted whenever they exit (compose's restart
// policy), on what every scenario of a run shares: a private PostgreSQL
// server, a private Kafka broker and a Mailpit SMTP server, so a run never
// touches the developer's stack and may stop and restart its servers at will.
type Env struct {
	Bin     string // folder holding the orders, ledger and notifications binaries
	Mailpit string // path of the Mailpit binary
	LogDir  string
	// RelayMode is the relays' RELAY_MODE, RelayPoll (default) or RelayWAL.
	// In WAL mode the orders role gets the REPLICATION attribute and each
	// deployment's relays stream a replication slot of their own.
	RelayMode string
	// KafkaNodes is the size of the private Kafka: 3 (default), a cluster
	// with replication factor 3 and min.insync.replicas 2, or 1, a single
	// broker, on which the scenarios that kill brokers are skipped.
	KafkaNodes int

	pg, kafka *localstack.Server // nil on servers the run does not own
	adminURL  string             // PostgreSQL superuser URL
	brokers   []string
	smtp      string
	prefix    string // of the databases' and topics' names
	mailpit   *supervise.Process
}

// Deploy starts a fresh deployment configured for sc.
func (e *Env) Deploy(ctx context.Context, sc Scenario) (*Deployment, error) {
	if n := e.kafka.Nodes(); sc.brokers > n {
		return nil, skip("needs a Kafka cluster of %d brokers; this run has %d (--kafka-nodes %d)", sc.brokers, n, sc.brokers)
	}
	if sc.opts.wal && e.RelayMode != RelayWAL {
		return nil, skip("drives the WAL relay's replication slot and publication and starts WAL relays: run it with --relay-mode wal")
	}
	if sc.pollOnly && e.RelayMode == RelayWAL {
		return nil, skip("drives the polling relays' row leases; the WAL relay's one reader is fenced by its reader lease and the slot")
	}
	if sc.pg != "" {
		return e.deployHA(ctx, sc)
	}
	return e.deploy(ctx, sc.Name, sc.opts)
}

// Shared is false: every scenario gets processes, databases and a topic of
// its own.
func (e *Env) Shared() bool { return false }

func (e *Env) stopServer(name string) error {
	s, err := e.server(name)
	if err != nil {
		return err
	}
	return s.Stop()
}

func (e *Env) startServer(name string) error {
	s, err := e.server(name)
	if err != nil {
		return err
	}
	return s.Start()
}

func (e *Env) brokerNodes() int { return e.kafka.Nodes() }

func (e *Env) killBroker(id int) error { return e.kafka.KillNode(id) }

func (e *Env) server(name string) (*localstack.Server, error) {
	s := map[string]*localstack.Server{kafkaServer: e.kafka, postgresServer: e.pg}[name]
	if s == nil {
		return nil, fmt.Errorf("%s is not a server of this run's own", name)
	}
	return s, nil
}

// Start brings the private servers up.
func (e *Env) Start(ctx context.Context) error {
	if err := os.MkdirAll(e.LogDir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"orders", "ledger", "notifications"} {
		if _, err := os.Stat(filepath.Join(e.Bin, name)); err != nil {
			return fmt.Errorf("binary %s not found in %s (go build -o %s ./services/...): %w", name, e.Bin, e.Bin, err)
		}
	}
	var err error
	if e.pg, err = localstack.NewPostgres(); err != nil {
		return err
	}
	if err := e.pg.Start(); err != nil {
		return err
	}
	switch e.KafkaNodes {
	case 0:
		e.KafkaNodes = 3
	case 1, 3:
	default:
		return fmt.Errorf("a private Kafka of %d nodes: 1 or 3", e.KafkaNodes)
	}
	if e.kafka, err = localstack.NewKafkaCluster(e.KafkaNodes); err != nil {
		return err
	}
	if err := e.kafka.Start(); err != nil {
		return err
	}
	switch e.RelayMode {
	case "":
		e.RelayMode = RelayPoll
	case RelayPoll, RelayWAL:
	default:
		return fmt.Errorf("relay mode %q is not %s or %s", e.RelayMode, RelayPoll, RelayWAL)
	}
	e.adminURL, e.brokers = e.pg.AdminURL(), e.kafka.Brokers()
	dbs := migrate.Defaults()
	for i := range dbs {
		dbs[i].Replication = e.RelayMode == RelayWAL && dbs[i].Name == "orders"
	}
	if err := migrate.Bootstrap(ctx, e.adminURL, dbs); err != nil {
		return err
	}
	ports, err := localstack.FreePorts(2)
	if err != nil {
		return err
	}
	smtpPort, apiPort := ports[0], ports[1]
	e.smtp = fmt.Sprintf("127.0.0.1:%d", smtpPort)
	dir, err := os.MkdirTemp("", "paylab-mailpit-")
	if err != nil {
		return err
	}
	e.mailpit = &supervise.Process{
		Name: "mailpit", Path: e.Mailpit,
		Args: []string{"--smtp", e.smtp, "--listen", fmt.Sprintf("127.0.0.1:%d", apiPort),
			"--database", filepath.Join(dir, "mailpit.db"), "--max", "0", "--disable-version-check", "--quiet"},
		ReadyURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", apiPort),
		Restart:  true,
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return e.mailpit.Start(sctx)
}

// Stop removes the private servers and their data.
func (e *Env) Stop() {
	if e.mailpit != nil {
		e.mailpit.Stop(5 * time.Second)
	}
	if e.kafka != nil {
		_ = e.kafka.Remove()
	}
	if e.pg != nil {
		_ = e.pg.Remove()
	}
}

// database creates a fresh, migrated database for service, owned by its role,
// its runtime roles granted their tables, and returns its owner's URL.
func (e *Env) database(ctx context.Context, service, name string) (string, error) {
	u, err := migrate.Fresh(ctx, e.adminURL, name, service, service, service)
	if err != nil {
		return "", err
	}
	return u, migrate.Grant(ctx, u, service)
}

// topic creates a topic and its dead-letter topic.
func (e *Env) topic(name string) error {
	admin, err := sarama.NewClusterAdmin(e.brokers, broker.Config("paylab-chaos"))
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, t := range []string{name, name + ".dlq"} {
		if err := broker.EnsureTopic(admin, t, 6); err != nil {
			return err
		}
	}
	return nil
}

// walSlot names the replication slot of the deployment whose databases are
// called slug_*: slot names are at most 63 characters of [a-z0-9_].
func walSlot(slug string) string {
	name := "chaos_" + strings.ToLower(slug)
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// dropSlot drops a deployment's replication slot once its relays are gone;
// the walsender of a killed relay may take a moment to notice.
func (e *Env) dropSlot(slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for ctx.Err() == nil {
		var left bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&left)
		if err != nil || !left {
			return
		}
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err == nil {
			return
		}
		pause(ctx, 200*time.Millisecond)
	}
}
