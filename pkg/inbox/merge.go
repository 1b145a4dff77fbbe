package inbox

import (
	"context"
	"sync"

	"github.com/IBM/sarama"
)

// merger applies, in one transaction, the small batches that several
// partitions have waiting at the same moment: a group commit. A consumer
// of P partitions under a steady stream finds about rate/P messages of a
// partition waiting at a time, often one, and would otherwise pay a
// transaction and its commit for each; while one merged transaction runs,
// the next partitions' messages gather for the following one, so the
// transactions grow with the load instead of their number.
//
// A partition's claim goroutine hands its batch over and waits for it to be
// through before it takes its next one, so each partition is still applied
// in its order. A merged batch gets one attempt: when it fails (a poison
// message, the database), nothing of it is applied and each claim processes
// its own batch as it would unmerged, so a failing partition's retries
// delay that partition only. One merger runs per consumer group session.
type merger struct {
	r      *Runner
	max    int // messages per merged transaction: Config.BatchSize
	reqs   chan *mergeReq
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// mergeReq is one partition's batch, decoded. The merger answers on
// through how many of its first messages were committed and past
// AfterCommit; the claim handles the rest itself.
type mergeReq struct {
	kms     []*sarama.ConsumerMessage
	msgs    []Message
	through chan int // buffered: the merger never waits for a claim
}

func startMerger(ctx context.Context, r *Runner) *merger {
	ctx, cancel := context.WithCancel(ctx)
	m := &merger{r: r, max: r.cfg.BatchSize, reqs: make(chan *mergeReq), cancel: cancel}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		m.run(ctx)
	}()
	return m
}

func (m *merger) stop() {
	m.cancel()
	m.done.Wait()
}

// submit hands a batch to the merger and waits for it: through is how many
// of its first messages went through. ok is false when the session ended
// first.
func (m *merger) submit(ctx context.Context, kms []*sarama.ConsumerMessage, msgs []Message) (through int, ok bool) {
	req := &mergeReq{kms: kms, msgs: msgs, through: make(chan int, 1)}
	select {
	case m.reqs <- req:
	case <-ctx.Done():
		return 0, false
	}
	select {
	case through = <-req.through:
		return through, true
	case <-ctx.Done():
		return 0, false
	}
}

func (m *merger) run(ctx context.Context) {
	var next *mergeReq // a request that did not fit in the previous batch
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case <-ctx.Done():
				return
			case first = <-m.reqs:
			}
		}
		reqs, n := []*mergeReq{first}, len(first.msgs)
	gather:
		for n < m.max {
			select {
			case req := <-m.reqs:
				if n+len(req.msgs) > m.max {
					next = req
					break gather
				}
				reqs, n = append(reqs, req), n+len(req.msgs)
			default:
				break gather
			}
		}
		m.apply(ctx, reqs, n)
	}
}

// apply commits reqs in one transaction, then runs AfterCommit for each
// request's messages, and answers every request.
func (m *merger) apply(ctx context.Context, reqs []*mergeReq, n int) {
	kms, msgs := make([]*sarama.ConsumerMessage, 0, n), make([]Message, 0, n)
	for _, req := range reqs {
		kms, msgs = append(kms, req.kms...), append(msgs, req.msgs...)
	}
	tctx, spans := m.r.traceProcess(ctx, kms)
	outcomes, err := m.r.proc.eng.commitBatch(tctx, msgs)
	spans.end(outcomes, err)
	for _, req := range reqs {
		if err != nil {
			req.through <- 0
			continue
		}
		through, _ := m.r.proc.eng.afterCommits(tctx, req.msgs, outcomes[:len(req.msgs)])
		outcomes = outcomes[len(req.msgs):]
		req.through <- through
	}
}
