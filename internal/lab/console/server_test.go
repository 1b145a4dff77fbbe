package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/lab/console"
	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

const token = "the-deployments-token"

// fake is a deployment of real admin listeners (chaos on, behind token) and
// real, empty databases, whose mode switch only counts.
type fake struct {
	procs     []console.Proc
	src       reconcile.Sources
	relayMode string // console.RelayPoll unless set

	mu       sync.Mutex
	mode     string
	switches []string
}

func (f *fake) Target() string                       { return "local" }
func (f *fake) Procs(context.Context) []console.Proc { return f.procs }
func (f *fake) APIURL() string                       { return "http://127.0.0.1:1" }
func (f *fake) Sources() reconcile.Sources           { return f.src }
func (f *fake) FixedMode() string                    { return "" }
func (f *fake) Settings() console.Settings {
	f.mu.Lock()
	defer f.mu.Unlock()
	relayMode := f.relayMode
	if relayMode == "" {
		relayMode = console.RelayPoll
	}
	return console.Settings{Mode: f.mode, Inbox: true, RelayMode: relayMode}
}
func (f *fake) SwitchMode(_ context.Context, mode string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.switches = append(f.switches, mode)
	f.mode = mode
	return nil
}

func (f *fake) switched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.switches...)
}

// adminListener serves what a process's admin listener serves, with its
// fault points declared and its chaos controls behind token.
func adminListener(t *testing.T, points []string) string {
	t.Helper()
	return adminListenerWith(t, points, prometheus.NewRegistry())
}

