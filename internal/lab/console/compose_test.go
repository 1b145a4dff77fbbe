package console_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/lab/console"
)

func TestLoadComposeConfig(t *testing.T) {
	t.Parallel()
	cfg, err := console.LoadComposeConfig(map[string]string{})
	if err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	if cfg.OrdersAdminURL != "http://127.0.0.1:9080" || cfg.OutboxMode != "outbox" || cfg.Topic != "order-events" ||
		!strings.Contains(cfg.OrdersURL, "127.0.0.1:55432/orders") {
		t.Errorf("defaults: %+v", cfg)
	}
	_, err = console.LoadComposeConfig(map[string]string{
		"CHAOS_API_URL": "orders:8080", "OUTBOX_MODE": "yolo", "CHAOS_RELAY_DISCOVER": "relay",
	})
	for _, name := range []string{"CHAOS_API_URL", "OUTBOX_MODE", "CHAOS_RELAY_DISCOVER"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("invalid %s not reported: %v", name, err)
		}
	}
	// The console holds no chaos token: it reads none.
	for _, typ := range []reflect.Type{reflect.TypeFor[console.ComposeConfig](), reflect.TypeFor[console.Listen]()} {
		for f := range typ.Fields() {
			if strings.Contains(f.Tag.Get("env"), "TOKEN") {
				t.Errorf("%s.%s reads %s", typ.Name(), f.Name, f.Tag.Get("env"))
			}
		}
	}
}

// The mode of a compose deployment is its .env's: the switch says so.
func TestComposeModeIsFixed(t *testing.T) {
	t.Parallel()
	cfg, err := console.LoadComposeConfig(map[string]string{"OUTBOX_MODE": "naive", "CHAOS_RELAY_ADMIN_URLS": "http://10.0.0.5:9081,http://10.0.0.6:9081"})
	if err != nil {
		t.Fatal(err)
	}
	d := console.NewCompose(cfg)
	if d.Settings().Mode != "naive" || !strings.Contains(d.FixedMode(), "OUTBOX_MODE=naive") {
		t.Errorf("settings %+v, fixed %q", d.Settings(), d.FixedMode())
	}
	if err := d.SwitchMode(context.Background(), "outbox"); err == nil || !strings.Contains(err.Error(), ".env") {
		t.Errorf("SwitchMode = %v", err)
	}
	var names []string
	for _, p := range d.Procs(context.Background()) {
		names = append(names, p.Name+"/"+p.Role)
	}
	if got := strings.Join(names, " "); got != "orders/orders relay-0/relay relay-1/relay ledger/ledger notifications/notifications" {
		t.Errorf("processes %s", got)
	}
}

// With CHAOS_RELAY_DISCOVER the relays are the addresses its name resolves
// to, one process each.
func TestConsoleComposeDiscoversRelays(t *testing.T) {
	t.Parallel()
	cfg, err := console.LoadComposeConfig(map[string]string{"CHAOS_RELAY_DISCOVER": "relay:9081"})
	if err != nil {
		t.Fatal(err)
	}
	d := console.NewCompose(cfg)
	d.Lookup = func(_ context.Context, host string) ([]string, error) {
		if host != "relay" {
			return nil, errors.New("looked up " + host)
		}
		return []string{"10.0.0.7", "10.0.0.6"}, nil
	}
	var relays []string
	for _, p := range d.Procs(context.Background()) {
		if p.Role == console.RoleRelay {
			relays = append(relays, p.Name+" "+p.Admin)
		}
	}
	if got := strings.Join(relays, ", "); got != "relay-0 http://10.0.0.6:9081, relay-1 http://10.0.0.7:9081" {
		t.Errorf("relays: %s", got)
	}
}
