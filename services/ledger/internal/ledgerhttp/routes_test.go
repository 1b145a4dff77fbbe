package ledgerhttp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/api/apitest"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
	"github.com/paylab/paylab/services/ledger/internal/ledgerhttp"
)

const orderID = "0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d"

// get sends a request through h and decodes a 200's JSON body into v.
func get(t *testing.T, h http.Handler, method, path string, v any) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), method, path, nil))
	if rec.Code == http.StatusOK && v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, rec.Body)
		}
	}
	return rec
}

// The read API on a ledger with one captured and partly refunded order;
// every exchange is checked against api/openapi.yaml.
func TestReadAPI(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, "ledger")
	capture := testenv.OrderCaptured(orderID, "cus_42", "mer_7", 1999, "EUR")
	refund := testenv.OrderRefunded(orderID, 2, 500, "EUR")
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var msgs []inbox.Message
		for _, e := range []*outbox.Event{capture, refund} {
			msgs = append(msgs, inbox.Message{ID: e.ID, Type: e.Type, Subject: e.AggregateID, Sequence: e.Sequence, Data: e.Payload})
		}
		return ledger.Apply(context.Background(), tx, msgs)
	})
	if err != nil {
		t.Fatal(err)
	}
	h := apitest.ContractOf(t, apitest.Ledger).Handler(t, ledgerhttp.Routes(pool, slog.New(slog.DiscardHandler)))

	for name, want := range map[string]int64{"merchant:mer_7": 1499, "customer:cus_42": -1499} {
		var acc ledgerhttp.Account
		if rec := get(t, h, "GET", "/v1/accounts/"+name, &acc); rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", name, rec.Code, rec.Body)
		}
		if acc.ID != name || len(acc.Balances) != 1 || acc.Balances[0] != (ledgerhttp.Balance{Currency: "EUR", Balance: want}) {
			t.Errorf("%s = %+v, want EUR %d", name, acc, want)
		}
	}
	var entries ledgerhttp.Entries
	if rec := get(t, h, "GET", "/v1/orders/"+orderID+"/entries", &entries); rec.Code != http.StatusOK {
		t.Fatalf("GET entries: %d %s", rec.Code, rec.Body)
	}
	if len(entries.Entries) != 2 || entries.Entries[0].EventID != capture.ID || entries.Entries[1].EventID != refund.ID ||
		entries.Entries[0].RefundID != nil || entries.Entries[1].RefundID == nil || len(entries.Entries[1].Postings) != 2 {
		t.Errorf("entries = %+v, want the capture then the refund", entries)
	}

	for _, tt := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/accounts/merchant:nobody", 404, "account_not_found"},
		{"GET", "/v1/orders/no-such-order/entries", 404, "order_not_found"},
		{"GET", "/v1/nope", 404, "route_not_found"},
		{"POST", "/v1/accounts/merchant:mer_7", 405, "method_not_allowed"},
	} {
		rec := get(t, h, tt.method, tt.path, nil)
		var p ledgerhttp.Problem
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		if rec.Code != tt.status || p.Code != tt.code || p.Type != "urn:paylab:problem:"+tt.code || p.Instance != tt.path {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, rec.Code, rec.Body, tt.status, tt.code)
		}
	}

	// A ledger that cannot be read answers 500, documented too.
	pool.Close()
	if rec := get(t, h, "GET", "/v1/accounts/merchant:mer_7", nil); rec.Code != http.StatusInternalServerError {
		t.Errorf("with the pool closed: %d %s", rec.Code, rec.Body)
	}
}

// The router serves exactly the operations api/openapi.yaml documents for
// the ledger.
func TestRoutesAreDocumented(t *testing.T) {
	t.Parallel()
	r, ok := ledgerhttp.Routes(nil, slog.New(slog.DiscardHandler)).(chi.Routes)
	if !ok {
		t.Fatal("Routes is not a chi router")
	}
	ops, err := apitest.RouterOperations(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := apitest.ContractOf(t, apitest.Ledger).CompareOperations(ops); err != nil {
		t.Fatal(err)
	}
}

// Every status and code the read API emits is documented, and every
// documented one is emitted.
func TestErrorCodesAreDocumented(t *testing.T) {
	t.Parallel()
	emitted, err := apitest.ScanSource(".", apitest.Call{Func: "problem", Status: 2, Code: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(emitted.Dynamic) > 0 || len(emitted.Codes) < 5 {
		t.Fatalf("problems written without literal status and code: %v (found %v)", emitted.Dynamic, emitted.Codes)
	}
	documented, err := apitest.ContractOf(t, apitest.Ledger).Codes()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(emitted.Codes, documented) {
		t.Fatalf("the read API emits %v; api/openapi.yaml documents %v", emitted.Codes, documented)
	}
}
