package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// captureConfig is one capture run.
type captureConfig struct {
	DB               string
	Workers          int
	Warmup, Duration time.Duration
	MinOps           int // the window goes on until this many completed in it
	UpdateSQL        string
	IDsSQL           string
	Payload          payload
	Topic            string
	ForwarderTopic   string
}

func (c captureConfig) validate() error {
	switch {
	case c.DB == "":
		return errors.New("no -db")
	case c.Workers < 1:
		return errors.New("-workers must be at least 1")
	case c.Duration <= 0 || c.Warmup < 0:
		return errors.New("-duration must be positive and -warmup not negative")
	case c.UpdateSQL == "" || c.IDsSQL == "":
		return errors.New("-update-sql and -ids-sql are required")
	case c.Topic == "":
		return errors.New("no -topic")
	}
	return nil
}

// captureResult is what capture prints.
type captureResult struct {
	Workers      int     `json:"workers"`
	Transactions int     `json:"transactions"` // committed in the measured window
	Seconds      float64 `json:"seconds"`      // the window
	PerSecond    float64 `json:"per_second"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	Max          float64 `json:"max_ms"`
	Committed    int     `json:"committed"` // in all, warmup and the window's last ones included
	Errors       int     `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
}

// capture runs c.Workers workers in a closed loop, each with a connection
// of its own, each transaction: c.UpdateSQL on one of the worker's order ids
// (round-robin; no two workers share an id), then one message about that
// order published through Watermill's transactional publisher, then commit.
// Transactions that commit during the warmup are not measured; then it
// measures for c.Duration, and longer while fewer than c.MinOps committed in
// the window.
func capture(ctx context.Context, log *slog.Logger, c captureConfig) (captureResult, error) {
	res := captureResult{Workers: c.Workers}
	if err := c.validate(); err != nil {
		return res, err
	}
	if c.ForwarderTopic == "" {
		c.ForwarderTopic = defaultForwarderTopic
	}
	cfg, err := pgxpool.ParseConfig(c.DB)
	if err != nil {
		return res, err
	}
	cfg.MaxConns, cfg.MinConns = int32(c.Workers), int32(c.Workers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	logger := watermill.NewSlogLogger(log)
	if err := initSchema(pool, c.ForwarderTopic, logger); err != nil {
		return res, err
	}
	ids, err := orderIDs(ctx, pool, c.IDsSQL)
	if err != nil {
		return res, err
	}
	if len(ids) < c.Workers {
		return res, fmt.Errorf("-ids-sql returned %d ids for %d workers", len(ids), c.Workers)
	}
	log.InfoContext(ctx, "capturing", "workers", c.Workers, "ids", len(ids), "warmup", c.Warmup, "duration", c.Duration)

	op := func(ctx context.Context, orderID string) error {
		return publishInTx(ctx, pool, c.ForwarderTopic, c.Topic, logger, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, c.UpdateSQL, orderID)
			if err != nil {
				return fmt.Errorf("updating order %s: %w", orderID, err)
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("updating order %s: no row matched", orderID)
			}
			return nil
		}, c.Payload.message(ctx, orderID))
	}
	l := closedLoop(ctx, c.Workers, c.Warmup, c.Duration, c.MinOps, func(ctx context.Context, w, n int) error {
		// Worker w takes ids w, w+workers, w+2·workers, …, round and round.
		mine := (len(ids) - w + c.Workers - 1) / c.Workers
		return op(ctx, ids[w+(n%mine)*c.Workers])
	})
	res.Transactions, res.Committed, res.Errors, res.FirstError = l.ops, l.committed, l.errors, l.firstError
	res.Seconds = l.window.Seconds()
	if res.Seconds > 0 {
		res.PerSecond = float64(l.ops) / res.Seconds
	}
	res.P50, res.P99, res.Max = percentile(l.latencies, 0.50), percentile(l.latencies, 0.99), percentile(l.latencies, 1)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if l.ops == 0 {
		return res, fmt.Errorf("no transaction committed in the window: %s", l.firstError)
	}
	return res, nil
}

// orderIDs runs query and returns the first column of its rows as text.
func orderIDs(ctx context.Context, pool *pgxpool.Pool, query string) ([]string, error) {
	rows, err := pool.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("reading order ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reading order ids: %w", err)
	}
	return ids, nil
}

// loop is what closedLoop measured.
type loop struct {
	ops        int // committed in the window
	committed  int // committed in all
	errors     int
	firstError string
	window     time.Duration
	latencies  []time.Duration // of the ops in the window
}

// closedLoop runs op from workers goroutines, each starting its next op as
// soon as its last one returned, as the bench's own closed loop does
// (internal/lab/bench/closedloop.go): ops that end during warmup are not
// measured, then the window lasts d, longer while fewer than minOps (but at
// least one) ended in it, and the rate is over the window as it ended.
func closedLoop(ctx context.Context, workers int, warmup, d time.Duration, minOps int, op func(ctx context.Context, worker, n int) error) loop {
	var (
		mu   sync.Mutex
		res  loop
		wg   sync.WaitGroup
		from = time.Now().Add(warmup)
		end  = from.Add(d)
	)
	// over: the window has ended (under mu). A window in which nothing
	// committed ends on time: the errors tell why.
	over := func(t time.Time) bool { return t.After(end) && (res.ops >= minOps || res.ops == 0) }
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				began := time.Now()
				mu.Lock()
				stop := over(began)
				mu.Unlock()
				if stop {
					return
				}
				err := op(ctx, w, n)
				ended := time.Now()
				mu.Lock()
				switch {
				case err != nil:
					res.errors++
					if res.firstError == "" {
						res.firstError = err.Error()
					}
				case ended.Before(from) || over(ended):
					res.committed++
				default:
					res.committed++
					res.ops++
					res.latencies = append(res.latencies, ended.Sub(began))
					if ended.After(end) {
						end = ended
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.window = end.Sub(from)
	return res
}

// percentile is the nearest-rank q-quantile of samples, in milliseconds.
func percentile(samples []time.Duration, q float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return float64(sorted[rank]) / float64(time.Millisecond)
}
