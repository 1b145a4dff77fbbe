package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/dbpool"
)

// CaptureResult is one concurrency level of B1, its HTTP floor or S1: with
// rounds, the median round, and the slowest and fastest rounds' rates.
type CaptureResult struct {
	Concurrency  int     `json:"concurrency"`
	Completed    int     `json:"completed"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
	PerSecond    float64 `json:"per_second"`
	Latency      Latency `json:"latency"`
	Rounds       int     `json:"rounds,omitempty"`
	MinPerSecond float64 `json:"min_per_second,omitempty"`
	MaxPerSecond float64 `json:"max_per_second,omitempty"`
}

func captureResult(c int, l loop) (CaptureResult, error) {
	r := CaptureResult{Concurrency: c, Completed: l.Ops, Errors: l.Errors, FirstError: l.FirstError,
		PerSecond: perSecond(l.Ops, l.Window), Latency: summarize(l.Latencies, 0)}
	if l.Ops == 0 {
		return r, fmt.Errorf("no capture completed at concurrency %d: %s", c, l.FirstError)
	}
	return r, nil
}

// The contenders of the capture stages.
const (
	captureRaw   = "B1"      // the SQL from a pgx pool
	captureFloor = "B1 HTTP" // the same SQL behind a bare net/http handler
	captureAPI   = "S1"      // POST /v1/payments through the orders binary
)

// captures runs B1, its HTTP floor and S1 at each concurrency, s.Rounds
// times, the contenders alternated within each round (who goes first
// rotates), each on a fresh database right after a CHECKPOINT; each figure
// is the median round. One slow round of one contender cannot make the
// ratio, and each contender meets the machine in the same states.
func (e *env) captures(ctx context.Context, s Sizes) (raw, floor, api []CaptureResult, err error) {
	contenders := []string{captureRaw, captureFloor, captureAPI}
	out := map[string]*[]CaptureResult{captureRaw: &raw, captureFloor: &floor, captureAPI: &api}
	for _, c := range s.Concurrency {
		rounds, err := alternatedByName(s.Rounds, contenders, func(round int, name string) (CaptureResult, error) {
			r, err := e.capture(ctx, s, name, c, round)
			if err != nil {
				return r, fmt.Errorf("%s, concurrency %d: %w", name, c, err)
			}
			return r, nil
		})
		if err != nil {
			return raw, floor, api, err
		}
		for _, name := range contenders {
			m, lo, hi := medianSpread(rounds[name], captureRate)
			m.Rounds, m.MinPerSecond, m.MaxPerSecond = len(rounds[name]), lo, hi
			*out[name] = append(*out[name], m)
		}
	}
	return raw, floor, api, nil
}

// capture measures one contender once at concurrency c, closed loop, on a
// fresh orders database: B1 from a plain pgx pool with c connections, its
// HTTP floor and S1 from an HTTP client with c connections to a server
// whose pool has c connections (S1: the orders binary's DATABASE_MAX_CONNS).
func (e *env) capture(ctx context.Context, s Sizes, name string, c, round int) (CaptureResult, error) {
	stage := fmt.Sprintf("cap%dr%d%s", c, round, strings.ToLower(strings.ReplaceAll(name, " ", "")))
	dbURL, err := e.database(ctx, stage, "orders")
	if err != nil {
		return CaptureResult{}, err
	}
	var (
		op   func(ctx context.Context, w, n int) error
		stop func()
	)
	next := generators(c)
	switch name {
	case captureRaw, captureFloor:
		pool, ob, closePool, err := rawPool(ctx, dbURL, c)
		if err != nil {
			return CaptureResult{}, err
		}
		if name == captureRaw {
			op = func(ctx context.Context, w, n int) error {
				_, err := rawCapture(ctx, pool, ob, "order-events", fmt.Sprintf("b1-%d-%d", w, n), next[w]())
				return err
			}
			stop = closePool
			break
		}
		url, closeServer, err := floorServer(pool, ob)
		if err != nil {
			closePool()
			return CaptureResult{}, err
		}
		client, keys := captureClient(c), floorKeys()
		op = func(ctx context.Context, w, n int) error {
			return postPayment(ctx, client, url, fmt.Sprintf("b1h-%d-%d", w, n), keys, next[w]())
		}
		stop = func() { client.CloseIdleConnections(); closeServer(); closePool() }
	case captureAPI:
		keys, err := issueKeys(ctx, dbURL)
		if err != nil {
			return CaptureResult{}, err
		}
		api, err := e.orders(ctx, stage+"-orders", dbURL, "order-events", c)
		if err != nil {
			return CaptureResult{}, err
		}
		client := captureClient(c)
		op = func(ctx context.Context, w, n int) error {
			return postPayment(ctx, client, api.URL, fmt.Sprintf("s1-%d-%d", w, n), keys, next[w]())
		}
		stop = func() { client.CloseIdleConnections(); api.stop() }
	default:
		return CaptureResult{}, fmt.Errorf("unknown contender %q", name)
	}
	defer stop()
	if err := e.checkpoint(ctx); err != nil {
		return CaptureResult{}, fmt.Errorf("checkpoint before %s: %w", name, err)
	}
	return captureResult(c, closedLoop(ctx, c, s.Warmup, s.CaptureDuration, s.MinOps, op))
}

// rawPool is B1's pool of c connections on dbURL, configured as the orders
// API's, with its outbox writer and notifier; close stops them.
func rawPool(ctx context.Context, dbURL string, c int) (*pgxpool.Pool, rawOutbox, func(), error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, rawOutbox{}, nil, err
	}
	cfg.MaxConns, cfg.MinConns = int32(c), int32(c)
	dbpool.Configure(cfg) // as the orders API's pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, rawOutbox{}, nil, err
	}
	ob, stopNotifier, err := newRawOutbox(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, rawOutbox{}, nil, err
	}
	return pool, ob, func() { stopNotifier(); pool.Close() }, nil
}

// floorServer serves POST /v1/payments with B1's statements behind a bare
// net/http handler, in this process: decode the body, run rawCapture, answer
// 201 with the order as the API does. No router, authentication,
// validation, hooks, spans or metrics: what it costs beyond B1 is what an
// HTTP request and its answer cost on this machine, a floor under any HTTP
// API's S1.
func floorServer(pool *pgxpool.Pool, ob rawOutbox) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p loadgen.Payment
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		order, err := rawCapture(r.Context(), pool, ob, "order-events", r.Header.Get("Idempotency-Key"), p)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(order)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); <-done }, nil
}

// floorKeys are keys for every merchant of the load generator, so that the
// floor's payments carry their merchant as B1's do; the floor checks none.
func floorKeys() loadgen.Keys {
	keys := loadgen.Keys{ByMerchant: map[string]string{}}
	for _, m := range loadgen.Merchants() {
		keys.ByMerchant[m] = "unchecked"
	}
	return keys
}

// captureClient is an HTTP client with c connections to one host.
func captureClient(c int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: c, MaxIdleConnsPerHost: c, MaxConnsPerHost: c, IdleConnTimeout: time.Minute,
	}}
}

// generators gives every worker its own deterministic stream of payments.
func generators(workers int) []func() loadgen.Payment {
	out := make([]func() loadgen.Payment, workers)
	for w := range out {
		out[w] = loadgen.Payments(uint64(w + 1))
	}
	return out
}

var errNotCreated = errors.New("payment not created")

// issueKeys creates an API key for each merchant of the load generator in
// the orders database at dbURL.
func issueKeys(ctx context.Context, dbURL string) (loadgen.Keys, error) {
	var keys loadgen.Keys
	err := withConn(ctx, dbURL, func(c *pgx.Conn) error {
		var err error
		keys, err = loadgen.IssueKeys(ctx, apikey.NewStore(c))
		return err
	})
	return keys, err
}

// postPayment places one payment with its merchant's API key under
// idempotency key and expects 201 Created.
func postPayment(ctx context.Context, client *http.Client, baseURL, key string, keys loadgen.Keys, p loadgen.Payment) error {
	apiKey, p := keys.For(p)
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/payments", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("%w: %s %s", errNotCreated, res.Status, bytes.TrimSpace(answer))
	}
	return nil
}
