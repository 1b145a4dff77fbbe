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
// measured; then it measures for d, and for longer if fewer than minOps
// completed by then (a busy machine), until the minOps-th completes or ctx
// ends: a measurement counts work, it does not give up on a slow system.
// The rate is then over the longer window. op gets the worker's index and
// the op's number within the worker.
func closedLoop(ctx context.Context, workers int, warmup, d time.Duration, minOps int, op func(ctx context.Context, worker, n int) error) loop {
	var (
		mu    sync.Mutex
		res   loop
		wg    sync.WaitGroup
		start = time.Now()
		from  = start.Add(warmup)
		until = from.Add(d)
		end   = until // the window's end, later while fewer than minOps completed
	)
	over := func(t time.Time) bool { // under mu
		return t.After(end) && res.Ops >= minOps
	}
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
					res.Errors++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
				case ended.Before(from) || over(ended):
				default:
					res.Ops++
					res.Latencies = append(res.Latencies, ended.Sub(began))
					if ended.After(end) {
						end = ended
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Window = end.Sub(from)
	return res
}
