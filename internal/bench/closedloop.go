package bench

import (
	"context"
	"sync"
	"time"
)

// loop is what a closed loop measured.
type loop struct {
	Ops        int             // completed in the measured window
	Errors     int             // failed, in the window or not
	FirstError string          //
	Window     time.Duration   //
	Latencies  []time.Duration // of the ops completed in the window
}

// closedLoop runs op from workers goroutines, each starting its next op as
// soon as its last one returned (a closed model: the rate is what the system
// gives, the concurrency is fixed). Ops that complete during warmup are not
// measured; then it measures for d and stops starting ops. op gets the
// worker's index and the op's number within the worker.
func closedLoop(ctx context.Context, workers int, warmup, d time.Duration, op func(ctx context.Context, worker, n int) error) loop {
	var (
		mu    sync.Mutex
		res   loop
		wg    sync.WaitGroup
		start = time.Now()
		from  = start.Add(warmup)
		until = from.Add(d)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				began := time.Now()
				if began.After(until) {
					return
				}
				err := op(ctx, w, n)
				ended := time.Now()
				mu.Lock()
				switch {
				case err != nil:
					res.Errors++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
				case !ended.Before(from) && !ended.After(until):
					res.Ops++
					res.Latencies = append(res.Latencies, ended.Sub(began))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Window = d
	return res
}
