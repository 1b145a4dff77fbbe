package orderhttp

import (
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/api/apitest"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// The decoders never panic, and every input they reject maps to a client
// error (4xx) with a code, never to a 500. What they accept is valid and
// survives a round trip. Seeds: f.Add below and testdata/fuzz/.

var decoderSeeds = []string{
	`{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999,"currency":"EUR"}`,
	`{"customer_id":"cus_42","merchant_id":"mer_7","amount":1000000,"currency":"JPY"}`,
	`{"amount":500}`,
	`{}`,
	``,
	`null`,
	`[]`,
	`{"amount":1e3}`,
	`{"amount":-1,"amount":2}`,
	`{"customer_id":"\u0000","amount":"1"}`,
	`{"a":1} {}`,
	"{\"customer_id\":\"\xff\"}",
	`{"amount":99999999999999999999999}`,
	`{"currency":["EUR"]}`,
}

func assertClientError(t *testing.T, input []byte, err error) {
	t.Helper()
	p := problemFor(err)
	switch p.Status {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
	default:
		t.Fatalf("input %q: error %v maps to status %d, want a 4xx", input, err, p.Status)
	}
	if p.Code == "" || p.Code == "internal" {
		t.Fatalf("input %q: problem code %q", input, p.Code)
	}
	if _, err := json.Marshal(p); err != nil {
		t.Fatalf("input %q: problem does not encode: %v", input, err)
	}
}

func FuzzParseNewOrder(f *testing.F) {
	for _, s := range decoderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseNewOrder(data, "mer_7")
		if err != nil {
			assertClientError(t, data, err)
			return
		}
		if verr := n.Validate(); verr != nil {
			t.Fatalf("input %q accepted but invalid: %v", data, verr)
		}
		again, err := json.Marshal(map[string]any{"customer_id": n.CustomerID, "merchant_id": n.MerchantID, "amount": n.Amount, "currency": n.Currency})
		if err != nil {
			t.Fatal(err)
		}
		if n.MerchantID != "mer_7" {
			t.Fatalf("input %q accepted for merchant %q, not the key's", data, n.MerchantID)
		}
		if n2, err := parseNewOrder(again, "mer_7"); err != nil || n2 != n {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", data, n2, err, n)
		}
	})
}

func FuzzParseNewRefund(f *testing.F) {
	for _, s := range decoderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseNewRefund(data)
		if err != nil {
			assertClientError(t, data, err)
			return
		}
		if n.Amount <= 0 || n.Validate() != nil {
			t.Fatalf("input %q accepted with amount %d", data, n.Amount)
		}
	})
}

func FuzzParseCapture(f *testing.F) {
	for _, s := range decoderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := parseCapture(data); err != nil {
			assertClientError(t, data, err)
		}
	})
}

func FuzzParseOrderID(f *testing.F) {
	for _, s := range []string{"0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", "0193A5C2-7F3E-7B1A-9C1D-3E5F7A9B1C2D",
		"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "{0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d}", "", "42",
		"urn:uuid:0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", "0193a5c27f3e7b1a9c1d3e5f7a9b1c2d0000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseOrderID(s)
		if err != nil {
			assertClientError(t, []byte(s), err)
			return
		}
		if id.Version() != 7 || id.String() != strings.ToLower(s) {
			t.Fatalf("accepted %q as %s", s, id)
		}
	})
}

// FuzzAPI sends arbitrary bodies and headers, with a key of the order's
// merchant, to every route of the real handler on a real database: whatever comes in, the answer is never a 5xx,
// every error is a problem document, and, for the seed inputs, every answer
// is one api/openapi.yaml documents.
func FuzzAPI(f *testing.F) {
	paths := []string{"/v1/payments", "/v1/orders", "/v1/orders/{id}/capture", "/v1/orders/{id}/refunds", "/v1/orders/{id}"}
	for i, s := range decoderSeeds {
		f.Add(uint8(i), s, "application/json", "", "")
	}
	f.Add(uint8(0), `{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999,"currency":"EUR"}`, "application/json", "key-1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add(uint8(3), `{"amount":100}`, "application/json; charset=utf-8", "key-2", "garbage")
	f.Add(uint8(2), ``, "", "", "")

	pool, _ := testenv.NewPool(f, "orders")
	app, err := orderapp.New(orderapp.Config{Pool: pool, Topic: "order-events", Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		f.Fatal(err)
	}
	apiKey, _, err := apikey.NewStore(pool).Create(f.Context(), "mer_1", "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	h := Routes(app, slog.New(slog.NewJSONHandler(io.Discard, nil)), m, Security{Keys: apikey.NewAuthenticator(pool, apikey.AuthConfig{})})
	// One captured order whose id the paths use, so that requests reach the
	// database.
	out, err := app.PlacePayment(f.Context(), order.NewOrder{CustomerID: "cus_1", MerchantID: "mer_1", Amount: 100000, Currency: "EUR"}, orderapp.Options{})
	if err != nil {
		f.Fatal(err)
	}
	id := out.Value.ID.String()

	// The seed inputs (go test) are checked against the OpenAPI document;
	// while fuzzing, where the check would cost most of each execution,
	// only the invariants below are.
	fuzzFlag := flag.Lookup("test.fuzz")
	fuzzing := fuzzFlag != nil && fuzzFlag.Value.String() != ""
	f.Fuzz(func(t *testing.T, route uint8, body, contentType, key, traceparent string) {
		path := strings.ReplaceAll(paths[int(route)%len(paths)], "{id}", id)
		method := http.MethodPost
		if strings.HasSuffix(path, id) {
			method = http.MethodGet
		}
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		for name, v := range map[string]string{"Content-Type": contentType, "Idempotency-Key": key, "traceparent": traceparent} {
			if v != "" {
				req.Header[name] = []string{v}
			}
		}
		handler := h
		if !fuzzing {
			handler = apitest.ContractOf(t, apitest.Orders).ResponseHandler(t, h)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q (Content-Type %q, key %q): %d %s", method, path, body, contentType, key, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && rec.Header().Get("Content-Type") != ContentTypeProblem {
			t.Fatalf("error %d without a problem document: %s", rec.Code, rec.Body)
		}
	})
}
