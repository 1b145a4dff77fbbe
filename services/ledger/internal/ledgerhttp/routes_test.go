package ledgerhttp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/api/apitest"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
	"github.com/paylab/paylab/services/ledger/internal/ledgerhttp"
)

const orderID = "0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d"

// get sends a request with key (none when empty) through h and decodes a
// 200's JSON body into v.
func get(t *testing.T, h http.Handler, key, method, path string, v any) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(context.Background(), method, path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusOK && v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, rec.Body)
		}
	}
	return rec
}

// newKey creates an API key of merchant in the ledger database.
func newKey(t *testing.T, db apikey.DB, merchant string) string {
	t.Helper()
	key, _, err := apikey.NewStore(db).Create(context.Background(), merchant, "test")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// The read API on a ledger with one captured and partly refunded order of
// merchant mer_7, read with mer_7's key; every exchange is checked
// against api/openapi.yaml.
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
	key := newKey(t, pool, "mer_7")
	sec := ledgerhttp.Security{Keys: apikey.NewAuthenticator(pool, apikey.AuthConfig{TTL: time.Hour})}
	h := apitest.ContractOf(t, apitest.Ledger).Handler(t, ledgerhttp.Routes(pool, slog.New(slog.DiscardHandler), sec))

	var acc ledgerhttp.Account
	if rec := get(t, h, key, "GET", "/v1/accounts/merchant:mer_7", &acc); rec.Code != http.StatusOK {
		t.Fatalf("GET merchant:mer_7: %d %s", rec.Code, rec.Body)
	}
	if acc.ID != "merchant:mer_7" || len(acc.Balances) != 1 || acc.Balances[0] != (ledgerhttp.Balance{Currency: "EUR", Balance: 1499}) {
		t.Errorf("merchant:mer_7 = %+v, want EUR 1499", acc)
	}
	var entries ledgerhttp.Entries
	if rec := get(t, h, key, "GET", "/v1/orders/"+orderID+"/entries", &entries); rec.Code != http.StatusOK {
		t.Fatalf("GET entries: %d %s", rec.Code, rec.Body)
	}
	if len(entries.Entries) != 2 || entries.Entries[0].EventID != capture.ID || entries.Entries[1].EventID != refund.ID ||
		entries.Entries[0].RefundID != nil || entries.Entries[1].RefundID == nil || len(entries.Entries[1].Postings) != 2 {
		t.Errorf("entries = %+v, want the capture then the refund", entries)
	}

	// Another merchant sees nothing of mer_7's, exactly as if it did not
	// exist; a key of the customer's id is no way in either.
	other := newKey(t, pool, "mer_8")
	for _, tt := range []struct {
		key, method, path string
		status            int
		code              string
	}{
		{key, "GET", "/v1/accounts/merchant:nobody", 404, "account_not_found"},
		{key, "GET", "/v1/accounts/customer:cus_42", 404, "account_not_found"},
		{key, "GET", "/v1/orders/no-such-order/entries", 404, "order_not_found"},
		{other, "GET", "/v1/accounts/merchant:mer_7", 404, "account_not_found"},
		{other, "GET", "/v1/orders/" + orderID + "/entries", 404, "order_not_found"},
		{other, "GET", "/v1/accounts/merchant:mer_8", 404, "account_not_found"},
		{"", "GET", "/v1/accounts/merchant:mer_7", 401, "unauthenticated"},
		{key[:len(key)-1] + "2", "GET", "/v1/accounts/merchant:mer_7", 401, "api_key_invalid"},
		{key, "GET", "/v1/accounts/merchant:mer_7?api_key=" + key, 400, "api_key_in_query"},
		{key, "GET", "/v1/nope", 404, "route_not_found"},
		{key, "POST", "/v1/accounts/merchant:mer_7", 405, "method_not_allowed"},
	} {
		rec := get(t, h, tt.key, tt.method, tt.path, nil)
		var p ledgerhttp.Problem
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		path, _, _ := strings.Cut(tt.path, "?")
		if rec.Code != tt.status || p.Code != tt.code || p.Type != "urn:paylab:problem:"+tt.code || p.Instance != path {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, rec.Code, rec.Body, tt.status, tt.code)
		}
		if tt.status == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), `Bearer realm="paylab"`) {
			t.Errorf("%s %s: 401 without a challenge: %q", tt.method, tt.path, rec.Header().Get("WWW-Authenticate"))
		}
	}

	// A ledger that cannot be read answers 500, documented too (the key is
	// cached); a key that cannot be checked, 503.
	fresh := newKey(t, pool, "mer_7")
	pool.Close()
	if rec := get(t, h, key, "GET", "/v1/accounts/merchant:mer_7", nil); rec.Code != http.StatusInternalServerError {
		t.Errorf("with the pool closed: %d %s", rec.Code, rec.Body)
	}
	if rec := get(t, h, fresh, "GET", "/v1/accounts/merchant:mer_7", nil); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a key that cannot be checked: %d %s", rec.Code, rec.Body)
	}
}

// Each key has its own request rate: past it, 429 with Retry-After.
func TestReadAPIRateLimit(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, "ledger")
	key, other := newKey(t, pool, "mer_7"), newKey(t, pool, "mer_8")
	sec := ledgerhttp.Security{
		Keys:    apikey.NewAuthenticator(pool, apikey.AuthConfig{}),
		Limiter: apikey.NewLimiter(apikey.LimitConfig{Rate: 0.2, Burst: 2}),
	}
	h := apitest.ContractOf(t, apitest.Ledger).Handler(t, ledgerhttp.Routes(pool, slog.New(slog.DiscardHandler), sec))
	for i, want := range []int{404, 404, 429} {
		rec := get(t, h, key, "GET", "/v1/accounts/merchant:mer_7", nil)
		if rec.Code != want {
			t.Fatalf("request %d: %d %s, want %d", i, rec.Code, rec.Body, want)
		}
		if want == 429 && rec.Header().Get("Retry-After") != "5" {
			t.Fatalf("Retry-After %q, want 5", rec.Header().Get("Retry-After"))
		}
	}
	if rec := get(t, h, other, "GET", "/v1/accounts/merchant:mer_8", nil); rec.Code != 404 {
		t.Fatalf("another key: %d %s", rec.Code, rec.Body)
	}
}

// The router serves exactly the operations api/openapi.yaml documents for
// the ledger.
func TestRoutesAreDocumented(t *testing.T) {
	t.Parallel()
	r, ok := ledgerhttp.Routes(nil, slog.New(slog.DiscardHandler), ledgerhttp.Security{}).(chi.Routes)
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
