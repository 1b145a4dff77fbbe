package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/paylab/paylab/api/apitest"
)

const (
	order = `{"id":"0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d","status":"captured","customer_id":"cus_42","merchant_id":"mer_7",` +
		`"amount":1999,"currency":"EUR","captured_amount":1999,"refunded_amount":0,` +
		`"created_at":"2026-12-02T12:00:00.123456Z","updated_at":"2026-12-02T12:00:00.123456Z"}`
	payment = `{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999,"currency":"EUR"}`
)

// apiKey is shaped like a key; the contract cannot tell a valid one.
const apiKey = "plk_0123456789abcdef_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func problem(status, code string) string {
	return `{"type":"urn:paylab:problem:` + code + `","title":"x","status":` + status + `,"detail":"d","instance":"/v1/payments",` +
		`"code":"` + code + `","request_id":"r-1"}`
}

// exchange builds an exchange with a JSON request with an API key and a
// response.
func exchange(method, path, reqBody string, status int, contentType, body string, headers ...string) apitest.Exchange {
	req := httptest.NewRequest(method, path, nil)
	if reqBody != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	h := http.Header{"Content-Type": {contentType}, "X-Request-Id": {"r-1"}}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			h.Del(headers[i])
			continue
		}
		h.Set(headers[i], headers[i+1])
	}
	return apitest.Exchange{Request: req, RequestBody: []byte(reqBody), Status: status, Header: h, Body: []byte(body)}
}

// The check passes what the document describes and fails each kind of
// drift: it can fail.
func TestCheck(t *testing.T) {
	t.Parallel()
	c := apitest.ContractOf(t, apitest.Orders)
	const pay, js, pj = "/v1/payments", "application/json", "application/problem+json"
	tests := []struct {
		name string
		e    apitest.Exchange
		want string // a fragment of the error; "" for none
	}{
		{"documented", exchange("POST", pay, payment, 201, js, order), ""},
		{"replayed", exchange("POST", pay, payment, 201, js, order, "Idempotency-Replayed", "true"), ""},
		{"a response member missing", exchange("POST", pay, payment, 201, js, strings.Replace(order, `"refunded_amount":0,`, "", 1)), "refunded_amount"},
		{"a response member added", exchange("POST", pay, payment, 201, js, strings.Replace(order, `{`, `{"tip":1,`, 1)), "tip"},
		{"a status not documented", exchange("POST", pay, payment, 202, js, order), "status is not supported"},
		{"a wrong media type", exchange("POST", pay, payment, 201, "text/plain", order), "text/plain"},
		{"no X-Request-Id", exchange("POST", pay, payment, 201, js, order, "X-Request-Id", ""), "X-Request-Id"},
		{"Idempotency-Replayed not true", exchange("POST", pay, payment, 201, js, order, "Idempotency-Replayed", "yes"), "Idempotency-Replayed"},
		{"a documented problem", exchange("POST", pay, `{"amount":`, 400, pj, problem("400", "body_malformed")), ""},
		{"a code not documented", exchange("POST", pay, payment, 400, pj, problem("400", "teapot")), "code"},
		{"a code under another status", exchange("POST", pay, payment, 409, pj, problem("409", "body_malformed")), "code"},
		{"a problem status that is not the response's", exchange("POST", pay, payment, 400, pj, problem("422", "body_malformed")), "status"},
		{"a rejected request refused", exchange("POST", pay, `{"amount":"1"}`, 422, pj, problem("422", "amount_invalid")), ""},
		{"a rejected request accepted", exchange("POST", pay, `{"amount":"1"}`, 201, js, order), "rejects the request"},
		{"a JPY amount over its bound accepted", exchange("POST", pay, strings.NewReplacer("EUR", "JPY", "1999", "1000001").Replace(payment), 201, js,
			strings.NewReplacer("EUR", "JPY", "1999", "1000001").Replace(order)), "rejects the request"},
		{"an unknown path", exchange("GET", "/v1/nope", "", 404, pj, problem("404", "route_not_found")), ""},
		{"an unknown path answered otherwise", exchange("GET", "/v1/nope", "", 404, "text/plain", "404 page not found"), "unknown path"},
		{"a method not allowed", exchange("PUT", pay, "", 405, pj, problem("405", "method_not_allowed"), "Allow", "POST"), ""},
		{"a method not allowed without Allow", exchange("PUT", pay, "", 405, pj, problem("405", "method_not_allowed")), "Allow"},
		{"a bad order id", exchange("GET", "/v1/orders/42", "", 400, pj, problem("400", "order_id_invalid")), ""},
		{"a bad order id accepted", exchange("GET", "/v1/orders/42", "", 200, js, order), "rejects the request"},
		{"no API key refused", exchange("POST", pay, payment, 401, pj, problem("401", "unauthenticated"),
			"WWW-Authenticate", `Bearer realm="paylab"`), ""},
		{"a 401 without a challenge", exchange("POST", pay, payment, 401, pj, problem("401", "api_key_invalid")), "WWW-Authenticate"},
		{"a rate limit", exchange("GET", "/v1/orders/0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", "", 429, pj, problem("429", "rate_limited"), "Retry-After", "3"), ""},
		{"a rate limit without Retry-After", exchange("GET", "/v1/orders/0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", "", 429, pj, problem("429", "rate_limited")), "Retry-After"},
		{"another merchant", exchange("POST", pay, payment, 403, pj, problem("403", "merchant_mismatch")), ""},
	}
	for _, tt := range tests {
		err := c.Check(tt.e)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && err == nil:
			t.Errorf("%s: no error, want one about %q", tt.name, tt.want)
		case tt.want != "" && !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: error %v, want one about %q", tt.name, err, tt.want)
		}
	}
	// CheckResponse leaves out only the rule on rejected requests.
	if err := c.CheckResponse(exchange("POST", pay, `{"amount":"1"}`, 201, js, order)); err != nil {
		t.Errorf("CheckResponse: %v", err)
	}
	if err := c.CheckResponse(exchange("POST", pay, payment, 202, js, order)); err == nil {
		t.Error("CheckResponse passed an undocumented status")
	}
}

