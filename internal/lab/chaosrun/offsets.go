package chaosrun

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
)

// offsetWatch samples the committed offsets of the ledger's consumer group
// while a scenario runs. In a correct group they only move forward: a
// commit going back is a member committing for partitions it no longer
// owns, from a stale generation (a zombie write).
type offsetWatch struct {
	admin  sarama.ClusterAdmin
	group  string
	topic  string
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	seen  map[int32]int64
	backs int
}

// watchOffsets starts sampling the ledger group's committed offsets every
// 100 ms until stop.
func watchOffsets(ctx context.Context, d *Deployment) (*offsetWatch, error) {
	admin, err := sarama.NewClusterAdmin(d.Src.Brokers, broker.Config("paylab-chaos"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &offsetWatch{admin: admin, group: d.LedgerGroup, topic: d.Src.Topic, cancel: cancel,
		done: make(chan struct{}), seen: map[int32]int64{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			w.sample()
			pause(ctx, 100*time.Millisecond)
		}
	}()
	return w, nil
}

func (w *offsetWatch) sample() {
	resp, err := w.admin.ListConsumerGroupOffsets(w.group, nil)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, b := range resp.Blocks[w.topic] {
		if b.Err != sarama.ErrNoError || b.Offset < 0 {
			continue
		}
		if last, ok := w.seen[p]; ok && b.Offset < last {
			w.backs++
		}
		w.seen[p] = max(w.seen[p], b.Offset)
	}
}

// waitMembers waits until the group's size satisfies ok, or ctx ends.
func (w *offsetWatch) waitMembers(ctx context.Context, ok func(int) bool) {
	for ctx.Err() == nil {
		if n, err := w.members(); err == nil && ok(n) {
			return
		}
		pause(ctx, 200*time.Millisecond)
	}
}

// members is how many members the group has now.
func (w *offsetWatch) members() (int, error) {
	gs, err := w.admin.DescribeConsumerGroups([]string{w.group})
	if err != nil {
		return 0, err
	}
	if len(gs) != 1 {
		return 0, fmt.Errorf("group %s: %d descriptions", w.group, len(gs))
	}
	return len(gs[0].Members), nil
}

// regressions is how often a committed offset went back.
func (w *offsetWatch) regressions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.backs
}

// stop ends the sampling; it may be called more than once.
func (w *offsetWatch) stop() {
	w.once.Do(func() {
		w.cancel()
		<-w.done
		w.admin.Close()
	})
}

// ledgerScaledRebalance runs three ledger instances in one group and, under
// load, SIGKILLs one (its restart policy brings it back) and restarts
// another cleanly (SIGTERM, then its restart policy): each change is a
// rebalance. Nothing may be lost or applied twice, no refund before its
// capture, and no committed offset may go back.
func ledgerScaledRebalance(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	w, err := watchOffsets(ctx, d)
	if err != nil {
		return "", 0, err
	}
	defer w.stop()
	defer keepLoad(ctx, d, 94)()
	all := len(d.Ledgers)
	w.waitMembers(ctx, func(n int) bool { return n == all })
	pause(ctx, 2*time.Second) // payments are flowing
	killed, back, err := d.Ledgers[1].killAndAwaitRestart(ctx)
	if err != nil {
		return "", 0, err
	}
	cb := <-back
	if cb.err != nil {
		return "", 0, cb.err
	}
	pause(ctx, 2*time.Second)
	restarted := d.Ledgers[2]
	before, err := restarted.started(ctx)
	if err != nil {
		return "", 0, err
	}
	if err := restarted.Signal(syscall.SIGTERM); err != nil {
		return "", 0, err
	}
	restarted.mark("restarted (SIGTERM)")
	again, err := restarted.awaitRestart(ctx, before)
	restarted.markBack(err)
	if err != nil {
		return "", 0, err
	}
	w.waitMembers(ctx, func(n int) bool { return n == all })
	settled := time.Since(killed)
	w.stop()
	d.zombie = w.regressions()
	return fmt.Sprintf("%s SIGKILLed, back in %s; %s restarted (SIGTERM), back in %s; three members again %s after the kill; committed offsets went back %d times",
		d.Ledgers[1].Name, cb.after.Round(10*time.Millisecond), restarted.Name, again.Round(10*time.Millisecond),
		settled.Round(100*time.Millisecond), d.zombie), max(cb.after, again), nil
}
