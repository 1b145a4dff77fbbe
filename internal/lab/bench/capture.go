package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/dbpool"
)

// CaptureResult is one concurrency level of B1 or S1.
type CaptureResult struct {
	Concurrency int     `json:"concurrency"`
	Completed   int     `json:"completed"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	PerSecond   float64 `json:"per_second"`
	Latency     Latency `json:"latency"`
}

func captureResult(c int, l loop) (CaptureResult, error) {
	r := CaptureResult{Concurrency: c, Completed: l.Ops, Errors: l.Errors, FirstError: l.FirstError,
		PerSecond: perSecond(l.Ops, l.Window), Latency: summarize(l.Latencies, 0)}
	if l.Ops == 0 {
		return r, fmt.Errorf("no capture completed at concurrency %d: %s", c, l.FirstError)
	}
	return r, nil
}

// rawCaptures is B1: the SQL of POST /v1/payments (rawCapture, the raw
// baseline in rawcapture.go: the same statements, one transaction) from a
// plain pgx pool with as many connections as workers, closed loop, at each
// concurrency.
func rawCaptures(ctx context.Context, e *env, s Sizes) ([]CaptureResult, error) {
	var out []CaptureResult
	for _, c := range s.Concurrency {
		dbURL, err := e.database(ctx, fmt.Sprintf("b1c%d", c), "orders")
		if err != nil {
			return out, err
		}
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			return out, err
		}
		cfg.MaxConns, cfg.MinConns = int32(c), int32(c)
		dbpool.Configure(cfg) // as the orders API's pool
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return out, err
		}
		ob, stopNotifier, err := newRawOutbox(ctx, pool)
		if err != nil {
			pool.Close()
			return out, err
		}
		next := generators(c)
		l := closedLoop(ctx, c, s.Warmup, s.CaptureDuration, s.MinOps, func(ctx context.Context, w, n int) error {
			return rawCapture(ctx, pool, ob, "order-events", fmt.Sprintf("b1-%d-%d", w, n), next[w]())
		})
		stopNotifier()
		pool.Close()
		r, err := captureResult(c, l)
		out = append(out, r)
		if err != nil {
			return out, fmt.Errorf("B1: %w", err)
		}
	}
	return out, nil
}

// httpCaptures is S1: POST /v1/payments through the orders service (the
// binary, a child process) with DATABASE_MAX_CONNS equal to the workers —
// the pool B1 has — closed loop, at each concurrency.
func httpCaptures(ctx context.Context, e *env, s Sizes) ([]CaptureResult, error) {
	var out []CaptureResult
	for _, c := range s.Concurrency {
		stage := fmt.Sprintf("s1c%d", c)
		dbURL, err := e.database(ctx, stage, "orders")
		if err != nil {
			return out, err
		}
		keys, err := issueKeys(ctx, dbURL)
		if err != nil {
			return out, err
		}
		api, err := e.orders(ctx, stage+"-orders", dbURL, "order-events", c)
		if err != nil {
			return out, err
		}
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConns: c, MaxIdleConnsPerHost: c, MaxConnsPerHost: c, IdleConnTimeout: time.Minute,
		}}
		next := generators(c)
		l := closedLoop(ctx, c, s.Warmup, s.CaptureDuration, s.MinOps, func(ctx context.Context, w, n int) error {
			return postPayment(ctx, client, api.URL, fmt.Sprintf("s1-%d-%d", w, n), keys, next[w]())
		})
		client.CloseIdleConnections()
		api.stop()
		r, err := captureResult(c, l)
		out = append(out, r)
		if err != nil {
			return out, fmt.Errorf("S1: %w", err)
		}
	}
	return out, nil
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