// adminListenerWith is adminListener serving metrics of metrics.
func adminListenerWith(t *testing.T, points []string, metrics *prometheus.Registry) string {
	t.Helper()
	reg := chaos.NewRegistry()
	reg.Points(append(points, "elsewhere.some_point")...)
	r := admin.Handler(metrics, nil)
	if err := chaos.Mount(r, reg, true, token); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

// setup serves a console of a fake deployment and returns its URL.
func setup(t *testing.T) (*fake, string) {
	t.Helper()
	f := &fake{mode: "outbox", src: reconcile.Sources{
		OrdersURL: testenv.NewDatabase(t, "orders"), LedgerURL: testenv.NewDatabase(t, "ledger"),
		NotificationsURL: testenv.NewDatabase(t, "notifications"), Brokers: testenv.Brokers(), Topic: testenv.NewTopic(t, 3),
	}}
	for _, p := range []struct{ name, role string }{{"orders", "orders"}, {"relay-0", "relay"}, {"ledger", "ledger"}, {"notifications", "notifications"}} {
		f.procs = append(f.procs, console.Proc{Name: p.name, Role: p.role, Admin: adminListener(t, console.Points(p.role))})
	}
	return f, serve(t, context.Background(), f)
}

// serve runs the console of d, collecting, until the test ends and returns
// its URL (http://127.0.0.1:port, a host it answers).
func serve(t *testing.T, ctx context.Context, d console.Deployment) string {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hosts, err := console.AllowHosts(hs.Listener.Addr().String())
	if err != nil {
		hs.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	srv, err := console.New(ctx, d, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		hs.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	hs.Config.Handler = srv.Handler(hosts)
	hs.Start()
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	return hs.URL
}

// send sends a request to the console, with authorization when not empty.
func send(t *testing.T, method, u, authorization, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A toggle without the deployment's token is refused by the process itself
// — the console adds no token of its own — and arms nothing; with it, the
// fault is armed on the process.
func TestTogglesAreTheProcessesToRefuse(t *testing.T) {
	t.Parallel()
	f, base := setup(t)
	orders := &chaos.Client{BaseURL: f.procs[0].Admin, Token: token}
	const point = "orders.after_commit_before_publish"
	arm := base + "/api/procs/orders/faults/" + point
	for name, authorization := range map[string]string{"no token": "", "a wrong token": "Bearer not-the-token", "not a bearer": token} {
		status, body := send(t, http.MethodPut, arm, authorization, `{"action":"crash","count":1}`)
		if status != http.StatusUnauthorized || !strings.Contains(body, "missing or wrong bearer token") {
			t.Errorf("%s: %d %s, want the process's 401", name, status, body)
		}
		if st, err := orders.Status(context.Background(), point); err != nil || st.Armed {
			t.Errorf("%s: the fault is armed: %+v %v", name, st, err)
		}
		if status, _ := send(t, http.MethodPost, base+"/api/procs/ledger/kill", authorization, ""); status != http.StatusUnauthorized {
			t.Errorf("%s: kill answered %d, want 401", name, status)
		}
	}
	status, body := send(t, http.MethodPut, arm, "Bearer "+token, `{"action":"error","probability":0.5}`)
	if status != http.StatusOK {
		t.Fatalf("with the token: %d %s", status, body)
	}
	if st, err := orders.Status(context.Background(), point); err != nil || !st.Armed || st.Fault.Action != chaos.Error {
		t.Errorf("with the token the fault is not armed: %+v %v", st, err)
	}
	// The fault list: each process's own points, with the token only.
	status, body = send(t, http.MethodGet, base+"/api/faults", "Bearer "+token, "")
	var faults map[string]struct {
		Status int
		Points []chaos.Status
	}
	if err := json.Unmarshal([]byte(body), &faults); status != http.StatusOK || err != nil {
		t.Fatalf("faults: %d %s %v", status, body, err)
	}
	o := faults["orders"]
	armed := map[string]bool{}
	for _, p := range o.Points {
		armed[p.Point] = p.Armed
	}
	if o.Status != 200 || len(armed) != len(console.Points("orders")) || !armed[point] || armed["orders.before_commit"] {
		t.Errorf("orders' faults (its own points, one armed): %+v", o)
	}
	if status, body = send(t, http.MethodGet, base+"/api/faults", "", ""); !strings.Contains(body, `"status":401`) {
		t.Errorf("faults without a token: %d %s", status, body)
	}
	if status, _ := send(t, http.MethodDelete, base+"/api/procs/orders/faults", "Bearer "+token, ""); status != http.StatusNoContent {
		t.Errorf("disarm all: %d", status)
	}
	if st, _ := orders.Status(context.Background(), point); st.Armed {
		t.Error("still armed after disarm all")
	}
	if status, _ := send(t, http.MethodPut, base+"/api/procs/nobody/faults/"+point, "Bearer "+token, `{}`); status != http.StatusNotFound {
		t.Errorf("an unknown process: %d", status)
	}
}

// Switching the mode restarts processes: only a token the orders API takes
// may do it.
func TestModeSwitchNeedsTheToken(t *testing.T) {
	t.Parallel()
	f, base := setup(t)
	for _, authorization := range []string{"", "Bearer wrong"} {
		if status, body := send(t, http.MethodPost, base+"/api/mode", authorization, `{"mode":"naive"}`); status != http.StatusUnauthorized {
			t.Errorf("%q: %d %s, want 401", authorization, status, body)
		}
	}
	if status, _ := send(t, http.MethodPost, base+"/api/mode", "Bearer "+token, `{"mode":"yolo"}`); status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown mode: %d", status)
	}
	if got := f.switched(); len(got) != 0 {
		t.Fatalf("switched without the token: %v", got)
	}
	if status, body := send(t, http.MethodPost, base+"/api/mode", "Bearer "+token, `{"mode":"naive"}`); status != http.StatusAccepted {
		t.Fatalf("with the token: %d %s", status, body)
	}
	testenv.Eventually(t, 2*time.Minute, "the switch", func() bool { return len(f.switched()) == 1 && state(t, base).Switching == "" })
	st := state(t, base)
	if st.Settings.Mode != "naive" || !strings.Contains(st.Verify.Since, "switch to naive") {
		t.Errorf("after the switch: mode %q, verify since %q", st.Settings.Mode, st.Verify.Since)
	}
}

// The page and its state show counts and names: never an address, a
// database URL or a token.
func TestStateShowsNoAddressOrSecret(t *testing.T) {
	t.Parallel()
	f, base := setup(t)
	var st console.State
	testenv.Eventually(t, 2*time.Minute, "every process up", func() bool {
		st = state(t, base)
		return len(st.Procs) == 4 && st.Procs[0].Up && st.Procs[3].Up && st.Ledger.Up && len(st.Kafka.Partitions) == 3
	})
	if st.Orders.Captures != 0 || st.Outbox.Pending != 0 || st.Kafka.Total != 0 || len(st.Problems) != 0 {
		t.Errorf("an empty deployment: %+v", st)
	}
	// Polling relays: leases, no slot, every relay point offered.
	if relay := st.Procs[1]; st.WAL != nil || relay.WALRole != "" || !slices.Equal(relay.Points, console.Points("relay")) ||
		!slices.Contains(relay.Points, "relay.after_lease") {
		t.Errorf("poll mode: wal %+v, relay %+v", st.WAL, relay)
	}
	_, page := send(t, http.MethodGet, base+"/", "", "")
	_, js := send(t, http.MethodGet, base+"/api/state", "", "")
	for _, text := range []string{page, js} {
		for _, secret := range []string{token, "postgres://", f.src.OrdersURL, hostPort(t, f.procs[0].Admin), f.src.Topic} {
			if strings.Contains(text, secret) {
				t.Errorf("the page shows %q", secret)
			}
		}
	}
	if !strings.Contains(page, `data-point="orders.after_commit_before_publish"`) || !strings.Contains(page, `data-proc="relay-0"`) ||
		!strings.Contains(page, `data-point="relay.after_lease"`) || !strings.Contains(page, `data-relay="poll"`) {
		t.Error("the page has no toggle for the orders API's or the polling relay's fault points")
	}
}

// Every action that changes something needs a token the processes take:
// without one, or with a wrong one, it is refused with 401 and nothing
// happens — no payment placed, no reconciliation run, no fault armed, no
// process killed, no switch; with it, it is done. Reads of the state need
// none.
func TestActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	f, base := setup(t)
	orders := &chaos.Client{BaseURL: f.procs[0].Admin, Token: token}
	const point = "orders.after_commit_before_publish"
	type action struct{ name, method, path, body string }
	arm := action{"arm a fault", http.MethodPut, "/api/procs/orders/faults/" + point, `{"action":"error","count":1}`}
	disarm := action{"disarm it", http.MethodDelete, "/api/procs/orders/faults/" + point, ""}
	verify := action{"verify", http.MethodPost, "/api/verify", "{}"}
	load := action{"place payments", http.MethodPost, "/api/load", `{"count":1,"rate":1}`}
	refused := []action{arm, disarm, verify, load,
		{"disarm all", http.MethodDelete, "/api/procs/ledger/faults", ""},
		{"kill", http.MethodPost, "/api/procs/ledger/kill", ""},
		{"switch the mode", http.MethodPost, "/api/mode", `{"mode":"naive"}`},
	}
	for _, authorization := range []string{"", "Bearer not-the-token"} {
		for _, a := range refused {
			if status, body := send(t, a.method, base+a.path, authorization, a.body); status != http.StatusUnauthorized {
				t.Errorf("%s with authorization %q: %d %s, want 401", a.name, authorization, status, body)
			}
		}
	}
	st := state(t, base)
	if st.Load.Count != 0 || st.Verify.Running || st.Verify.Report != nil || len(f.switched()) != 0 {
		t.Errorf("refused actions were done: load %+v, verify %+v, switched %v", st.Load, st.Verify, f.switched())
	}
	if s, err := orders.Status(context.Background(), point); err != nil || s.Armed {
		t.Errorf("armed without the token: %+v %v", s, err)
	}
	for _, c := range []struct {
		a    action
		want int
	}{{arm, http.StatusOK}, {disarm, http.StatusNoContent}, {verify, http.StatusAccepted}, {load, http.StatusAccepted}} {
		if status, body := send(t, c.a.method, base+c.a.path, "Bearer "+token, c.a.body); status != c.want {
			t.Errorf("%s with the token: %d %s, want %d", c.a.name, status, body, c.want)
		}
	}
	// The load and the verification started (their state is open to read).
	testenv.Eventually(t, 2*time.Minute, "the payments placed and the verification done", func() bool {
		st := state(t, base)
		return st.Load.Count == 1 && !st.Load.Running && !st.Verify.Running && (st.Verify.Report != nil || st.Verify.Error != "")
	})
	if s, err := orders.Status(context.Background(), point); err != nil || s.Armed || s.Fired != 0 {
		t.Errorf("after arm and disarm with the token: %+v %v", s, err)
	}
}

// A state read needs no token: the page and its state are open.
func TestStateReadsNeedNoToken(t *testing.T) {
	t.Parallel()
	_, base := setup(t)
	for _, path := range []string{"/", "/api/state", "/static/console.js"} {
		if status, body := send(t, http.MethodGet, base+path, "", ""); status != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s", path, status, body)
		}
	}
	if st := state(t, base); st.Target != "local" || st.Settings.Mode != "outbox" {
		t.Errorf("state without a token: %+v", st)
	}
}

// A deployment whose processes run without chaos controls takes no action
// from the console, whatever token is sent, and says why.
func TestNoActionWithoutChaosControls(t *testing.T) {
	t.Parallel()
	f := &fake{mode: "outbox", src: reconcile.Sources{
		OrdersURL: testenv.NewDatabase(t, "orders"), LedgerURL: testenv.NewDatabase(t, "ledger"),
		NotificationsURL: testenv.NewDatabase(t, "notifications"), Brokers: testenv.Brokers(), Topic: testenv.NewTopic(t, 1),
	}}
	for _, role := range []string{"orders", "ledger", "notifications"} {
		srv := httptest.NewServer(admin.Handler(prometheus.NewRegistry(), nil)) // no chaos routes
		t.Cleanup(srv.Close)
		f.procs = append(f.procs, console.Proc{Name: role, Role: role, Admin: srv.URL})
	}
	base := serve(t, context.Background(), f)
	for _, path := range []string{"/api/load", "/api/verify", "/api/mode"} {
		body := map[string]string{"/api/load": `{"count":1,"rate":1}`, "/api/verify": "{}", "/api/mode": `{"mode":"naive"}`}[path]
		status, answer := send(t, http.MethodPost, base+path, "Bearer "+token, body)
		if status != http.StatusForbidden || !strings.Contains(answer, "CHAOS_ENABLED=false") {
			t.Errorf("POST %s: %d %s, want 403 naming CHAOS_ENABLED=false", path, status, answer)
		}
	}
	if st := state(t, base); st.Load.Count != 0 || st.Verify.Running || len(f.switched()) != 0 {
		t.Errorf("an action was taken: load %+v, verify %+v, switched %v", st.Load, st.Verify, f.switched())
	}
}

// Only the host names the console is reached by on purpose are answered: a
// page of another site whose name resolves to the console (DNS rebinding)
// sends its own name in Host and is refused, reads and actions alike, with
// the right token too.
func TestOtherHostsAreRefused(t *testing.T) {
	t.Parallel()
	f, base := setup(t)
	port := hostPort(t, base)[strings.LastIndex(hostPort(t, base), ":")+1:]
	request := func(host, method, path, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	const point = "orders.after_commit_before_publish"
	for _, host := range []string{"evil.example", "evil.example:" + port, "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port, "localhost:1"} {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodGet, "/", ""}, {http.MethodGet, "/api/state", ""}, {http.MethodGet, "/api/faults", ""},
			{http.MethodPut, "/api/procs/orders/faults/" + point, `{"action":"crash","count":1}`},
			{http.MethodPost, "/api/mode", `{"mode":"naive"}`},
		} {
			if status := request(host, r.method, r.path, r.body); status != http.StatusForbidden {
				t.Errorf("Host %s: %s %s answered %d, want 403", host, r.method, r.path, status)
			}
		}
	}
	orders := &chaos.Client{BaseURL: f.procs[0].Admin, Token: token}
	if s, err := orders.Status(context.Background(), point); err != nil || s.Armed || len(f.switched()) != 0 {
		t.Errorf("a refused host acted: %+v %v, switched %v", s, err, f.switched())
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port} {
		if status := request(host, http.MethodGet, "/api/state", ""); status != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, status)
		}
	}
}

// A page elsewhere cannot drive the console through its user's browser.
func TestCrossOriginRequestsAreRefused(t *testing.T) {
	t.Parallel()
	f, base := setup(t)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/mode", bytes.NewReader([]byte(`{"mode":"naive"}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || len(f.switched()) != 0 {
		t.Errorf("a cross-site request: %d, switched %v", res.StatusCode, f.switched())
	}
}

func state(t *testing.T, base string) console.State {
	t.Helper()
	_, body := send(t, http.MethodGet, base+"/api/state", "", "")
	var st console.State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("state: %v: %s", err, body)
	}
	return st
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
