package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/lab/supervise"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// LocalConfig describes a local deployment. Zero values take the defaults.
type LocalConfig struct {
	Bin     string           // folder holding the orders, ledger and notifications binaries
	LogDir  string           // the processes' logs; a temporary folder when empty
	Servers chaosrun.Servers // PostgreSQL (its roles bootstrapped), Kafka, an SMTP server
	// Token is the CHAOS_TOKEN the processes run with. The console passes
	// it to them and uses it for nothing else.
	Token  string
	Mode   string // the orders API's first OUTBOX_MODE; ModeOutbox when empty
	Relays int    // relays; 2 when zero
	// RelayMode is the relays' RELAY_MODE: RelayPoll (when empty) or
	// RelayWAL, in which the orders role is granted REPLICATION and the
	// relays stream a replication slot of the deployment's own, dropped
	// by Stop.
	RelayMode string
}

// Local runs the orders API, its relays, the ledger and notifications as
// supervised children — restarted whenever they exit, as compose's restart
// policy does — on databases and a topic of its own, so that it can restart
// the orders API in another mode.
type Local struct {
	cfg    LocalConfig
	slug   string
	slot   string // the WAL relays' replication slot; "" when they poll
	apiURL string
	src    reconcile.Sources
	procs  []localProc

	switching sync.Mutex // one switch at a time
	mu        sync.Mutex // guards mode
	mode      string
}

type localProc struct {
	Proc
	sp *supervise.Process
}

// relayLeaseTTL is short, so a killed relay's leased rows are taken over
// while one watches.
const relayLeaseTTL = 10 * time.Second

// StartLocal creates the databases and the topic and starts the processes;
// Stop ends them and removes what StartLocal created.
func StartLocal(ctx context.Context, cfg LocalConfig) (*Local, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeOutbox
	}
	if !slices.Contains(Modes, cfg.Mode) {
		return nil, fmt.Errorf("console: mode %q is not one of %v", cfg.Mode, Modes)
	}
	if cfg.Relays == 0 {
		cfg.Relays = 2
	}
	switch cfg.RelayMode {
	case "":
		cfg.RelayMode = RelayPoll
	case RelayPoll, RelayWAL:
	default:
		return nil, fmt.Errorf("console: relay mode %q is not %s or %s", cfg.RelayMode, RelayPoll, RelayWAL)
	}
	if cfg.Token == "" {
		return nil, errors.New("console: the processes need a chaos token")
	}
	for _, name := range []string{"orders", "ledger", "notifications"} {
		if _, err := os.Stat(filepath.Join(cfg.Bin, name)); err != nil {
			return nil, fmt.Errorf("console: binary %s not found in %s (make build): %w", name, cfg.Bin, err)
		}
	}
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "paylab-console-")
		if err != nil {
			return nil, err
		}
		cfg.LogDir = dir
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	l := &Local{cfg: cfg, slug: "console_" + hex.EncodeToString(suffix), mode: cfg.Mode}
	if cfg.RelayMode == RelayWAL {
		// Slots belong to the whole server: one of the deployment's own.
		l.slot = l.slug + "_wal"
	}
	if err := l.start(ctx); err != nil {
		l.Stop()
		return nil, fmt.Errorf("console: %w", err)
	}
	return l, nil
}

