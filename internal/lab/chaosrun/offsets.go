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

// watchLedgerGroup starts watching the ledger group's committed offsets and
// a load that keeps the ledgers busy (keepLoad), and waits until every
// ledger instance is a member of the group; stop ends the load, then the
// watch.
func watchLedgerGroup(ctx context.Context, d *Deployment, seed uint64) (w *offsetWatch, stop func(), err error) {
	if w, err = watchOffsets(ctx, d); err != nil {
		return nil, nil, err
	}
	stopLoad := keepLoad(ctx, d, seed)
	stop = func() {
		stopLoad()
		w.stop()
	}
	if err := w.waitMembers(ctx, d.allLedgers); err != nil {
		stop()
		return nil, nil, err
	}
	return w, stop, nil
}

// allLedgers holds when every ledger instance is a member of the group.
func (d *Deployment) allLedgers(members int) bool { return members == len(d.Ledgers) }

// waitMembers waits until the group's size satisfies ok; an error when ctx
// ends first.
func (w *offsetWatch) waitMembers(ctx context.Context, ok func(int) bool) error {
	for {
		n, err := w.members()
		if err == nil && ok(n) {
			return nil
		}
		pause(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("group %s: %d members (last error: %v): %w", w.group, n, err, ctx.Err())
		}
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

// stop ends the sampling and returns how often a committed offset went
// back; it may be called more than once.
func (w *offsetWatch) stop() (regressions int) {
	w.once.Do(func() {
		w.cancel()
		<-w.done
		w.admin.Close()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.backs
}

// ledgerScaledRebalance runs three ledger instances in one group and, under
// load, SIGKILLs one (its restart policy brings it back) and restarts
// another cleanly (SIGTERM, then its restart policy): each change is a
// rebalance. Nothing may be lost or applied twice, no refund before its
// capture, and no committed offset may go back.
func ledgerScaledRebalance(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	w, stop, err := watchLedgerGroup(ctx, d, 94)
	if err != nil {
		return "", 0, err
	}
	defer stop()
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
	_, back, err = restarted.endAndAwaitRestart(ctx, "restarted (SIGTERM)",
		func(context.Context) error { return restarted.Signal(syscall.SIGTERM) })
	if err != nil {
		return "", 0, err
	}
	again := <-back
	if again.err != nil {
		return "", 0, again.err
	}
	if err := w.waitMembers(ctx, d.allLedgers); err != nil {
		return "", 0, err
	}
	settled := time.Since(killed)
	d.zombie = w.stop()
	return fmt.Sprintf("%s SIGKILLed, back in %s; %s restarted (SIGTERM), back in %s; three members again %s after the kill; committed offsets went back %d times",
		d.Ledgers[1].Name, cb.after.Round(10*time.Millisecond), restarted.Name, again.after.Round(10*time.Millisecond),
		settled.Round(100*time.Millisecond), d.zombie), max(cb.after, again.after), nil
}
