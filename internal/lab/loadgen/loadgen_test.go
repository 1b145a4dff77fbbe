package loadgen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/paylab/paylab/internal/lab/loadgen"
)

// The generator sends exactly Count well-formed payments, each with its own
// idempotency key and its merchant's API key (or the default key and no
// merchant), and reports what the server answered.
func TestRunSendsCountPaymentsWithUniqueKeys(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		keys = map[string]bool{}
		bad  []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p loadgen.Payment
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		err := dec.Decode(&p)
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		wantAuth := "Bearer default-key"
		if p.MerchantID != "" {
			wantAuth = "Bearer key-of-" + p.MerchantID
		}
		if err != nil || r.URL.Path != "/v1/payments" || key == "" || keys[key] || p.Amount <= 0 || len(p.Currency) != 3 ||
			r.Header.Get("Authorization") != wantAuth || (p.MerchantID != "" && p.MerchantID != "mer_1" && p.MerchantID != "mer_2") {
			bad = append(bad, fmt.Sprintf("%s key=%q err=%v body=%+v", r.URL.Path, key, err, p))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		keys[key] = true
		if len(keys)%10 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"order-%d"}`, len(keys))
	}))
	defer srv.Close()

	var created sync.Map
	rep, err := loadgen.Run(context.Background(), loadgen.Config{
		BaseURL: srv.URL, Rate: 500, Count: 200, Seed: 7,
		Keys:      loadgen.Keys{ByMerchant: map[string]string{"mer_1": "key-of-mer_1", "mer_2": "key-of-mer_2"}, Default: "default-key"},
		OnCreated: func(id string) { created.Store(id, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("malformed requests: %v", bad)
	}
	if rep.Requests != 200 || rep.StatusCode["201"] != 180 || rep.StatusCode["503"] != 20 || rep.Created != 180 {
		t.Fatalf("report = %+v, want 200 requests: 180×201, 20×503", rep)
	}
	n := 0
	created.Range(func(any, any) bool { n++; return true })
	if n != 180 {
		t.Fatalf("OnCreated saw %d orders, want 180", n)
	}
	if rep.P99 <= 0 || rep.Max < rep.P99 {
		t.Fatalf("latencies p99 %s max %s", rep.P99, rep.Max)
	}
}

func TestPaymentsAreDeterministicPerSeed(t *testing.T) {
	t.Parallel()
	a, b, c := loadgen.Payments(1), loadgen.Payments(1), loadgen.Payments(2)
	same, differ := true, false
	for range 50 {
		pa, pb, pc := a(), b(), c()
		same = same && pa == pb
		differ = differ || pa != pc
	}
	if !same || !differ {
		t.Fatalf("same seed equal: %v, other seed differs: %v", same, differ)
	}
}
