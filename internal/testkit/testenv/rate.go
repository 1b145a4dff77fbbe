package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
)

// EnqueueAtRate commits one outbox event per tick, rate a second for
// duration — an open model: four writers take the ticks, so a slow commit
// does not lower the rate — each event built by build(i). It returns when
// every write ended: each event's commit time by event id, and the rate
// achieved.
func EnqueueAtRate(t testing.TB, pool *pgxpool.Pool, rate int, duration time.Duration, build func(i int) outbox.Event) (map[string]time.Time, float64) {
	t.Helper()
	ctx := context.Background()
	var (
		mu        sync.Mutex
		committed = map[string]time.Time{}
		writers   sync.WaitGroup
	)
	ticks := make(chan int, rate)
	for range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range ticks {
				e := build(i)
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, e) }); err != nil {
					t.Error(err)
					return
				}
				now := time.Now()
				mu.Lock()
				committed[e.ID.String()] = now
				mu.Unlock()
			}
		}()
	}
	ticker := time.NewTicker(time.Second / time.Duration(rate))
	begin, n := time.Now(), 0
	for time.Since(begin) < duration {
		<-ticker.C
		ticks <- n
		n++
	}
	ticker.Stop()
	close(ticks)
	writers.Wait()
	return committed, float64(n) / time.Since(begin).Seconds()
}
