// Package loadgen places payments against the orders API at a constant
// arrival rate (an open model: requests are sent on schedule whether or not
// earlier ones have answered, so a slow server shows up as latency, not as a
// politely lower rate). It is built on vegeta's attacker and pacer.
package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/paylab/paylab/internal/platform/apikey"
)

// Config describes one run.
type Config struct {
	BaseURL string        // orders API, e.g. http://127.0.0.1:8080
	Rate    int           // payments per second
	Count   int           // payments in all
	Seed    uint64        // drives customers, merchants, amounts and currencies
	Timeout time.Duration // per request; zero means 10 s
	Workers uint64        // initial workers; zero means 16
	// Keys are the API keys the payments are sent with: a payment goes with
	// its merchant's key (Keys.ByMerchant), else with Keys.Default and
	// without a merchant_id (the key's merchant is the payment's).
	Keys Keys
	// OnCreated, when set, is called with the id of every order the API
	// created (a 201 response), from the attacker's goroutines.
	OnCreated func(orderID string)
}

// Keys are the API keys a run authenticates with.
type Keys struct {
	ByMerchant map[string]string // merchant id → key
	Default    string            // for the other merchants
}

// For returns the key to send p with, and p as it is to be sent.
func (k Keys) For(p Payment) (string, Payment) {
	if key, ok := k.ByMerchant[p.MerchantID]; ok {
		return key, p
	}
	p.MerchantID = ""
	return k.Default, p
}

// Merchants are the merchants Payments draws from.
func Merchants() []string {
	out := make([]string, merchants)
	for i := range out {
		out[i] = fmt.Sprintf("mer_%d", i)
	}
	return out
}

// IssueKeys creates an API key for each of Merchants in store, for a run
// of a system whose databases the caller owns.
func IssueKeys(ctx context.Context, store *apikey.Store) (Keys, error) {
	k := Keys{ByMerchant: make(map[string]string, merchants)}
	for _, m := range Merchants() {
		key, _, err := store.Create(ctx, m, "loadgen")
		if err != nil {
			return Keys{}, err
		}
		k.ByMerchant[m] = key
	}
	return k, nil
}

// Report is what a run measured.
type Report struct {
	Requests   uint64         `json:"requests"`
	Created    uint64         `json:"created"`
	Rate       float64        `json:"rate_per_s"`
	Throughput float64        `json:"throughput_per_s"`
	Duration   time.Duration  `json:"duration_ns"`
	StatusCode map[string]int `json:"status_codes"`
	Errors     []string       `json:"errors,omitempty"`
	P50        time.Duration  `json:"p50_ns"`
	P90        time.Duration  `json:"p90_ns"`
	P99        time.Duration  `json:"p99_ns"`
	Max        time.Duration  `json:"max_ns"`
}

var currencies = []struct {
	code     string
	min, max int64
}{
	{"EUR", 100, 50_000}, {"USD", 100, 50_000}, {"GBP", 100, 50_000}, {"JPY", 100, 50_000},
}

// merchants is how many merchants Payments draws from.
const merchants = 50

// Payment is one generated request body (the wire contract of POST
// /v1/payments); MerchantID is left out when empty.
type Payment struct {
	CustomerID string `json:"customer_id"`
	MerchantID string `json:"merchant_id,omitempty"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

// Payments returns the deterministic stream of payment bodies for seed.
func Payments(seed uint64) func() Payment {
	r := rand.New(rand.NewPCG(seed, 0x7061796c6162))
	return func() Payment {
		c := currencies[r.IntN(len(currencies))]
		return Payment{
			CustomerID: fmt.Sprintf("cus_%d", r.IntN(1000)),
			MerchantID: fmt.Sprintf("mer_%d", r.IntN(merchants)),
			Amount:     c.min + r.Int64N(c.max-c.min),
			Currency:   c.code,
		}
	}
}

// Run places cfg.Count payments at cfg.Rate per second and reports latency
// percentiles and status codes. It stops early when ctx ends.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Rate <= 0 || cfg.Count <= 0 {
		return Report{}, fmt.Errorf("loadgen: rate (%d) and count (%d) must be positive", cfg.Rate, cfg.Count)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Workers == 0 {
		cfg.Workers = 16
	}
	url := strings.TrimSuffix(cfg.BaseURL, "/") + "/v1/payments"
	next := Payments(cfg.Seed)
	run := uuid.NewString() // idempotency keys are unique per run, bodies repeat per seed
	var (
		mu   sync.Mutex
		sent int
	)
	targeter := func(t *vegeta.Target) error {
		mu.Lock()
		defer mu.Unlock()
		if sent >= cfg.Count {
			return vegeta.ErrNoTargets
		}
		key, p := cfg.Keys.For(next())
		body, err := json.Marshal(p)
		if err != nil {
			return err
		}
		t.Method, t.URL, t.Body = http.MethodPost, url, body
		t.Header = http.Header{
			"Content-Type":    {"application/json"},
			"Idempotency-Key": {fmt.Sprintf("load-%s-%d", run, sent)},
			"Authorization":   {"Bearer " + key},
		}
		sent++
		return nil
	}

	attacker := vegeta.NewAttacker(vegeta.Timeout(cfg.Timeout), vegeta.Workers(cfg.Workers),
		vegeta.KeepAlive(true), vegeta.MaxBody(64<<10))
	var m vegeta.Metrics
	var created uint64
	results := attacker.Attack(targeter, vegeta.ConstantPacer{Freq: cfg.Rate, Per: time.Second}, 0, "payments")
	for {
		select {
		case <-ctx.Done():
			attacker.Stop()
			// Drain what is in flight so the report counts it.
			for res := range results {
				if !exhausted(res) {
					m.Add(res)
				}
			}
			m.Close()
			return report(&m, created), ctx.Err()
		case res, ok := <-results:
			if !ok {
				m.Close()
				return report(&m, created), nil
			}
			if exhausted(res) {
				continue
			}
			m.Add(res)
			if res.Code == http.StatusCreated {
				created++
				if cfg.OnCreated != nil {
					var order struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(res.Body, &order) == nil && order.ID != "" {
						cfg.OnCreated(order.ID)
					}
				}
			}
		}
	}
}

// exhausted tells the attacker's "no more targets" marker from a real result.
func exhausted(res *vegeta.Result) bool {
	return res.Code == 0 && res.Error == vegeta.ErrNoTargets.Error()
}

func report(m *vegeta.Metrics, created uint64) Report {
	errs := append([]string(nil), m.Errors...)
	sort.Strings(errs)
	return Report{
		Requests: m.Requests, Created: created, Rate: m.Rate, Throughput: m.Throughput,
		Duration: m.Duration + m.Wait, StatusCode: m.StatusCodes, Errors: errs,
		P50: m.Latencies.P50, P90: m.Latencies.P90, P99: m.Latencies.P99, Max: m.Latencies.Max,
	}
}

// String renders the report as a short table.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests   %d (%d created) in %s\n", r.Requests, r.Created, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "rate       %.1f/s sent, %.1f/s succeeded\n", r.Rate, r.Throughput)
	fmt.Fprintf(&b, "latency    p50 %s  p90 %s  p99 %s  max %s\n", ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max))
	codes := make([]string, 0, len(r.StatusCode))
	for c, n := range r.StatusCode {
		codes = append(codes, fmt.Sprintf("%s×%d", c, n))
	}
	sort.Strings(codes)
	fmt.Fprintf(&b, "status     %s\n", strings.Join(codes, " "))
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error      %s\n", e)
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
