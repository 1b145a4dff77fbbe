package chaosrun

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

func TestLoadComposeConfig(t *testing.T) {
	t.Parallel()
	if _, err := LoadComposeConfig(map[string]string{}); err == nil || !strings.Contains(err.Error(), "CHAOS_TOKEN is empty") {
		t.Errorf("no token: %v; want CHAOS_TOKEN named (there is no default)", err)
	}
	cfg, err := LoadComposeConfig(map[string]string{"CHAOS_TOKEN": "a-token-of-my-own"})
	if err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	if cfg.OrdersAdminURL != "http://127.0.0.1:9080" || cfg.Token != "a-token-of-my-own" || cfg.OutboxMode != "outbox" ||
		!cfg.InboxEnabled || len(cfg.RelayAdminURLs) != 0 || cfg.Topic != "order-events" ||
		!strings.Contains(cfg.OrdersURL, "127.0.0.1:55432/orders") {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, err = LoadComposeConfig(map[string]string{
		"CHAOS_RELAY_ADMIN_URLS": "http://10.0.0.5:9081,http://10.0.0.6:9081",
		"CHAOS_TOKEN":            "a-token-of-my-own",
		"INBOX_ENABLED":          "false",
		"LEDGER_DATABASE_URL":    "postgres://ledger:x@postgres:5432/ledger",
	})
	if err != nil || len(cfg.RelayAdminURLs) != 2 || cfg.InboxEnabled || cfg.LedgerURL != "postgres://ledger:x@postgres:5432/ledger" {
		t.Errorf("settings not read: %+v, %v", cfg, err)
	}
	cfg, err = LoadComposeConfig(map[string]string{"CHAOS_RELAY_DISCOVER": "relay:9081", "CHAOS_TOKEN": "a-token-of-my-own"})
	if err != nil || cfg.RelayDiscover != "relay:9081" || len(cfg.RelayAdminURLs) != 0 {
		t.Errorf("CHAOS_RELAY_DISCOVER not read: %+v, %v", cfg, err)
	}
	_, err = LoadComposeConfig(map[string]string{
		"CHAOS_API_URL": "orders:8080", "CHAOS_RELAY_ADMIN_URLS": "http://relay:9081,ftp://x", "OUTBOX_MODE": "yolo",
		"CHAOS_RELAY_LEASE_TTL": "-1s",
	})
	for _, name := range []string{"CHAOS_API_URL", "CHAOS_RELAY_ADMIN_URLS", "OUTBOX_MODE", "CHAOS_RELAY_LEASE_TTL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("invalid %s not reported: %v", name, err)
		}
	}
	for value, want := range map[string]string{
		"relay":             "is not host:port",
		":9081":             "is not host:port",
		"http://relay:9081": "is not host:port",
		"relay:admin":       `port "admin" is not a port number`,
		"relay:0":           `port "0" is not a port number`,
		"relay:65536":       `port "65536" is not a port number`,
	} {
		_, err := LoadComposeConfig(map[string]string{"CHAOS_RELAY_DISCOVER": value})
		if err == nil || !strings.Contains(err.Error(), "CHAOS_RELAY_DISCOVER") || !strings.Contains(err.Error(), want) {
			t.Errorf("CHAOS_RELAY_DISCOVER=%s: %v, want %q", value, err, want)
		}
	}
	_, err = LoadComposeConfig(map[string]string{"CHAOS_RELAY_DISCOVER": "relay:9081", "CHAOS_RELAY_ADMIN_URLS": "http://relay:9081"})
	if err == nil || !strings.Contains(err.Error(), "CHAOS_RELAY_ADMIN_URLS and CHAOS_RELAY_DISCOVER are both set") {
		t.Errorf("both relay settings: %v", err)
	}
}

func TestDiscoverAdminURLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The real resolver: localhost is this host (its IPv6 twin, if any, is
	// the same process, not another relay).
	urls, err := DiscoverAdminURLs(ctx, net.DefaultResolver.LookupHost, "localhost:9081")
	if err != nil || !slices.Equal(urls, []string{"http://127.0.0.1:9081"}) {
		t.Errorf("localhost:9081 = %v, %v; want [http://127.0.0.1:9081]", urls, err)
	}
	urls, err = DiscoverAdminURLs(ctx, net.DefaultResolver.LookupHost, "127.0.0.1:9081")
	if err != nil || !slices.Equal(urls, []string{"http://127.0.0.1:9081"}) {
		t.Errorf("127.0.0.1:9081 = %v, %v", urls, err)
	}
	answers := func(addrs ...string) LookupFunc {
		return func(context.Context, string) ([]string, error) { return addrs, nil }
	}
	for _, c := range []struct {
		addrs []string
		want  []string
	}{
		// In address order (not the resolver's round-robin order), each once.
		{[]string{"172.18.0.12", "172.18.0.3", "fd00::3", "172.18.0.3", "::ffff:172.18.0.9"},
			[]string{"http://172.18.0.3:9081", "http://172.18.0.9:9081", "http://172.18.0.12:9081"}},
		{[]string{"fd00::2", "fd00::1"}, []string{"http://[fd00::1]:9081", "http://[fd00::2]:9081"}},
	} {
		urls, err := DiscoverAdminURLs(ctx, answers(c.addrs...), "relay:9081")
		if err != nil || !slices.Equal(urls, c.want) {
			t.Errorf("%v: %v, %v; want %v", c.addrs, urls, err, c.want)
		}
	}
	if _, err := DiscoverAdminURLs(ctx, answers(), "relay:9081"); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Errorf("no address: %v", err)
	}
	if _, err := DiscoverAdminURLs(ctx, answers("relay.local"), "relay:9081"); err == nil || !strings.Contains(err.Error(), "not an IP address") {
		t.Errorf("a name for an address: %v", err)
	}
}

// adminListenersOn serves an admin listener (chaos on, with token) on the
// same free port of each loopback address, as the replicas of a compose
// service listen on one port each at its own address, and returns the port.
func adminListenersOn(t *testing.T, addrs ...string) string {
	t.Helper()
	var port string
	for _, a := range addrs {
		ln, err := net.Listen("tcp", net.JoinHostPort(a, cmp.Or(port, "0")))
		if err != nil {
			t.Skipf("listening on %s: %v", a, err)
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		r := admin.Handler(prometheus.NewRegistry(), nil)
		if err := chaos.Mount(r, chaos.NewRegistry(), true, token); err != nil {
			t.Fatal(err)
		}
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: r}}
		srv.Start()
		t.Cleanup(srv.Close)
	}
	return port
}

