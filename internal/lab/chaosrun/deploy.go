package chaosrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
	// relayMode is the RELAY_MODE the relays start in; "" for the run's.
	relayMode string
	// relayEnv is added to every relay's environment.
	relayEnv []string
	// databases, by service, are databases (their owners' URLs), migrated
	// already, instead of fresh ones on the run's server; slot, when set,
	// the WAL relays' replication slot, instead of one of the deployment's
	// own (both: a Patroni cluster's, pgcluster.go).
	databases map[string]string
	slot      string
	// wal: the scenario drives the WAL relay's slot and publication as the
	// server's superuser and starts relays of its own, which only a local
	// run with --relay-mode wal can do.
	wal bool
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
	relayMode := cmp.Or(o.relayMode, e.RelayMode)
	urls := map[string]string{}
	for _, svc := range []string{"orders", "ledger", "notifications"} {
		if u, ok := o.databases[svc]; ok {
			urls[svc] = u
			continue
		}
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
		RelayMode:   relayMode,
	}
	apiPort, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	d.APIURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	layout := Layout{
		Brokers: e.brokers, SMTPAddr: e.smtp, Token: token, Topic: topic,
		OrdersURL: urls["orders"], LedgerURL: urls["ledger"], NotificationsURL: urls["notifications"],
		RuntimeRoles: true,
		APIAddr:      fmt.Sprintf("127.0.0.1:%d", apiPort), Mode: o.mode, InboxEnabled: o.inboxEnabled,
		Relays: o.relays, RelayMode: relayMode, LeaseTTL: o.leaseTTL, Unfenced: o.unfenced,
		Ledgers: o.ledgers, LedgerGroup: d.LedgerGroup, NotificationsGroup: "notifications-" + name,
	}
	if o.mode != "outbox" {
		layout.Relays = 0
	}
	var slot string
	if e.RelayMode == RelayWAL && layout.Relays > 0 {
		// Slots are server-wide and every scenario of a run shares the
		// server: each deployment streams a slot of its own, dropped when
		// it stops (a slot nobody reads holds the server's WAL). Relays
		// that start in another mode are told it too, for the WAL relays
		// a scenario may start later.
		slot = cmp.Or(o.slot, walSlot(slug))
		layout.Slot = slot
	}
	local := &localServers{Env: e, d: d, scenario: name, layout: layout, relayEnv: o.relayEnv, slot: slot,
		relays: map[*Process]*supervise.Process{}}
	d.servers = local
	specs, err := layout.Specs()
	if err != nil {
		return nil, err
	}
	for _, spec := range specs {
		if spec.Role == RoleRelay {
			spec.Env = append(slices.Clip(spec.Env), o.relayEnv...)
		}
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
			local.relays[p] = sp
			local.started++
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

// localServers is what a local deployment may do beyond the servers every
// scenario of the run shares (Env): start relays of its own and stop them
// for good while a scenario runs, and reach its databases as the server's
// superuser.
type localServers struct {
	*Env
	d        *Deployment
	scenario string // the deployment's name, of its processes' logs
	layout   Layout
	relayEnv []string
	slot     string // the replication slot of its WAL relays; "" without one
	started  int    // relays started so far: the next is relay-<started>
	relays   map[*Process]*supervise.Process
}

// startRelay starts one more relay, relay-<n>, in RELAY_MODE mode, on the
// deployment's slot and publication, supervised like the others (restarted
// whenever it exits); it joins d.Relays. It returns once the process is
// launched, ready or not: a relay may wait, not ready, or be refused and
// exit, while relays of the other mode run. Only the scenario's own
// goroutine may call it.
func (l *localServers) startRelay(ctx context.Context, mode string) (*Process, error) {
	layout := l.layout
	layout.Relays, layout.RelayMode, layout.Ledgers = l.started+1, mode, 1
	specs, err := layout.Specs()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("relay-%d", l.started)
	i := slices.IndexFunc(specs, func(s Spec) bool { return s.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("the layout has no %s", name)
	}
	spec := specs[i]
	spec.Env = append(slices.Clip(spec.Env), l.relayEnv...)
	sp, p, err := l.process(l.scenario, spec)
	if err != nil {
		return nil, err
	}
	l.started++
	p.timeline.Store(l.d.timeline)
	sp.ReadyURL = "" // launched, not awaited: see above
	if err := sp.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting %s (RELAY_MODE=%s): %w", name, mode, err)
	}
	p.mark("started")
	l.d.supervised = append(l.d.supervised, sp)
	l.relays[p] = sp
	l.d.Relays = append(l.d.Relays, p)
	return p, nil
}

// restarts counts how often the relay p exited and was started again.
func (l *localServers) restarts(p *Process) int {
	if sp, ok := l.relays[p]; ok {
		return sp.Restarts()
	}
	return 0
}

// stopRelay stops p for good, as an operator retiring it would: SIGTERM,
// so that it finishes its batch and gives up its leases, and SIGKILL after
// 20 s. It leaves d.Relays, and the deployment's stop no longer signals it.
// Only the scenario's own goroutine may call it.
func (l *localServers) stopRelay(p *Process) error {
	sp, ok := l.relays[p]
	if !ok {
		return fmt.Errorf("%s is not a relay of this deployment", p.Name)
	}
	sp.Stop(20 * time.Second)
	delete(l.relays, p)
	l.d.Relays = slices.DeleteFunc(l.d.Relays, func(q *Process) bool { return q == p })
	l.d.supervised = slices.DeleteFunc(l.d.supervised, func(q *supervise.Process) bool { return q == sp })
	p.mark("stopped")
	return nil
}

// superuserURL is the URL of the database dbURL names, for the server's
// superuser.
func (l *localServers) superuserURL(dbURL string) (string, error) {
	db, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("parsing a database URL: %w", err)
	}
	admin, err := url.Parse(l.adminURL)
	if err != nil {
		return "", fmt.Errorf("parsing the superuser URL: %w", err)
	}
	admin.Path = db.Path
	return admin.String(), nil
}

// walSlot is the replication slot the deployment's WAL relays stream.
func (l *localServers) walSlot() string { return l.slot }