// fakeT records what the handler reports; it stands in for the test that
// would fail.
type fakeT struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// A handler passes requests and responses through unchanged, and its
// violations, from any goroutine, fail the test when it ends.
func TestHandlerReportsViolations(t *testing.T) {
	t.Parallel()
	c := apitest.ContractOf(t, apitest.Orders)
	for _, tt := range []struct {
		status int
		body   string
		fails  bool
	}{
		{201, order, false},
		{201, strings.Replace(order, `"currency":"EUR",`, "", 1), true},
		{418, order, true},
	} {
		ft := &fakeT{TB: t}
		var (
			mu      sync.Mutex
			changed []string // what the handler or the client saw changed
		)
		note := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			changed = append(changed, fmt.Sprintf(format, args...))
		}
		h := c.Handler(ft, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if b, _ := io.ReadAll(r.Body); string(b) != payment {
				note("the handler got body %q", b)
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", "r-1")
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(tt.body))
		}))
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				req := httptest.NewRequest("POST", "/v1/payments", strings.NewReader(payment))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+apiKey)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tt.status || rec.Body.String() != tt.body || rec.Header().Get("X-Request-Id") != "r-1" {
					note("the response was changed: %d %v %s", rec.Code, rec.Header(), rec.Body)
				}
			})
		}
		wg.Wait()
		if len(changed) > 0 {
			t.Fatalf("status %d: %v", tt.status, changed)
		}
		if len(ft.errors) != 0 {
			t.Fatalf("status %d: reported before the test ended: %v", tt.status, ft.errors)
		}
		for _, fn := range ft.cleanups {
			fn()
		}
		if got := len(ft.errors); (got == 3) != tt.fails || (got != 0 && got != 3) {
			t.Errorf("status %d: %d violations reported, want %d", tt.status, got, map[bool]int{true: 3}[tt.fails])
		}
		for _, e := range ft.errors {
			if !strings.Contains(e, "POST /v1/payments → "+strconv.Itoa(tt.status)) {
				t.Errorf("the report does not name the exchange: %s", e)
			}
		}
	}
}

// The documented operations are compared with a router's both ways.
func TestCompareOperations(t *testing.T) {
	t.Parallel()
	c := apitest.ContractOf(t, apitest.Ledger)
	r := chi.NewRouter()
	noop := func(http.ResponseWriter, *http.Request) {}
	r.Get("/v1/accounts/{id}", noop)
	r.Get("/v1/orders/{id}/entries", noop)
	ops, err := apitest.RouterOperations(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CompareOperations(ops); err != nil {
		t.Fatalf("the ledger's routes: %v", err)
	}
	r.Post("/v1/accounts/{id}", noop)
	ops, _ = apitest.RouterOperations(r)
	if err := c.CompareOperations(ops[1:]); err == nil ||
		!strings.Contains(err.Error(), "serves POST /v1/accounts/{id}") || !strings.Contains(err.Error(), "documents GET /v1/accounts/{id}") {
		t.Fatalf("mismatch in both directions: %v", err)
	}
}

// The documented codes come from every problem response; a scan of the
// source finds the codes a package emits.
func TestCodes(t *testing.T) {
	t.Parallel()
	c := apitest.ContractOf(t, apitest.Orders)
	codes, err := c.Codes()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []apitest.StatusCode{{400, "body_malformed"}, {404, "route_not_found"}, {405, "method_not_allowed"},
		{409, "order_not_capturable"}, {422, "validation_failed"}, {503, "broker_unavailable"}} {
		if !slices.Contains(codes, want) {
			t.Errorf("documented codes lack %v: %v", want, codes)
		}
	}
	if slices.Contains(codes, apitest.StatusCode{Status: 404, Code: "account_not_found"}) {
		t.Error("the orders contract has a code of the ledger")
	}

	got, err := apitest.ScanSource("testdata/emit", apitest.Call{Func: "problem", Status: 1, Code: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []apitest.StatusCode{{400, "chosen"}, {404, "gone"}, {422, "literal"}, {500, "numeric"}}
	if !slices.Equal(got.Codes, want) {
		t.Errorf("codes = %v, want %v", got.Codes, want)
	}
	if wantDyn := []string{"emit.go:15: problem(http.StatusBadRequest, code)", "emit.go:16: problem(status, \"dynamic\")"}; !slices.Equal(got.Dynamic, wantDyn) {
		t.Errorf("dynamic = %q, want %q", got.Dynamic, wantDyn)
	}
}
