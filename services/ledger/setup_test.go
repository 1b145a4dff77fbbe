package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"

	"github.com/paylab/paylab/api/apitest"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/testkit/consumertest"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/ledger/internal/ledgerdb"
	"github.com/paylab/paylab/services/ledger/internal/ledgerhttp"
)

// TestMain runs the tests, or, in a crash test's child process, a real
// ledger configured from the environment like the binary.
func TestMain(m *testing.M) {
	consumertest.Main(m, func(ctx context.Context, fault consumersvc.FaultFunc) error {
		cfg, err := loadConfig()
		if err != nil {
			return err
		}
		return serve(ctx, cfg, slog.New(slog.NewJSONHandler(os.Stderr, nil)), fault)
	})
}

// fixture is one ledger on its own database and topics.
type fixture struct {
	*consumertest.Fixture
}

func newFixture(t *testing.T, partitions int32) *fixture {
	t.Helper()
	f := &fixture{consumertest.NewFixture(t, "ledger", partitions)}
	t.Cleanup(f.checkInvariant)
	return f
}

func (f *fixture) config(inboxEnabled bool) config {
	return config{Config: f.Config("ledger", inboxEnabled), HTTPAddr: "127.0.0.1:0", InboxBatchSize: 1}
}

// start runs a ledger in this process until the test ends; it returns the
// service and the base URL of its read API.
func (f *fixture) start(cfg config) (*consumersvc.Service, string) {
	a, api, _ := f.startWithAdmin(cfg)
	return a, api
}

// startWithAdmin is start that also returns the admin listener's base URL.
func (f *fixture) startWithAdmin(cfg config) (*consumersvc.Service, string, string) {
	f.T.Helper()
	return f.startWithFault(cfg, nil)
}

// startWithFault is startWithAdmin with the fault points wired to fault.
func (f *fixture) startWithFault(cfg config, fault consumersvc.FaultFunc) (*consumersvc.Service, string, string) {
	f.T.Helper()
	a, err := open(context.Background(), cfg, slog.New(slog.DiscardHandler), fault)
	if err != nil {
		f.T.Fatal(err)
	}
	httpLn := testenv.Listen(f.T)
	// Every request the tests send to the read API, and every response, is
	// checked against api/openapi.yaml.
	sec := ledgerhttp.Security{Keys: apikey.NewAuthenticator(a.Pool, apikey.AuthConfig{})}
	api := apitest.ContractOf(f.T, apitest.Ledger).Handler(f.T, ledgerhttp.Routes(a.Pool, a.Log, sec))
	admin := f.Run(a, consumersvc.Server{Handler: api, Listener: httpLn})
	return a, "http://" + httpLn.Addr().String(), admin
}

// checkInvariant asserts the ledger's invariant: per currency, all postings
// sum to zero.
func (f *fixture) checkInvariant() {
	totals, err := ledgerdb.New(f.Pool).PostingTotals(context.Background())
	if err != nil {
		f.T.Errorf("reading posting totals: %v", err)
		return
	}
	for _, tot := range totals {
		if tot.Total != 0 {
			f.T.Errorf("invariant broken: postings in %s sum to %d", tot.Currency, tot.Total)
		}
	}
}

// key creates an API key of merchant in the ledger's database.
func (f *fixture) key(merchant string) string {
	f.T.Helper()
	key, _, err := apikey.NewStore(f.Pool).Create(context.Background(), merchant, "test")
	if err != nil {
		f.T.Fatal(err)
	}
	return key
}

// getJSON GETs url with key and decodes a 200's body into v.
func getJSON(t *testing.T, key, url string, v any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, body)
		}
	}
	return resp.StatusCode
}
