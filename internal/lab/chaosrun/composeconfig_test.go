package chaosrun

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

func TestLoadComposeConfig(t *testing.T) {
	t.Parallel()
	cfg, err := LoadComposeConfig(map[string]string{})
	if err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	if cfg.OrdersAdminURL != "http://127.0.0.1:9080" || cfg.Token != "change-me-chaos-token" || cfg.OutboxMode != "outbox" ||
		!cfg.InboxEnabled || len(cfg.RelayAdminURLs) != 0 || cfg.Topic != "order-events" ||
		!strings.Contains(cfg.OrdersURL, "127.0.0.1:55432/orders") {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, err = LoadComposeConfig(map[string]string{
		"CHAOS_RELAY_ADMIN_URLS": "http://paylab-relay-1:9081,http://paylab-relay-2:9081",
		"INBOX_ENABLED":          "false",
		"LEDGER_DATABASE_URL":    "postgres://ledger:x@postgres:5432/ledger",
	})
	if err != nil || len(cfg.RelayAdminURLs) != 2 || cfg.InboxEnabled || cfg.LedgerURL != "postgres://ledger:x@postgres:5432/ledger" {
		t.Errorf("settings not read: %+v, %v", cfg, err)
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
