package orderhttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// Every bad input gets its documented status and problem code, as
// application/problem+json, and changes nothing.
func TestBadInputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	authorized := b.createOrder()
	captured := b.placePayment()
	v4 := uuid.New().String()
	const (
		pay = "/v1/payments"
	)
	body := func(customer, merchant, amount, currency string) string {
		return `{"customer_id":` + customer + `,"merchant_id":` + merchant + `,"amount":` + amount + `,"currency":` + currency + `}`
	}
	ok := func(field, value string) string { // a valid body with one member replaced
		parts := map[string]string{"customer_id": `"cus_42"`, "merchant_id": `"mer_7"`, "amount": "1999", "currency": `"EUR"`}
		parts[field] = value
		return body(parts["customer_id"], parts["merchant_id"], parts["amount"], parts["currency"])
	}

	tests := []struct {
		name        string
		method      string
		path        string
		body        string
		headers     []string
		status      int
		code        string
		errorFields []string
	}{
		{"empty body", "POST", pay, "", nil, 400, "body_required", nil},
		{"white space body", "POST", pay, " \n\t", nil, 400, "body_required", nil},
		{"no content type", "POST", pay, paymentBody, []string{"Content-Type", ""}, 415, "content_type_unsupported", nil},
		{"text/plain", "POST", pay, paymentBody, []string{"Content-Type", "text/plain"}, 415, "content_type_unsupported", nil},
		{"form content type", "POST", pay, "amount=1", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "content_type_unsupported", nil},
		{"latin1 charset", "POST", pay, paymentBody, []string{"Content-Type", "application/json; charset=latin1"}, 415, "content_type_unsupported", nil},
		{"body over the limit", "POST", pay, `{"customer_id":"` + strings.Repeat("a", 9000) + `"}`, nil, 413, "body_too_large", nil},
		{"malformed JSON", "POST", pay, `{"amount":`, nil, 400, "body_malformed", nil},
		{"single quotes", "POST", pay, `{'amount':1}`, nil, 400, "body_malformed", nil},
		{"array body", "POST", pay, `[` + paymentBody + `]`, nil, 400, "body_invalid", nil},
		{"null body", "POST", pay, `null`, nil, 400, "body_invalid", nil},
		{"trailing object", "POST", pay, paymentBody + `{}`, nil, 400, "body_trailing_data", nil},
		{"trailing garbage", "POST", pay, paymentBody + `x`, nil, 400, "body_trailing_data", nil},
		{"unknown field", "POST", pay, `{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999,"currency":"EUR","tip":1}`, nil, 400, "field_unknown", []string{"tip"}},
		{"field name in another case", "POST", pay, `{"customer_id":"cus_42","merchant_id":"mer_7","Amount":1999,"currency":"EUR"}`, nil, 400, "field_unknown", []string{"Amount"}},
		{"duplicate field", "POST", pay, `{"customer_id":"cus_42","merchant_id":"mer_7","amount":1,"amount":1999,"currency":"EUR"}`, nil, 400, "field_duplicate", []string{"amount"}},
		{"amount as string", "POST", pay, ok("amount", `"1999"`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount with decimals", "POST", pay, ok("amount", `19.99`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount in exponent form", "POST", pay, ok("amount", `2e3`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount zero", "POST", pay, ok("amount", `0`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount negative", "POST", pay, ok("amount", `-5`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount above the EUR bound", "POST", pay, ok("amount", `100000001`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount above the JPY bound", "POST", pay, body(`"cus_42"`, `"mer_7"`, `1000001`, `"JPY"`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount beyond int64", "POST", pay, ok("amount", `99999999999999999999`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount null", "POST", pay, ok("amount", `null`), nil, 422, "amount_invalid", []string{"amount"}},
		{"amount nested arrays", "POST", pay, ok("amount", strings.Repeat("[", 500)+strings.Repeat("]", 500)), nil, 422, "amount_invalid", []string{"amount"}},
		{"currency missing", "POST", pay, `{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999}`, nil, 422, "currency_invalid", []string{"currency"}},
		{"currency lower case", "POST", pay, ok("currency", `"eur"`), nil, 422, "currency_invalid", []string{"currency"}},
		{"currency unsupported", "POST", pay, ok("currency", `"XXX"`), nil, 422, "currency_invalid", []string{"currency"}},
		{"currency as number", "POST", pay, ok("currency", `978`), nil, 422, "currency_invalid", []string{"currency"}},
		{"customer id empty", "POST", pay, ok("customer_id", `""`), nil, 422, "customer_id_invalid", []string{"customer_id"}},
		{"customer id too long", "POST", pay, ok("customer_id", `"`+strings.Repeat("c", 65)+`"`), nil, 422, "customer_id_invalid", []string{"customer_id"}},
		{"customer id with a space", "POST", pay, ok("customer_id", `"cus 42"`), nil, 422, "customer_id_invalid", []string{"customer_id"}},
		{"customer id invalid UTF-8", "POST", pay, ok("customer_id", "\"cus_\xff\""), nil, 422, "customer_id_invalid", []string{"customer_id"}},
		{"merchant id as object", "POST", pay, ok("merchant_id", `{}`), nil, 422, "merchant_id_invalid", []string{"merchant_id"}},
		{"several invalid fields", "POST", pay, body(`""`, `"mer_7"`, `-1`, `"EUR"`), nil, 422, "validation_failed", []string{"customer_id", "amount"}},
		{"everything missing", "POST", "/v1/orders", `{}`, nil, 422, "validation_failed", []string{"customer_id", "amount", "currency"}},
		{"merchant id empty", "POST", pay, ok("merchant_id", `""`), nil, 422, "merchant_id_invalid", []string{"merchant_id"}},
		{"another merchant", "POST", pay, ok("merchant_id", `"mer_8"`), nil, 403, "merchant_mismatch", []string{"merchant_id"}},
		{"another merchant, an order", "POST", "/v1/orders", ok("merchant_id", `"M-7"`), nil, 403, "merchant_mismatch", []string{"merchant_id"}},
		{"no API key", "POST", pay, paymentBody, []string{"Authorization", ""}, 401, "unauthenticated", nil},
		{"a basic credential", "GET", "/v1/orders/" + authorized, "", []string{"Authorization", "Basic bWVyXzc6eA=="}, 401, "api_key_invalid", nil},
		{"an unknown key", "POST", "/v1/orders/" + authorized + "/capture", "", []string{"Authorization", "Bearer " + b.key[:len(b.key)-1] + "2"}, 401, "api_key_invalid", nil},
		{"not a key", "POST", "/v1/orders/" + captured + "/refunds", `{"amount":5}`, []string{"Authorization", "Bearer 42"}, 401, "api_key_invalid", nil},
		{"key in the query", "POST", pay + "?api_key=" + b.key, paymentBody, nil, 400, "api_key_in_query", nil},
		{"key in the query of a read", "GET", "/v1/orders/" + authorized + "?access_token=x", "", nil, 400, "api_key_in_query", nil},
		{"key in the query of a capture", "POST", "/v1/orders/" + authorized + "/capture?key=" + b.key, "", []string{"Authorization", ""}, 400, "api_key_in_query", nil},
		{"key in the query of a refund", "POST", "/v1/orders/" + captured + "/refunds?k=" + b.key, `{"amount":5}`, nil, 400, "api_key_in_query", nil},
		{"idempotency key too long", "POST", pay, paymentBody, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "idempotency_key_invalid", nil},
		{"idempotency key with a space", "POST", pay, paymentBody, []string{"Idempotency-Key", "a b"}, 400, "idempotency_key_invalid", nil},
		{"idempotency key empty", "POST", pay, paymentBody, []string{"Idempotency-Key", ""}, 400, "idempotency_key_invalid", nil},
		{"two idempotency keys", "POST", pay, paymentBody, []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, 400, "idempotency_key_invalid", nil},
		{"order id not a UUID", "GET", "/v1/orders/42", "", nil, 400, "order_id_invalid", []string{"id"}},
		{"order id a UUIDv4", "GET", "/v1/orders/" + v4, "", nil, 400, "order_id_invalid", []string{"id"}},
		{"order id in braces", "GET", "/v1/orders/%7B" + authorized + "%7D", "", nil, 400, "order_id_invalid", []string{"id"}},
		{"capture with a field", "POST", "/v1/orders/" + authorized + "/capture", `{"amount":5}`, nil, 400, "field_unknown", []string{"amount"}},
		{"capture with text/plain", "POST", "/v1/orders/" + authorized + "/capture", `x`, []string{"Content-Type", "text/plain"}, 415, "content_type_unsupported", nil},
		{"capture with a bad id", "POST", "/v1/orders/not-an-id/capture", "", nil, 400, "order_id_invalid", []string{"id"}},
		{"capture of an unknown order", "POST", "/v1/orders/" + uuid.Must(uuid.NewV7()).String() + "/capture", "", nil, 404, "order_not_found", nil},
		{"refund without amount", "POST", "/v1/orders/" + captured + "/refunds", `{}`, nil, 422, "amount_invalid", []string{"amount"}},
		{"refund amount as string", "POST", "/v1/orders/" + captured + "/refunds", `{"amount":"500"}`, nil, 422, "amount_invalid", []string{"amount"}},
		{"refund amount zero", "POST", "/v1/orders/" + captured + "/refunds", `{"amount":0}`, nil, 422, "amount_invalid", []string{"amount"}},
		{"refund with currency", "POST", "/v1/orders/" + captured + "/refunds", `{"amount":5,"currency":"EUR"}`, nil, 400, "field_unknown", []string{"currency"}},
		{"refund with a bad id", "POST", "/v1/orders/xyz/refunds", `{"amount":5}`, nil, 400, "order_id_invalid", []string{"id"}},
		{"wrong method", "PUT", pay, paymentBody, nil, 405, "method_not_allowed", nil},
		{"unknown route", "GET", "/v1/nope", "", nil, 404, "route_not_found", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := b.do(tt.method, tt.path, tt.body, tt.headers...)
			if res.Status != tt.status {
				t.Fatalf("status = %d, want %d: %s", res.Status, tt.status, res.Body)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", ct)
			}
			p := res.json(t)
			if p["code"] != tt.code || p["status"] != float64(tt.status) || p["type"] != "urn:paylab:problem:"+tt.code ||
				p["title"] != http.StatusText(tt.status) || p["detail"] == "" || p["request_id"] == "" {
				t.Errorf("problem = %s, want code %s", res.Body, tt.code)
			}
			var fields []string
			errs, _ := p["errors"].([]any)
			for _, e := range errs {
				e := e.(map[string]any)
				if e["message"] == "" {
					t.Errorf("field error without a message: %v", e)
				}
				fields = append(fields, e["field"].(string))
			}
			if strings.Join(fields, ",") != strings.Join(tt.errorFields, ",") {
				t.Errorf("error fields = %v, want %v", fields, tt.errorFields)
			}
		})
	}
	if allow := b.do("DELETE", "/v1/orders/"+authorized, "").Header.Values("Allow"); strings.Join(allow, ",") != "GET" {
		t.Errorf("Allow on 405 = %v, want GET", allow)
	}
	if len(tests) < 25 {
		t.Fatalf("only %d cases", len(tests))
	}
	// Nothing was created or changed by the bad inputs.
	if n := b.count("SELECT count(*) FROM orders"); n != 2 {
		t.Errorf("orders = %d, want the 2 of the setup", n)
	}
	if o := b.order(authorized); o.Status != "authorized" {
		t.Errorf("authorized order changed: %+v", o)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 1 {
		t.Errorf("outbox rows = %d, want 1", n)
	}
}

// The limits are inclusive: the largest amounts and ids are accepted. The
// merchant_id may be left out: the key's merchant is the order's.
func TestBoundaryInputsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, body := range []string{
		`{"customer_id":"cus_42","merchant_id":"mer_7","amount":100000000,"currency":"EUR"}`,
		`{"customer_id":"cus_42","merchant_id":"mer_7","amount":1000000,"currency":"JPY"}`,
		`{"customer_id":"` + strings.Repeat("c", 64) + `","merchant_id":"M-7","amount":1,"currency":"GBP"}`,
		`{"customer_id":"cus_42","merchant_id":"mer_7","amount":1,"currency":"USD"}`,
		`{"customer_id":"cus_42","amount":1,"currency":"USD"}`,
		`{"customer_id":"cus_42","merchant_id":null,"amount":1,"currency":"USD"}`,
	} {
		key := b.key
		if strings.Contains(body, "M-7") {
			key = b.newKey("M-7")
		}
		res := b.do(http.MethodPost, "/v1/payments", body, "Content-Type", "application/json; charset=UTF-8", "Authorization", "Bearer "+key)
		if res.Status != http.StatusCreated {
			t.Errorf("%s: %d %s", body, res.Status, res.Body)
		}
	}
}