func (l *Local) start(ctx context.Context) error {
	s := l.cfg.Servers
	if l.slot != "" {
		if err := grantReplication(ctx, s.AdminURL); err != nil {
			return err
		}
	}
	urls := map[string]string{}
	for _, svc := range []string{"orders", "ledger", "notifications"} {
		u, err := migrate.Fresh(ctx, s.AdminURL, l.slug+"_"+svc, svc, svc, svc)
		if err != nil {
			return fmt.Errorf("database for %s: %w", svc, err)
		}
		urls[svc] = u
	}
	topic := "order-events-" + strings.ReplaceAll(l.slug, "_", "-")
	if err := l.topics(func(a sarama.ClusterAdmin, t string) error { return broker.EnsureTopic(a, t, 6) }, topic); err != nil {
		return err
	}
	l.src = reconcile.Sources{OrdersURL: urls["orders"], LedgerURL: urls["ledger"], NotificationsURL: urls["notifications"],
		Brokers: s.Brokers, Topic: topic}

	apiPort, err := localstack.FreePort()
	if err != nil {
		return err
	}
	l.apiURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	specs, err := chaosrun.Layout{
		Brokers: s.Brokers, SMTPAddr: s.SMTPAddr, Token: l.cfg.Token, Topic: topic,
		OrdersURL: urls["orders"], LedgerURL: urls["ledger"], NotificationsURL: urls["notifications"],
		APIAddr: fmt.Sprintf("127.0.0.1:%d", apiPort), Mode: l.mode, InboxEnabled: true,
		Relays: l.cfg.Relays, RelayMode: l.cfg.RelayMode, Slot: l.slot, LeaseTTL: relayLeaseTTL,
		LedgerGroup: "ledger-" + l.slug, NotificationsGroup: "notifications-" + l.slug,
	}.Specs()
	if err != nil {
		return err
	}
	for _, spec := range specs {
		log, err := os.Create(filepath.Join(l.cfg.LogDir, spec.Name+".log"))
		if err != nil {
			return err
		}
		sp, admin, err := spec.Supervise(l.cfg.Bin, log)
		if err != nil {
			log.Close()
			return err
		}
		l.procs = append(l.procs, localProc{Proc: Proc{Name: spec.Name, Role: spec.Role, Admin: admin}, sp: sp})
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range l.procs {
		g.Go(func() error {
			sctx, cancel := context.WithTimeout(gctx, 2*time.Minute)
			defer cancel()
			return p.sp.Start(sctx)
		})
	}
	return g.Wait()
}

// topics runs op on topic and its dead-letter topic.
func (l *Local) topics(op func(sarama.ClusterAdmin, string) error, topic string) error {
	admin, err := sarama.NewClusterAdmin(l.cfg.Servers.Brokers, broker.Config("paylab-console"))
	if err != nil {
		return fmt.Errorf("connecting to Kafka: %w", err)
	}
	defer admin.Close()
	for _, t := range []string{topic, topic + ".dlq"} {
		if err := op(admin, t); err != nil {
			return fmt.Errorf("topic %s: %w", t, err)
		}
	}
	return nil
}

// Stop ends the processes and drops the replication slot, the databases
// and the topics.
func (l *Local) Stop() {
	for _, p := range l.procs {
		p.sp.Stop(10 * time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, l.cfg.Servers.AdminURL); err == nil {
		if l.slot != "" {
			// Before the orders database: a logical slot keeps its
			// database from being dropped.
			dropSlot(ctx, conn, l.slot)
		}
		for _, svc := range []string{"orders", "ledger", "notifications"} {
			_ = migrate.Drop(ctx, conn, l.slug+"_"+svc)
		}
		conn.Close(context.WithoutCancel(ctx))
	}
	if l.src.Topic != "" {
		_ = l.topics(sarama.ClusterAdmin.DeleteTopic, l.src.Topic)
	}
}

// Target is "local".
func (l *Local) Target() string { return "local" }

// Procs returns the processes; they keep their names and addresses across
// restarts.
func (l *Local) Procs(context.Context) []Proc {
	out := make([]Proc, len(l.procs))
	for i, p := range l.procs {
		out[i] = p.Proc
	}
	return out
}

// APIURL is the orders API.
func (l *Local) APIURL() string { return l.apiURL }

// Sources are the deployment's databases and topic.
func (l *Local) Sources() reconcile.Sources { return l.src }

// LogDir is where the processes' logs are.
func (l *Local) LogDir() string { return l.cfg.LogDir }

// Settings are the current mode, the inbox on and the relays' mode.
func (l *Local) Settings() Settings {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Settings{Mode: l.mode, Inbox: true, RelayMode: l.cfg.RelayMode}
}

// FixedMode is "": the local deployment switches.
func (l *Local) FixedMode() string { return "" }

// SwitchMode stops the orders API and starts it again with OUTBOX_MODE
// mode, on the same database and topic; the relays, idle in the naive
// modes, keep running.
func (l *Local) SwitchMode(ctx context.Context, mode string) error {
	if !slices.Contains(Modes, mode) {
		return fmt.Errorf("mode %q is not one of %v", mode, Modes)
	}
	l.switching.Lock()
	defer l.switching.Unlock()
	orders := l.procs[0].sp
	orders.Stop(10 * time.Second)
	env := slices.Clone(orders.Env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "OUTBOX_MODE=") {
			env[i] = "OUTBOX_MODE=" + mode
		}
	}
	orders.Env = env
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := orders.Start(sctx); err != nil {
		return fmt.Errorf("starting the orders API in %s mode: %w", mode, err)
	}
	l.mu.Lock()
	l.mode = mode
	l.mu.Unlock()
	return nil
}

// grantReplication gives the orders role the REPLICATION attribute its
// WAL relays' replication connections need.
func grantReplication(ctx context.Context, adminURL string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting as admin: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return migrate.GrantReplication(ctx, conn, "orders")
}

// dropSlot drops the replication slot once no reader holds it: the
// walsender of a relay that just stopped may take a moment to go. It gives
// up when ctx ends.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) {
	for {
		var exists bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&exists)
		if err != nil || !exists {
			return
		}
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
