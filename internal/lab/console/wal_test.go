package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/internal/lab/console"
	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// relayMetrics is a WAL relay's registry: its active-reader gauge at
// reading (1 on the reader, 0 on a standby) and what it published.
func relayMetrics(t *testing.T, reading, published float64) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	active := prometheus.NewGauge(prometheus.GaugeOpts{Name: "paylab_outbox_wal_active_reader", Help: "reader"})
	active.Set(reading)
	total := prometheus.NewCounter(prometheus.CounterOpts{Name: "paylab_outbox_published_total", Help: "published"})
	total.Add(published)
	reg.MustRegister(active, total)
	return reg
}

// With the relays in WAL mode the console shows which relay reads the slot
// and which stand by (their active-reader gauges), the reader lease of
// outbox_wal_readers, the slot's position and WAL from
// pg_replication_slots, and offers only the relay's fault points a WAL
// relay reaches.
func TestWALRelaysCard(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	orders := testenv.NewDatabase(t, "orders")
	f := &fake{mode: "outbox", relayMode: console.RelayWAL, src: reconcile.Sources{
		OrdersURL: orders, LedgerURL: testenv.NewDatabase(t, "ledger"),
		NotificationsURL: testenv.NewDatabase(t, "notifications"), Brokers: testenv.Brokers(), Topic: testenv.NewTopic(t, 3),
	}}
	f.procs = []console.Proc{
		{Name: "orders", Role: "orders", Admin: adminListener(t, console.Points("orders"))},
		{Name: "relay-0", Role: "relay", Admin: adminListenerWith(t, console.Points("relay"), relayMetrics(t, 0, 0))},
		{Name: "relay-1", Role: "relay", Admin: adminListenerWith(t, console.Points("relay"), relayMetrics(t, 1, 42))},
		{Name: "ledger", Role: "ledger", Admin: adminListener(t, console.Points("ledger"))},
		{Name: "notifications", Role: "notifications", Admin: adminListener(t, console.Points("notifications"))},
	}

	// The slot, as a relay's SetupWAL leaves it, held by relay-1.
	admin := adminOn(t, ctx, orders)
	slot := "t_console_" + hex.EncodeToString(randomBytes(4))
	if _, err := admin.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the database is dropped: the slot keeps it
		_, _ = admin.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot)
	})
	if _, err := admin.Exec(ctx, `INSERT INTO outbox_wal_readers (slot, owner, leased_until) VALUES ($1, 'relay-1', now() + interval '30 seconds')`, slot); err != nil {
		t.Fatal(err)
	}

	base := serve(t, context.Background(), f)
	var st console.State
	testenv.Eventually(t, 2*time.Minute, "the relays and the slot read", func() bool {
		st = state(t, base)
		return len(st.Procs) == 5 && st.Procs[1].Up && st.Procs[2].Up && st.WAL != nil
	})
	if r0, r1 := st.Procs[1], st.Procs[2]; r0.WALRole != console.WALStandby || r1.WALRole != console.WALReader || r1.Published != 42 {
		t.Errorf("relay-0 %q, relay-1 %q (%v published); want a standby and the reader", r0.WALRole, r1.WALRole, r1.Published)
	}
	w := st.WAL
	if w.Slot != slot || w.Owner != "relay-1" || w.LeaseLeft <= 0 || w.LeaseLeft > 30 || !w.Exists || w.Active ||
		(w.WALStatus != "reserved" && w.WALStatus != "extended") || w.ConfirmedLSN == "" || w.RestartLSN == "" || w.LagBytes < 0 {
		t.Errorf("the slot: %+v", w)
	}
	if len(st.Leases) != 0 || len(st.Problems) != 0 {
		t.Errorf("leases %v, problems %v", st.Leases, st.Problems)
	}
	for _, p := range st.Procs[1:3] {
		if !slices.Equal(p.Points, []string{"relay.after_publish_before_mark"}) {
			t.Errorf("%s offers %v; a WAL relay reaches relay.after_publish_before_mark only", p.Name, p.Points)
		}
	}
	_, page := send(t, http.MethodGet, base+"/", "", "")
	if strings.Contains(page, `data-point="relay.after_lease"`) || !strings.Contains(page, `data-point="relay.after_publish_before_mark"`) ||
		!strings.Contains(page, `data-relay="wal"`) || !strings.Contains(page, "stream the slot, publish, delete") {
		t.Error("the page does not show the WAL relays' card and fault points")
	}

	// The reader's lease expired: the console says so, and that a standby
	// may take it.
	if _, err := admin.Exec(ctx, `UPDATE outbox_wal_readers SET leased_until = now() - interval '5 seconds' WHERE slot = $1`, slot); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the expired lease", func() bool {
		st = state(t, base)
		return st.WAL != nil && st.WAL.Owner == "relay-1" && st.WAL.LeaseLeft < -4
	})
}

