package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/lab/supervise"
)

// token guards the chaos controls of the processes a run starts.
const token = "paylab-chaos-run"

// options are the knobs a scenario turns: the configuration its deployment
// needs.
type options struct {
	mode         string // OUTBOX_MODE
	inboxEnabled bool
	relays       int
	leaseTTL     time.Duration
	ledgers      int  // instances in the ledger's consumer group (default 1)
	unfenced     bool // RELAY_LEASE_FENCING=false
}

// deploy starts one scenario's processes: the orders API, its relays, the
// ledger and notifications, each on its own ports, with databases and a
// topic of the scenario's own.
func (e *Env) deploy(ctx context.Context, name string, o options) (*Deployment, error) {
	name = e.prefix + name
	slug := strings.ReplaceAll(name, "-", "_")
	if e.RelayMode == "" {
		e.RelayMode = RelayPoll
	}
	urls := map[string]string{}
	for _, svc := range []string{"orders", "ledger", "notifications"} {
		u, err := e.database(ctx, svc, slug+"_"+svc)
		if err != nil {
			return nil, fmt.Errorf("database for %s: %w", svc, err)
		}
		urls[svc] = u
	}
	topic := "order-events-" + name
	if err := e.topic(topic); err != nil {
		return nil, err
	}
	d := &Deployment{
		Src: reconcile.Sources{
			OrdersURL: urls["orders"], LedgerURL: urls["ledger"], NotificationsURL: urls["notifications"],
			Brokers: e.brokers, Topic: topic,
		},
		LedgerGroup: "ledger-" + name,
		LeaseTTL:    o.leaseTTL,
		RelayMode:   e.RelayMode,
		servers:     e,
	}
	start := func(proc, binary string, args, env []string) (*Process, error) {
		sp, p, err := e.process(name, proc, binary, args, env)
		if err != nil {
			return nil, err
		}
		d.supervised = append(d.supervised, sp)
		return p, nil
	}
	// Each process's environment extends these; slices.Clip makes every
	// append copy, so no two processes share a backing array.
	common := []string{"KAFKA_BROKERS=" + strings.Join(e.brokers, ","), "LOG_LEVEL=warn", "CHAOS_ENABLED=true", "CHAOS_TOKEN=" + token}

	apiPort, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	d.APIURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	if d.Orders, err = start("orders", "orders", nil, append(slices.Clip(common),
		"DATABASE_URL="+urls["orders"], "ORDERS_TOPIC="+topic, "OUTBOX_MODE="+o.mode,
		fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", apiPort))); err != nil {
		return nil, err
	}
	relays := o.relays
	if o.mode != "outbox" {
		relays = 0
	}
	relayEnv := append(slices.Clip(common), "RELAY_MODE="+e.RelayMode,
		"RELAY_LEASE_TTL="+o.leaseTTL.String(), "RELAY_POLL_INTERVAL=250ms", "RELAY_STATS_INTERVAL=1s",
		"RELAY_LEASE_FENCING="+strconv.FormatBool(!o.unfenced))
	var slot string
	if e.RelayMode == RelayWAL && relays > 0 {
		// Slots are server-wide and every scenario of a run shares the
		// server: each deployment streams a slot of its own, dropped when
		// it stops (a slot nobody reads holds the server's WAL).
		slot = walSlot(slug)
		relayEnv = append(relayEnv, "RELAY_SLOT="+slot)
	}
	for i := range relays {
		// Each relay's sessions carry its name (application_name), as its
		// leases do (lease_owner): a scenario can tell who wrote a row.
		id := fmt.Sprintf("relay-%d", i)
		p, err := start(id, "orders", []string{"relay"}, append(slices.Clip(relayEnv),
			"RELAY_ID="+id, "DATABASE_URL="+withParam(urls["orders"], "application_name", id)))
		if err != nil {
			return nil, err
		}
		d.Relays = append(d.Relays, p)
	}
	inbox := "INBOX_ENABLED=" + strconv.FormatBool(o.inboxEnabled)
	consumer := append(slices.Clip(common), "ORDERS_TOPIC="+topic, "DEAD_LETTER_TOPIC="+topic+".dlq", inbox)
	for i := range max(o.ledgers, 1) {
		ledgerHTTP, err := localstack.FreePort()
		if err != nil {
			return nil, err
		}
		proc := "ledger"
		if i > 0 {
			proc = fmt.Sprintf("ledger-%d", i)
		}
		p, err := start(proc, "ledger", nil, append(slices.Clip(consumer),
			"DATABASE_URL="+urls["ledger"], "CONSUMER_GROUP="+d.LedgerGroup,
			fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", ledgerHTTP)))
		if err != nil {
			return nil, err
		}
		d.Ledgers = append(d.Ledgers, p)
	}
	d.Ledger = d.Ledgers[0]
	if d.Notifications, err = start("notifications", "notifications", nil, append(slices.Clip(consumer),
		"DATABASE_URL="+urls["notifications"], "CONSUMER_GROUP=notifications-"+name,
		"SMTP_ADDR="+e.smtp)); err != nil {
		return nil, err
	}
	d.stop = func() {
		for _, p := range d.supervised {
			p.Stop(10 * time.Second)
		}
		if slot != "" {
			e.dropSlot(slot)
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, p := range d.supervised {
		g.Go(func() error {
			sctx, cancel := context.WithTimeout(gctx, 60*time.Second)
			defer cancel()
			return p.Start(sctx)
		})
	}
	if err := g.Wait(); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// process prepares a supervised run of binary, named name, restarted
// whenever it exits, with its own admin port; the local target kills it with
// SIGKILL.
func (e *Env) process(scenario, name, binary string, args, env []string) (*supervise.Process, *Process, error) {
	port, err := localstack.FreePort()
	if err != nil {
		return nil, nil, err
	}
	log, err := os.Create(filepath.Join(e.LogDir, scenario+"-"+name+".log"))
	if err != nil {
		return nil, nil, err
	}
	adminURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	sp := &supervise.Process{
		Name: name, Path: filepath.Join(e.Bin, binary), Args: args,
		Env:      append(env, fmt.Sprintf("ADMIN_ADDR=127.0.0.1:%d", port)),
		ReadyURL: adminURL + "/readyz", Restart: true, Log: log,
	}
	p := newProcess(name, adminURL, token, func(context.Context) error { sp.Kill(); return nil })
	p.signal = func(sig syscall.Signal) error {
		pid := sp.Pid()
		if pid == 0 {
			return errors.New("not running")
		}
		return syscall.Kill(pid, sig)
	}
	return sp, p, nil
}

// withParam adds a query parameter to a database URL.
func withParam(dbURL, key, value string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
