package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
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
	apiPort, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	d.APIURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	layout := Layout{
		Brokers: e.brokers, SMTPAddr: e.smtp, Token: token, Topic: topic,
		OrdersURL: urls["orders"], LedgerURL: urls["ledger"], NotificationsURL: urls["notifications"],
		APIAddr: fmt.Sprintf("127.0.0.1:%d", apiPort), Mode: o.mode, InboxEnabled: o.inboxEnabled,
		Relays: o.relays, RelayMode: e.RelayMode, LeaseTTL: o.leaseTTL, Unfenced: o.unfenced,
		Ledgers: o.ledgers, LedgerGroup: d.LedgerGroup, NotificationsGroup: "notifications-" + name,
	}
	if o.mode != "outbox" {
		layout.Relays = 0
	}
	var slot string
	if e.RelayMode == RelayWAL && layout.Relays > 0 {
		// Slots are server-wide and every scenario of a run shares the
		// server: each deployment streams a slot of its own, dropped when
		// it stops (a slot nobody reads holds the server's WAL).
		slot = walSlot(slug)
		layout.Slot = slot
	}
	specs, err := layout.Specs()
	if err != nil {
		return nil, err
	}
	for _, spec := range specs {
		sp, p, err := e.process(name, spec)
		if err != nil {
			return nil, err
		}
		d.supervised = append(d.supervised, sp)
		switch spec.Role {
		case RoleOrders:
			d.Orders = p
		case RoleRelay:
			d.Relays = append(d.Relays, p)
		case RoleLedger:
			d.Ledgers = append(d.Ledgers, p)
		case RoleNotifications:
			d.Notifications = p
		}
	}
	d.Ledger = d.Ledgers[0]
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

// process prepares a supervised run of spec, restarted whenever it exits,
// with its own admin port; the local target kills it with SIGKILL.
func (e *Env) process(scenario string, spec Spec) (*supervise.Process, *Process, error) {
	log, err := os.Create(filepath.Join(e.LogDir, scenario+"-"+spec.Name+".log"))
	if err != nil {
		return nil, nil, err
	}
	sp, adminURL, err := spec.Supervise(e.Bin, log)
	if err != nil {
		log.Close()
		return nil, nil, err
	}
	p := newProcess(spec.Name, adminURL, token, func(context.Context) error { sp.Kill(); return nil })
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