// adminOn connects as the admin role to the database of dbURL, until the
// test ends.
func adminOn(t *testing.T, ctx context.Context, dbURL string) *pgx.Conn {
	t.Helper()
	db, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = db.Database
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// bootstrapRoles makes sure the services' roles exist on the stack, as a
// local deployment expects of its servers, under the lock every test takes
// to alter them.
func bootstrapRoles(t *testing.T, ctx context.Context) {
	t.Helper()
	conn, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := testenv.WithRolesLocked(ctx, conn, func() error {
		for _, db := range migrate.Defaults() {
			if err := migrate.EnsureRole(ctx, conn, db.Role, db.Password); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A local deployment with RELAY_MODE=wal, on the real services: one relay
// reads the slot and the other stands by, the slot's confirmed position
// moves as a payment's event is published, the published row is deleted,
// and in the browser the relays card names the reader and the standby, the
// lease holder and the slot, hides the polling relays' leases and uses the
// singular for one capture.
func TestLocalWALRelaysInABrowser(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bootstrapRoles(t, ctx)
	tok := hex.EncodeToString(randomBytes(12))
	logDir := t.TempDir()
	d, err := console.StartLocal(ctx, console.LocalConfig{
		Bin: testenv.BuildServices(t), LogDir: logDir, Token: tok, RelayMode: console.RelayWAL,
		Servers: chaosrun.Servers{AdminURL: testenv.AdminURL(), Brokers: testenv.Brokers(), SMTPAddr: testenv.StartMailpit(t).SMTPAddr},
	})
	if err != nil {
		logs(t, logDir)
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	defer func() {
		if t.Failed() {
			logs(t, d.LogDir())
		}
	}()
	base := serve(t, ctx, d)

	var st console.State
	roles := func() (reader, standby *console.ProcView) {
		for i, p := range st.Procs {
			switch p.WALRole {
			case console.WALReader:
				reader = &st.Procs[i]
			case console.WALStandby:
				standby = &st.Procs[i]
			}
		}
		return reader, standby
	}
	testenv.Eventually(t, 3*time.Minute, "a reader streaming the slot and a standby", func() bool {
		st = state(t, base)
		reader, standby := roles()
		return reader != nil && standby != nil && st.WAL != nil && st.WAL.Exists && st.WAL.Active && st.WAL.Owner == reader.Name
	})
	before := st.WAL.ConfirmedLSN
	for _, p := range d.Procs(ctx) {
		list, err := (&chaos.Client{BaseURL: p.Admin, Token: tok}).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, point := range console.PointsIn(p.Role, console.RelayWAL) {
			if !slices.ContainsFunc(list, func(s chaos.Status) bool { return s.Point == point }) {
				t.Errorf("the page offers %s on %s, which does not declare it", point, p.Name)
			}
		}
	}

	if status, body := send(t, http.MethodPost, base+"/api/load", "Bearer "+tok, `{"count":1,"rate":1}`); status != http.StatusAccepted {
		t.Fatalf("placing a payment: %d %s", status, body)
	}
	testenv.Eventually(t, 3*time.Minute, "the payment's event published from the slot and its row deleted", func() bool {
		st = state(t, base)
		reader, _ := roles()
		return st.Orders.Captures == 1 && st.Outbox.Pending == 0 && st.Kafka.Total >= 1 && st.Ledger.Effects >= 1 &&
			reader != nil && reader.Published >= 1 && st.WAL != nil && lsn(t, st.WAL.ConfirmedLSN) > lsn(t, before)
	})
	if st.Outbox.Dispatched != 0 {
		t.Errorf("%d dispatched rows kept; the WAL relay deletes what it published", st.Outbox.Dispatched)
	}
	reader, standby := roles()

	b := &page{t: t, ctx: browserTab(t, ctx)}
	b.do(chromedp.Navigate(base + "/"))
	b.wait("the relays card", fmt.Sprintf(`document.querySelector('#relays [data-relay=%q] .role.reader') !== null &&
		document.querySelector('#relays [data-relay=%q] .role.standby') !== null &&
		document.querySelector("#wal-lease").textContent.startsWith(%q) &&
		document.querySelector("#wal-slot").textContent.includes("streamed by the reader") &&
		+document.querySelector('[data-k="orders.captures"]').textContent === 1`, reader.Name, standby.Name, reader.Name+", "))
	checks := map[string]string{
		"the WAL text shows":          `getComputedStyle([...document.querySelectorAll("#stage-relays .sub")].find(e => e.textContent.startsWith("stream the slot"))).display !== "none"`,
		"the poll text is hidden":     `getComputedStyle([...document.querySelectorAll("#stage-relays .sub")].find(e => e.textContent.startsWith("claim with leases"))).display === "none"`,
		"the leases are hidden":       `getComputedStyle(document.querySelector("#leases")).display === "none"`,
		"no relay.after_lease toggle": `document.querySelector('.point[data-point="relay.after_lease"]') === null`,
		"one capture, singular":       `document.querySelector('[data-unit="orders.captures"]').textContent === "capture"`,
		"every count's noun agrees": `[...document.querySelectorAll("[data-unit]")].every(el => {
			const n = +document.querySelector('[data-k="' + el.dataset.unit + '"]').textContent;
			return el.textContent === (n === 1 ? el.dataset.one : el.dataset.many);
		})`,
	}
	for what, expr := range checks {
		if !b.eval(expr) {
			t.Errorf("the page: %s does not hold", what)
		}
	}
	b.screenshot("console-wal.png")
}

// browserTab opens headless Chromium, until the test ends.
func browserTab(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1500, 1150))...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	return tab
}

// lsn is a pg_lsn's position ("16/B374D848").
func lsn(t *testing.T, s string) uint64 {
	t.Helper()
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("%q is not an LSN", s)
	}
	return h<<32 | l
}
