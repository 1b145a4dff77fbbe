package chaosrun

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// standIn starts what docker compose would run — the orders API, two relays,
// the ledger and notifications with their chaos controls on — as the local
// target's supervised processes, restarted whenever they exit like
// containers with a restart policy, on the shared stack. It returns the
// compose-target settings that reach it.
func standIn(t *testing.T, ctx context.Context) (*Deployment, map[string]string) {
	t.Helper()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	e := &Env{
		Bin: testenv.BuildServices(t), LogDir: t.TempDir(),
		adminURL: testenv.AdminURL(), brokers: testenv.Brokers(),
		smtp:   testenv.StartMailpit(t).SMTPAddr,
		prefix: "cc" + hex.EncodeToString(suffix) + "-",
	}
	name := "standin"
	t.Cleanup(func() {
		slug := strings.ReplaceAll(e.prefix+name, "-", "_")
		for _, svc := range []string{"orders", "ledger", "notifications"} {
			testenv.DropDatabase(t, slug+"_"+svc)
		}
		admin, err := sarama.NewClusterAdmin(e.brokers, testenv.KafkaConfig())
		if err != nil {
			t.Logf("deleting the topics: %v", err)
			return
		}
		defer admin.Close()
		for _, topic := range []string{"order-events-" + e.prefix + name, "order-events-" + e.prefix + name + ".dlq"} {
			if err := admin.DeleteTopic(topic); err != nil {
				t.Logf("deleting %s: %v", topic, err)
			}
		}
	})
	// The runtime roles the deployment connects as, as Env.Start creates
	// them on a private server (paylab init does on the shared one).
	if err := migrate.Bootstrap(ctx, e.adminURL, migrate.Defaults()); err != nil {
		t.Fatal(err)
	}
	d, err := e.deploy(ctx, name, options{mode: "outbox", inboxEnabled: true, relays: 2, leaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return d, map[string]string{
		"CHAOS_API_URL":                 d.APIURL,
		"CHAOS_ORDERS_ADMIN_URL":        d.Orders.Admin,
		"CHAOS_RELAY_ADMIN_URLS":        d.Relays[0].Admin + "," + d.Relays[1].Admin,
		"CHAOS_LEDGER_ADMIN_URL":        d.Ledger.Admin,
		"CHAOS_NOTIFICATIONS_ADMIN_URL": d.Notifications.Admin,
		"CHAOS_TOKEN":                   token,
		"CHAOS_RELAY_LEASE_TTL":         "3s",
		"ORDERS_DATABASE_URL":           d.Src.OrdersURL,
		"LEDGER_DATABASE_URL":           d.Src.LedgerURL,
		"NOTIFICATIONS_DATABASE_URL":    d.Src.NotificationsURL,
		"KAFKA_BROKERS":                 strings.Join(d.Src.Brokers, ","),
		"ORDERS_TOPIC":                  d.Src.Topic,
	}
}

// The compose target runs the scenarios on a deployment it did not start,
// over the admin APIs alone: it arms faults and kills processes through
// their chaos controls, the restart policy brings them back, and each
// scenario is judged on what it added to the deployment's history.
func TestComposeTargetRunsScenariosOverTheAdminAPIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d, settings := standIn(t, ctx)
	cfg, err := LoadComposeConfig(settings)
	if err != nil {
		t.Fatal(err)
	}
	target := NewCompose(cfg)
	if err := target.Check(ctx); err != nil {
		t.Fatal(err)
	}
	scenarios, err := Select([]string{
		"outbox-fail-before-commit", "outbox-crash-after-commit", "relay-killed-holding-leases",
		"naive-crash-after-commit", "relay-crash-after-publish-inbox-off", "kafka-down",
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	sizes := Sizes{Payments: 150, Rate: 100, Crashes: 1, Settle: time.Minute}
	var log bytes.Buffer
	results := Run(ctx, target, scenarios, sizes, 3, &log)
	Table(&log, results)
	defer func() {
		if t.Failed() {
			t.Log("\n" + log.String())
		}
	}()
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Scenario] = r
	}

	for _, name := range []string{"outbox-fail-before-commit", "outbox-crash-after-commit", "relay-killed-holding-leases"} {
		r := byName[name]
		if !r.Pass || r.Skipped != "" || r.Error != "" {
			t.Errorf("%s: %s %s %s", name, r.verdict(), r.Skipped, r.Error)
		}
		// Each is judged on its own payments, not on the deployment's
		// history: the second and third run on the first's databases.
		if r.Payments == 0 || r.Payments > sizes.Payments {
			t.Errorf("%s: %d payments counted, want (0, %d]", name, r.Payments, sizes.Payments)
		}
	}
	if r := byName["outbox-crash-after-commit"]; r.Recovery <= 0 || !strings.Contains(r.Note, "orders crashed 1×") {
		t.Errorf("outbox-crash-after-commit: recovery %s, note %q; want the API seen crashing and coming back", r.Recovery, r.Note)
	}
	r := byName["relay-killed-holding-leases"]
	if r.Recovery < 2*time.Second || r.Recovery > 10*time.Second || !strings.Contains(r.Note, "relay-0 ready again") {
		t.Errorf("relay-killed-holding-leases: takeover %s, note %q; want the lease TTL (3s) and the relay back", r.Recovery, r.Note)
	}
	// The processes did exit and were restarted by their supervisor, the
	// stand-in restart policy; the runner only had their URLs.
	for _, p := range d.supervised {
		if p.Name == "orders" || p.Name == "relay-0" {
			if p.Restarts() == 0 {
				t.Errorf("%s was never restarted", p.Name)
			}
		}
	}
	// Found by name instead of listed: CHAOS_RELAY_DISCOVER, resolved by the
	// real resolver, reaches the first relay (localhost is 127.0.0.1, the
	// only address the stand-in's relays listen on, one port each).
	_, relayPort, err := net.SplitHostPort(strings.TrimPrefix(d.Relays[0].Admin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	delete(settings, "CHAOS_RELAY_ADMIN_URLS")
	settings["CHAOS_RELAY_DISCOVER"] = "localhost:" + relayPort
	cfg, err = LoadComposeConfig(settings)
	if err != nil {
		t.Fatal(err)
	}
	discovering := NewCompose(cfg)
	if err := discovering.Check(ctx); err != nil || len(discovering.RelayAdminURLs()) != 1 ||
		discovering.RelayAdminURLs()[0] != d.Relays[0].Admin {
		t.Fatalf("CHAOS_RELAY_DISCOVER=%s: Check = %v, relays %v; want [%s]", settings["CHAOS_RELAY_DISCOVER"], err,
			discovering.RelayAdminURLs(), d.Relays[0].Admin)
	}
	relayScenarios, err := Select([]string{"relay-crash-after-publish", "relay-killed-holding-leases"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Run(ctx, discovering, relayScenarios, Sizes{Payments: 100, Rate: 100, Crashes: 1, Settle: time.Minute}, 3, &log) {
		byName[r.Scenario+" (discovered)"] = r
	}
	if r := byName["relay-crash-after-publish (discovered)"]; !r.Pass || !strings.Contains(r.Note, "relay-0 crashed 1×") {
		t.Errorf("relay-crash-after-publish on the discovered relay: %s %s %s %s", r.verdict(), r.Note, r.Skipped, r.Error)
	}
	if r := byName["relay-killed-holding-leases (discovered)"]; !strings.Contains(r.Skipped, "drives 2 relays, 1 found at CHAOS_RELAY_DISCOVER=localhost:"+relayPort) {
		t.Errorf("relay-killed-holding-leases with one relay found: skipped %q (%s)", r.Skipped, r.verdict())
	}
	for name, want := range map[string]string{
		"naive-crash-after-commit":            "needs OUTBOX_MODE=naive",
		"relay-crash-after-publish-inbox-off": "needs INBOX_ENABLED=false; the deployment runs INBOX_ENABLED=true",
		"kafka-down":                          "stops Kafka",
	} {
		if r := byName[name]; !strings.Contains(r.Skipped, want) || r.Pass || r.verdict() != "SKIP" {
			t.Errorf("%s: skipped %q (%s), want %q", name, r.Skipped, r.verdict(), want)
		}
	}
}
