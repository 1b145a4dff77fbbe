package chaosrun

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/reconcile"
)

// Timeline is how a scenario's deployment moved while the scenario ran,
// from the load's start until the pipeline settled: its databases sampled
// every Every, and the moments its fault started and ended.
type Timeline struct {
	Start   time.Time     `json:"start"`
	Every   time.Duration `json:"every_ns"`
	Samples []Sample      `json:"samples"`
	Marks   []Mark        `json:"marks,omitempty"`
}

// Sample is one look at the deployment's databases, At seconds after the
// timeline's start. A figure that could not be read — its database down,
// say — is absent: a gap, never a zero.
type Sample struct {
	At float64 `json:"t"`
	// Payments are the orders committed in the orders database.
	Payments *int64 `json:"payments,omitempty"`
	// Pending are the outbox rows not yet dispatched (the WAL relay deletes
	// what it published: the same figure), OldestAge the age of the oldest
	// of them in seconds, 0 when there is none.
	Pending   *int64   `json:"pending,omitempty"`
	OldestAge *float64 `json:"oldest_pending_s,omitempty"`
	// Entries and Receipts are the effects applied: the ledger's journal
	// entries and the receipts notifications sent.
	Entries  *int64 `json:"journal_entries,omitempty"`
	Receipts *int64 `json:"receipts,omitempty"`
}

// Mark is a moment of the fault, At seconds after the timeline's start: it
// starts (a server stopped, a process crashed or stalled) or, End, it ends
// (a server back, a process ready again, the work taken over).
type Mark struct {
	At    float64 `json:"t"`
	Label string  `json:"label"`
	End   bool    `json:"end,omitempty"`
}

// The sampler's pace, and how long one look may take before it counts as a
// gap.
const (
	timelineEvery = 250 * time.Millisecond
	sampleTimeout = 2 * time.Second
)

// timeline records a Timeline; its methods do nothing on a nil timeline,
// so the fault functions mark whether or not anything records.
type timeline struct {
	mu      sync.Mutex
	tl      Timeline
	armed   bool // a fault that fires by chance was armed: its disarming ends it
	stopped bool
	once    sync.Once
	cancel  context.CancelFunc
	done    chan struct{}
}

// startTimeline samples d's databases once, then starts sampling them
// every timelineEvery and recording the marks of d and of its processes,
// until the timeline's stop.
func (d *Deployment) startTimeline(ctx context.Context) *timeline {
	t := &timeline{tl: Timeline{Start: time.Now(), Every: timelineEvery}, done: make(chan struct{})}
	d.timeline = t
	for _, p := range d.all() {
		p.timeline.Store(t)
	}
	sctx, cancel := context.WithCancel(ctx)
	t.cancel = cancel
	// The first look is taken before the scenario starts: the state the
	// load starts from.
	s := &sampler{src: d.Src, conns: map[string]*pgx.Conn{}}
	t.record(t.tl.Start, s.look(sctx))
	go t.sample(sctx, s)
	return t
}

// stop ends the sampling and returns the timeline; marks made after it are
// not recorded.
func (t *timeline) stop() *Timeline {
	if t == nil {
		return nil
	}
	t.once.Do(func() {
		t.cancel()
		<-t.done
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	out := t.tl
	out.Samples, out.Marks = slices.Clone(t.tl.Samples), slices.Clone(t.tl.Marks)
	return &out
}

// mark records that the fault starts now, as label says.
func (d *Deployment) mark(label string) { d.timeline.add(time.Now(), label, false) }

// markEnd records that the fault ends now, as label says.
func (d *Deployment) markEnd(label string) { d.timeline.add(time.Now(), label, true) }

// markArmed records that a fault that fires by chance is armed now: it
// lasts until the faults are disarmed (markDisarmed).
func (d *Deployment) markArmed(label string) {
	if t := d.timeline; t != nil {
		t.mu.Lock()
		t.armed = true
		t.mu.Unlock()
	}
	d.mark(label)
}

// markDisarmed records that the faults are disarmed, when one armed by
// markArmed was lasting until then.
func (d *Deployment) markDisarmed() {
	if t := d.timeline; t != nil {
		t.mu.Lock()
		armed := t.armed
		t.mu.Unlock()
		if armed {
			d.markEnd("faults disarmed")
		}
	}
}

// restarted records that p went away (a crash) away ago, and is ready again
// now.
func (p *Process) restarted(what string, away time.Duration) {
	t := p.timeline.Load()
	now := time.Now()
	t.add(now.Add(-away), p.Name+" "+what, false)
	t.add(now, p.Name+" ready", true)
}

// mark records that a fault starts on p now.
func (p *Process) mark(what string) { p.timeline.Load().add(time.Now(), p.Name+" "+what, false) }

// markBack records that p is ready again now, unless awaiting it failed.
func (p *Process) markBack(err error) {
	if err == nil {
		p.timeline.Load().add(time.Now(), p.Name+" ready", true)
	}
}

func (t *timeline) add(at time.Time, label string, end bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.tl.Marks = append(t.tl.Marks, Mark{At: at.Sub(t.tl.Start).Seconds(), Label: label, End: end})
}

// The sampler's queries.
const (
	sampleOrders = `SELECT (SELECT count(*) FROM orders), count(*),
		coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
		FROM outbox WHERE dispatched_at IS NULL`
	sampleLedger        = `SELECT count(*) FROM journal_entries`
	sampleNotifications = `SELECT count(*) FROM notifications`
)

// sampler looks at a deployment's three databases, on a connection to
// each that it opens again after a failure.
type sampler struct {
	src   reconcile.Sources
	conns map[string]*pgx.Conn
}

// look takes one sample. A figure that cannot be read (the server down, the
// connection lost) is left out, and its connection is opened again at the
// next look; nothing here fails the scenario.
func (s *sampler) look(ctx context.Context) Sample {
	var out Sample
	var payments, pending, entries, receipts int64
	var age float64
	if s.query(ctx, s.src.OrdersURL, sampleOrders, &payments, &pending, &age) {
		out.Payments, out.Pending, out.OldestAge = &payments, &pending, &age
	}
	if s.query(ctx, s.src.LedgerURL, sampleLedger, &entries) {
		out.Entries = &entries
	}
	if s.query(ctx, s.src.NotificationsURL, sampleNotifications, &receipts) {
		out.Receipts = &receipts
	}
	return out
}

func (s *sampler) query(ctx context.Context, url, query string, dest ...any) bool {
	if url == "" {
		return false
	}
	qctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	c := s.conns[url]
	if c == nil {
		var err error
		if c, err = pgx.Connect(qctx, url); err != nil {
			return false
		}
		s.conns[url] = c
	}
	if err := c.QueryRow(qctx, query).Scan(dest...); err != nil {
		s.close(ctx, url)
		return false
	}
	return true
}

func (s *sampler) close(ctx context.Context, url string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sampleTimeout)
	defer cancel()
	_ = s.conns[url].Close(cctx)
	delete(s.conns, url)
}

// record appends a sample taken at at.
func (t *timeline) record(at time.Time, s Sample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.At = at.Sub(t.tl.Start).Seconds()
	t.tl.Samples = append(t.tl.Samples, s)
}

// sample looks every timelineEvery until ctx ends.
func (t *timeline) sample(ctx context.Context, s *sampler) {
	defer close(t.done)
	defer func() {
		for url := range s.conns {
			s.close(ctx, url)
		}
	}()
	tick := time.NewTicker(timelineEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		at := time.Now()
		smp := s.look(ctx)
		if ctx.Err() != nil {
			return // a look cut short by the stop is no sample
		}
		t.record(at, smp)
	}
}