// With CHAOS_RELAY_DISCOVER the relays are whatever the name resolves to
// when a scenario starts: a relay added by scaling up is driven from the
// next scenario on, and too few relays skip the scenarios that need more.
func TestComposeDiscoversTheRelaysForEachScenario(t *testing.T) {
	t.Parallel()
	port := adminListenersOn(t, "127.0.0.1", "127.0.0.2", "127.0.0.3")
	up := "http://127.0.0.1:" + port
	cfg, err := LoadComposeConfig(map[string]string{
		"CHAOS_TOKEN": token, "CHAOS_RELAY_DISCOVER": "relay:" + port,
		"CHAOS_ORDERS_ADMIN_URL": up, "CHAOS_LEDGER_ADMIN_URL": up, "CHAOS_NOTIFICATIONS_ADMIN_URL": up,
	})
	if err != nil {
		t.Fatal(err)
	}
	var replicas []string
	var lookups []string
	target := NewCompose(cfg)
	target.Lookup = func(_ context.Context, host string) ([]string, error) {
		lookups = append(lookups, host)
		if replicas == nil {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return replicas, nil
	}
	scenarios, err := Select([]string{"relay-killed-holding-leases"}, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := target.Check(ctx); err == nil || !strings.Contains(err.Error(), "CHAOS_RELAY_DISCOVER=relay:"+port) ||
		!strings.Contains(err.Error(), "no such host") {
		t.Errorf("no relay to be found: Check = %v", err)
	}
	relays := func(d *Deployment) []string {
		var urls []string
		for _, p := range d.Relays {
			urls = append(urls, p.Name+" "+p.Admin)
		}
		return urls
	}
	replicas = []string{"127.0.0.2", "127.0.0.1"}
	if err := target.Check(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := target.Deploy(ctx, scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"relay-0 http://127.0.0.1:" + port, "relay-1 http://127.0.0.2:" + port}
	if got := relays(d); !slices.Equal(got, want) {
		t.Errorf("two replicas: relays %v, want %v", got, want)
	}
	replicas = []string{"127.0.0.3", "127.0.0.2", "127.0.0.1"} // docker compose up -d --scale relay=3
	if d, err = target.Deploy(ctx, scenarios[0]); err != nil {
		t.Fatal(err)
	}
	if got := relays(d); len(got) != 3 || got[2] != "relay-2 http://127.0.0.3:"+port {
		t.Errorf("three replicas: relays %v", got)
	}
	if got := target.RelayAdminURLs(); len(got) != 3 {
		t.Errorf("RelayAdminURLs = %v", got)
	}
	replicas = []string{"127.0.0.1"}
	_, err = target.Deploy(ctx, scenarios[0])
	if !errors.Is(err, ErrSkip) || !strings.Contains(err.Error(), "drives 2 relays, 1 found at CHAOS_RELAY_DISCOVER=relay:"+port) {
		t.Errorf("one replica: Deploy = %v, want a skip naming CHAOS_RELAY_DISCOVER", err)
	}
	for _, host := range lookups {
		if host != "relay" {
			t.Errorf("looked up %q, want relay", host)
		}
	}
	if len(lookups) != 5 {
		t.Errorf("%d lookups, want one per Check and per Deploy (5)", len(lookups))
	}

	// The real resolver: localhost is this host's one relay.
	cfg.RelayDiscover = "localhost:" + port
	target = NewCompose(cfg)
	if err := target.Check(ctx); err != nil || !slices.Equal(target.RelayAdminURLs(), []string{up}) {
		t.Errorf("localhost: Check = %v, relays %v; want [%s]", err, target.RelayAdminURLs(), up)
	}
}

func TestComposeCheckNamesAWrongSetting(t *testing.T) {
	t.Parallel()
	up, disabled := testenv.AdminListener(t, true, token), testenv.AdminListener(t, false, token)
	closed := httptest.NewServer(nil)
	closed.Close()
	for _, c := range []struct {
		name     string
		settings map[string]string
		want     string
	}{
		{"all good", map[string]string{"CHAOS_TOKEN": token}, ""},
		{"wrong token", map[string]string{"CHAOS_TOKEN": "not-the-token"}, "refuses CHAOS_TOKEN"},
		{"chaos disabled", map[string]string{"CHAOS_TOKEN": token, "CHAOS_LEDGER_ADMIN_URL": disabled}, "CHAOS_ENABLED=false"},
		{"down", map[string]string{"CHAOS_TOKEN": token, "CHAOS_RELAY_ADMIN_URLS": closed.URL}, "docker compose up -d"},
	} {
		settings := map[string]string{
			"CHAOS_ORDERS_ADMIN_URL": up, "CHAOS_LEDGER_ADMIN_URL": up, "CHAOS_NOTIFICATIONS_ADMIN_URL": up,
		}
		for k, v := range c.settings {
			settings[k] = v
		}
		cfg, err := LoadComposeConfig(settings)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = NewCompose(cfg).Check(ctx)
		cancel()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Check = %v, want %q", c.name, err, c.want)
		}
	}
}
