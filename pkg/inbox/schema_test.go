package inbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

func TestMigrationsRenderTheTableName(t *testing.T) {
	t.Parallel()
	ms, err := inbox.Migrations("shop_inbox")
	if err != nil {
		t.Fatal(err)
	}
	all := ""
	for i, m := range ms {
		if m.Version != i+1 || m.Up == "" || m.Down == "" {
			t.Errorf("migration %d: %+v", i, m)
		}
		all += m.Up + m.Down
	}
	for _, want := range []string{"CREATE TABLE shop_inbox (", "CREATE TABLE shop_inbox_sequences (", "shop_inbox_parked_idx ON shop_inbox "} {
		if !strings.Contains(all, want) {
			t.Errorf("rendered SQL lacks %q", want)
		}
	}
	if strings.Contains(all, "TEMPLATE") {
		t.Error("rendered SQL still holds a template marker")
	}
	for _, bad := range []string{"Shop", "shop-inbox", "s.inbox", strings.Repeat("x", 41)} {
		if _, err := inbox.Migrations(bad); err == nil {
			t.Errorf("Migrations(%q) accepted the name", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := inbox.Config{Brokers: []string{"b:9092"}, Topic: "t", Group: "g",
		Handlers: map[string]inbox.Handler{"T": recordEffect}}
	for _, tc := range []struct {
		name string
		mut  func(*inbox.Config)
		ok   bool
	}{
		{name: "defaults", mut: func(*inbox.Config) {}, ok: true},
		{name: "custom table", mut: func(c *inbox.Config) { c.Table = "shop_inbox" }, ok: true},
		{name: "bad table", mut: func(c *inbox.Config) { c.Table = "shop inbox" }},
		{name: "bad metric prefix", mut: func(c *inbox.Config) { c.MetricPrefix = "shop-inbox" }},
		{name: "no brokers", mut: func(c *inbox.Config) { c.Brokers = nil }},
		{name: "negative batch", mut: func(c *inbox.Config) { c.BatchSize = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mut(&c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// An inbox table of another name, next to the default one: Migrate creates
// it (twice is a no-op), the Runner dedupes and orders with it under its
// own metric names, and the default tables stay empty.
func TestCustomTable(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	for range 2 {
		if err := inbox.Migrate(ctx, f.pool, inbox.Config{Table: "shop_inbox"}); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	reg := prometheus.NewRegistry()
	r := f.start(f.config(func(c *inbox.Config) { c.Table = "shop_inbox"; c.Registerer = reg }))

	first, second := event("cart-1", 1, "OrderCaptured"), event("cart-1", 2, "OrderRefunded")
	f.publish(second, first, first) // early, then the gap filler twice
	testenv.Eventually(t, 60*time.Second, "both events applied", func() bool {
		return f.count("SELECT count(*) FROM effects") == 2
	})
	if got := f.count("SELECT sequence FROM effects ORDER BY id LIMIT 1"); got != 1 {
		t.Errorf("first effect has sequence %d, want 1", got)
	}
	testenv.Eventually(t, 30*time.Second, "the duplicate counted", func() bool { return r.Counts().Duplicates == 1 })
	if got := f.count("SELECT applied_sequence FROM shop_inbox_sequences WHERE aggregate_id = 'cart-1'"); got != 2 {
		t.Errorf("applied sequence %d, want 2", got)
	}
	if got := f.count("SELECT count(*) FROM shop_inbox WHERE status = 'processed'"); got != 2 {
		t.Errorf("%d processed rows in shop_inbox, want 2", got)
	}
	if got := f.count("SELECT (SELECT count(*) FROM inbox) + (SELECT count(*) FROM inbox_sequences)"); got != 0 {
		t.Errorf("%d rows in the default tables, want 0", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, fam := range families {
		found = found || fam.GetName() == "shop_inbox_processed_total"
		if strings.HasPrefix(fam.GetName(), "paylab_inbox") {
			t.Errorf("metric %s under the default prefix", fam.GetName())
		}
	}
	if !found {
		t.Error("no shop_inbox_processed_total metric")
	}
}
