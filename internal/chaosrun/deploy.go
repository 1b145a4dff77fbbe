package chaosrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/internal/admin"
	"github.com/paylab/paylab/internal/chaos"
	"github.com/paylab/paylab/internal/localstack"
	"github.com/paylab/paylab/internal/reconcile"
	"github.com/paylab/paylab/internal/supervise"
)

// token guards the chaos controls of the processes a run starts.
const token = "paylab-chaos-run"

// Deployment is one scenario's set of processes: the orders API, its relays,
// the ledger and notifications, each on its own ports, with databases and a
// topic of the scenario's own.
type Deployment struct {
	env           *Env
	Orders        *supervise.Process
	Relays        []*supervise.Process
	Ledger        *supervise.Process
	Notifications *supervise.Process
	APIURL        string
	Src           reconcile.Sources
	opts          options
	admin         map[*supervise.Process]string
}

// options are the knobs a scenario turns.
type options struct {
	mode         string // OUTBOX_MODE
	inboxEnabled bool
	relays       int
	leaseTTL     time.Duration
}

func (e *Env) deploy(ctx context.Context, name string, o options) (*Deployment, error) {
	d := &Deployment{env: e, opts: o, admin: map[*supervise.Process]string{}}
	slug := strings.ReplaceAll(name, "-", "_")
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
	brokers := strings.Join(e.kafka.Brokers(), ",")
	d.Src = reconcile.Sources{
		OrdersURL: urls["orders"], LedgerURL: urls["ledger"], NotificationsURL: urls["notifications"],
		Brokers: e.kafka.Brokers(), Topic: topic,
	}
	// Each process's environment extends these; slices.Clip makes every
	// append copy, so no two processes share a backing array.
	common := []string{"KAFKA_BROKERS=" + brokers, "LOG_LEVEL=warn", "CHAOS_ENABLED=true", "CHAOS_TOKEN=" + token}

	apiPort, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	d.APIURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	if d.Orders, err = d.process(name, "orders", "orders", nil, append(slices.Clip(common),
		"DATABASE_URL="+urls["orders"], "ORDERS_TOPIC="+topic, "OUTBOX_MODE="+o.mode,
		fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", apiPort))); err != nil {
		return nil, err
	}
	relays := o.relays
	if o.mode != "outbox" {
		relays = 0
	}
	for i := range relays {
		p, err := d.process(name, fmt.Sprintf("relay-%d", i), "orders", []string{"relay"}, append(slices.Clip(common),
			"DATABASE_URL="+urls["orders"], fmt.Sprintf("RELAY_ID=relay-%d", i),
			"RELAY_LEASE_TTL="+o.leaseTTL.String(), "RELAY_POLL_INTERVAL=250ms", "RELAY_STATS_INTERVAL=1s"))
		if err != nil {
			return nil, err
		}
		d.Relays = append(d.Relays, p)
	}
	inbox := "INBOX_ENABLED=" + strconv.FormatBool(o.inboxEnabled)
	consumer := append(slices.Clip(common), "ORDERS_TOPIC="+topic, "DEAD_LETTER_TOPIC="+topic+".dlq", inbox)
	ledgerHTTP, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	if d.Ledger, err = d.process(name, "ledger", "ledger", nil, append(slices.Clip(consumer),
		"DATABASE_URL="+urls["ledger"], "CONSUMER_GROUP=ledger-"+name,
		fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", ledgerHTTP))); err != nil {
		return nil, err
	}
	if d.Notifications, err = d.process(name, "notifications", "notifications", nil, append(slices.Clip(consumer),
		"DATABASE_URL="+urls["notifications"], "CONSUMER_GROUP=notifications-"+name,
		"SMTP_ADDR="+e.smtp)); err != nil {
		return nil, err
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, p := range d.all() {
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

// process prepares a supervised run of binary, named name, with its own
// admin port.
func (d *Deployment) process(scenario, name, binary string, args, env []string) (*supervise.Process, error) {
	port, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(d.env.LogDir, scenario+"-"+name+".log"))
	if err != nil {
		return nil, err
	}
	admin := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := &supervise.Process{
		Name: name, Path: filepath.Join(d.env.Bin, binary), Args: args,
		Env:      append(env, fmt.Sprintf("ADMIN_ADDR=127.0.0.1:%d", port)),
		ReadyURL: admin + "/readyz", Restart: true, Log: log,
	}
	d.admin[p] = admin
	return p, nil
}

func (d *Deployment) all() []*supervise.Process {
	return append([]*supervise.Process{d.Orders, d.Ledger, d.Notifications}, d.Relays...)
}

// Stop stops every process.
func (d *Deployment) Stop() {
	for _, p := range d.all() {
		p.Stop(10 * time.Second)
	}
}

// Arm arms a fault on one process over its admin listener.
func (d *Deployment) Arm(ctx context.Context, p *supervise.Process, point string, f chaos.Fault) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, d.admin[p]+"/chaos/faults/"+point, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("arming %s on %s: %w", point, p.Name, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("arming %s on %s: %s %s", point, p.Name, res.Status, b)
	}
	return nil
}

// CrashRepeatedly arms a one-shot crash at point, and again each time the
// supervisor has brought the process back, until it crashed times times or
// ctx ends. It returns how many crashes happened.
func (d *Deployment) CrashRepeatedly(ctx context.Context, p *supervise.Process, point string, times int) int {
	crashes := 0
	for crashes < times && ctx.Err() == nil {
		before := p.Restarts()
		if err := p.WaitReady(ctx); err != nil {
			return crashes
		}
		if err := d.Arm(ctx, p, point, chaos.Fault{Action: chaos.Crash, Count: 1}); err != nil {
			continue // restarting; try again
		}
		for p.Restarts() == before {
			select {
			case <-ctx.Done():
				return crashes
			case <-time.After(20 * time.Millisecond):
			}
		}
		crashes++
	}
	return crashes
}

// Metric reads one Prometheus sample (summed over its series) from a
// process's /metrics.
func (d *Deployment) Metric(ctx context.Context, p *supervise.Process, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.admin[p]+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sum, found := admin.SumSamples(res.Body, name)
	if !found {
		return 0, fmt.Errorf("%s: no metric %s", p.Name, name)
	}
	return sum, nil
}
