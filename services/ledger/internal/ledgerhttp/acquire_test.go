package ledgerhttp_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/api/apitest"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
	"github.com/paylab/paylab/services/ledger/internal/ledgerhttp"
)

// When every pooled connection is taken (a stuck database holds them), a
// read waits at most the acquire timeout and is answered 503
// database_unavailable, long before its request deadline; a connection
// freed within the timeout serves it.
func TestReadAPIAcquireTimeout(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	dbURL := testenv.NewDatabase(t, "ledger")
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	capture := testenv.OrderCaptured(orderID, "cus_42", "mer_7", 1999, "EUR")
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return ledger.Apply(ctx, tx, []inbox.Message{{ID: capture.ID, Type: capture.Type, Subject: capture.AggregateID,
			Sequence: capture.Sequence, Data: capture.Payload}})
	}); err != nil {
		t.Fatal(err)
	}
	key := newKey(t, pool, "mer_7")
	const acquire = 300 * time.Millisecond
	sec := ledgerhttp.Security{
		Keys:           apikey.NewAuthenticator(pool, apikey.AuthConfig{TTL: time.Hour}),
		RequestTimeout: 30 * time.Second,
		AcquireTimeout: acquire,
	}
	h := apitest.ContractOf(t, apitest.Ledger).Handler(t, ledgerhttp.Routes(pool, slog.New(slog.DiscardHandler), sec))
	const path = "/v1/accounts/merchant:mer_7"
	// The first read caches the key: the key check needs no connection
	// below.
	if rec := get(t, h, key, "GET", path, nil); rec.Code != http.StatusOK {
		t.Fatalf("with a free connection: %d %s", rec.Code, rec.Body)
	}

	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, "/v1/orders/" + orderID + "/entries"} {
		start := time.Now()
		rec := get(t, h, key, "GET", p, nil)
		took := time.Since(start)
		var prob ledgerhttp.Problem
		_ = json.Unmarshal(rec.Body.Bytes(), &prob)
		if rec.Code != http.StatusServiceUnavailable || prob.Code != "database_unavailable" {
			t.Errorf("GET %s with no free connection: %d %s, want 503 database_unavailable", p, rec.Code, rec.Body)
		}
		if took < acquire || took > acquire+2*time.Second {
			t.Errorf("GET %s answered after %s; want the acquire timeout %s, not the request deadline", p, took, acquire)
		}
	}

	// The other side: a connection freed while a read waits serves it.
	sec.AcquireTimeout = 10 * time.Second
	h = apitest.ContractOf(t, apitest.Ledger).Handler(t, ledgerhttp.Routes(pool, slog.New(slog.DiscardHandler), sec))
	release := time.AfterFunc(acquire, held.Release)
	defer release.Stop()
	if rec := get(t, h, key, "GET", path, nil); rec.Code != http.StatusOK {
		t.Errorf("a connection freed within the acquire timeout: %d %s, want 200", rec.Code, rec.Body)
	}
}
