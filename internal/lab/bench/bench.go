package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/pkg/outbox"
)

// Run runs every stage, in order, and returns the report. A stage that
// cannot measure (a service that does not start, an error from the stack)
// ends the run with an error and the report of the stages before it; a
// target missed is only reported.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	if err := cfg.validate(); err != nil {
		return rep, err
	}
	start := time.Now()
	rep = Report{Started: start.UTC(), Sizes: cfg.Sizes, Stages: Stages{Seconds: map[string]float64{}}}
	e, err := newEnv(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := e.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the run's databases and topics: %w", cerr))
		}
		rep.Rows, rep.Notes = rows(rep.Stages, cfg.Sizes), notes(rep.Stages, cfg.Sizes)
		rep.Machine.LoadEnd = loadAverage()
		rep.Seconds = time.Since(start).Seconds()
	}()
	fmt.Fprintf(cfg.Log, "bench: run %s (%s sizes); child process logs in %s\n", e.run, cfg.Sizes.Name, e.cfg.LogDir)
	if rep.Machine, err = e.machine(ctx); err != nil {
		return rep, err
	}
	st := &rep.Stages
	s := cfg.Sizes
	stage := func(name string, fn func() error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(cfg.Log, "bench: %s\n", name)
		t := time.Now()
		err := fn()
		st.Seconds[name] = time.Since(t).Seconds()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}

	var (
		one, three backlog
		events     []outbox.Event // one's, before the relays drain it
		peers      peerTools
		watermill  writePeer
	)
	// A step runs when the run includes one of the stages it serves.
	type step struct {
		name   string
		serves []string
		fn     func() error
	}
	best := func() float64 {
		if !cfg.runs("S1") {
			return cfg.S1Rate
		}
		return bestCapture(st.S1)
	}
	// afresh runs fn after the earlier steps' databases are dropped: a step
	// that uses none of them would otherwise measure autovacuum still
	// cleaning them (C1's alone updated a million rows) on its cores.
	afresh := func(fn func() error) func() error {
		return func() error {
			if err := e.dropDatabases(ctx); err != nil {
				return fmt.Errorf("dropping the earlier stages' databases: %w", err)
			}
			return fn()
		}
	}
	var steps []step
	if cfg.Peers {
		steps = append(steps, step{"peers: build", []string{"C1", "P1"}, func() (err error) {
			peers, err = e.buildPeers(ctx)
			watermill = e.watermillWrites(peers, s)
			return err
		}})
	}
	steps = append(steps, []step{
		// S1 is reported against B1 and B1's HTTP floor, alternated.
		{"B1 and S1 capture", []string{"B1", "S1"}, func() (err error) {
			st.B1, st.B1HTTP, st.S1, err = e.captures(ctx, s)
			return err
		}},
		{"C1 outbox write", []string{"C1"}, afresh(func() (err error) { st.C1, err = e.outboxWrites(ctx, s, watermill); return err })},
		{"S2 backlogs", []string{"B2", "S2", "B3", "S3"}, func() (err error) {
			if one, err = e.newBacklog(ctx, "s2r1", "", s.Backlog); err != nil {
				return err
			}
			three, err = e.newBacklog(ctx, "s2r3", "", s.Backlog)
			return err
		}},
		// S3's variants replay B2's events.
		{"B2 raw produce", []string{"B2", "S3"}, func() (err error) {
			events, err = backlogEvents(ctx, one)
			if err != nil {
				return err
			}
			topic, err := e.topic("b2")
			if err != nil {
				return err
			}
			st.B2, err = e.rawProduce(ctx, events, topic)
			return err
		}},
		// B3 and S3 read the topic the drains fill.
		{"S2 relay drain", []string{"S2", "B3", "S3"}, func() error {
			for _, run := range []struct {
				b backlog
				n int
			}{{one, 1}, {three, 3}} {
				d, err := e.drain(ctx, run.b, run.n)
				if err != nil {
					return err
				}
				st.S2 = append(st.S2, d)
			}
			return nil
		}},
		{"B3 raw consume", []string{"B3"}, func() (err error) { st.B3, err = e.rawConsume(ctx, one.topic, one.events); return err }},
		{"S3 ledger", []string{"S3"}, func() (err error) {
			st.S3, err = e.ledgerConsume(ctx, "s3", one.topic, one.events, s.ConsumeWindow, s.MinOps)
			return err
		}},
		{"S3 variants", []string{"S3"}, func() (err error) {
			st.S3Variants, err = e.s3Variants(ctx, one.topic, events, s.ConsumeWindow, s.MinOps)
			return err
		}},
		{"S4 end to end", []string{"S4"}, afresh(func() (err error) {
			st.S4, err = e.endToEndBoth(ctx, "s4", "", "", best(), e2ePercents, s)
			return err
		})},
		{"S5 growth", []string{"S5"}, afresh(func() error { return e.growth(ctx, st, s, best()) })},
	}...)
	if cfg.Peers {
		steps = append(steps, step{"P1 peer drains", []string{"P1"}, afresh(func() (err error) { st.P1, err = e.peerDrains(ctx, peers, s); return err })})
	}
	for _, step := range steps {
		if !cfg.runs(step.serves...) {
			continue
		}
		if err := stage(step.name, step.fn); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// machine records the machine, as the run's role sees the server.
func (e *env) machine(ctx context.Context) (Machine, error) {
	url, err := migrate.URL(e.cfg.AdminURL, "postgres", e.role, e.password)
	if err != nil {
		return Machine{}, err
	}
	return machine(ctx, url)
}

// e2ePercents are S4's loads, as percentages of S1's best rate.
var e2ePercents = []int{25, 50}

// growthPercent is the S4 load S5 repeats on its history: the lower one.
// S1's best rate is the API's alone, and at 50 % of it the whole pipeline
// keeps two cores 1.84-1.97 busy: single runs collapse into queues of
// seconds with or without history (on one machine within the hour, the
// code of two versions measured 0.06 and 1.80 times the p99 without
// history), so a ratio taken there is the collapse's, not the history's.
// At 25 % the cores are 1.3-1.7 busy and what history costs shows.
var growthPercent = e2ePercents[0]

// bestCapture is S1's best rate.
func bestCapture(s1 []CaptureResult) float64 {
	best := 0.0
	for _, r := range s1 {
		best = max(best, r.PerSecond)
	}
	return best
}

// endToEndBoth runs S4 at each percentage of best, with LISTEN/NOTIFY, then
// polling only, on one pipeline for stage.
func (e *env) endToEndBoth(ctx context.Context, stage, ordersURL, ledgerURL string, best float64, percents []int, s Sizes) ([]E2EResult, error) {
	p, err := e.newPipeline(ctx, stage, ordersURL, ledgerURL)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := e.warmUp(ctx, p, best, percents[0], s); err != nil {
		return nil, err
	}
	var out []E2EResult
	for _, pct := range percents {
		if out, err = e.endToEndModes(ctx, p, best, pct, s, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// warmUp runs S4 on p at pct of best, with LISTEN/NOTIFY and polling
// only, and measures nothing. A pipeline's first runs meet a new topic and
// tables that autoanalyze has not seen at this size: in S5 the first round
// of either side measured a p99 of 138-293 ms against 45-126 ms for every
// later one, and in S4 a first run's broker spent twice its later CPU per
// payment.
func (e *env) warmUp(ctx context.Context, p *pipeline, best float64, pct int, s Sizes) error {
	if _, err := e.endToEndModes(ctx, p, best, pct, s, nil); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	return nil
}

// endToEndModes runs S4 on p at pct of best, with LISTEN/NOTIFY, then
// polling only, appending the results to out.
func (e *env) endToEndModes(ctx context.Context, p *pipeline, best float64, pct int, s Sizes, out []E2EResult) ([]E2EResult, error) {
	rate := max(1, int(best*float64(pct)/100))
	for i, pollingOnly := range []bool{false, true} {
		r, err := e.endToEnd(ctx, p, pollingOnly, rate, s, uint64(100+len(out)+i))
		r.Percent = pct
		if err != nil {
			return out, fmt.Errorf("%s at %d %%: %w", r.Mode, pct, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// growth is S5: an orders database with s.History dispatched outbox rows
// and a ledger database with as many processed inbox rows (seeded side by
// side), then S2 with one relay and S4 at growthPercent, s.GrowthRounds
// times each, alternated with S2 and S4 on fresh databases: the p99 of
// a system near saturation moves with what autovacuum and checkpoints do
// meanwhile, so history is judged by the rounds of each side pooled, taken
// side by side, not by one run against S4's run of minutes before.
func (e *env) growth(ctx context.Context, st *Stages, s Sizes, best float64) error {
	g := &st.S5
	g.History = s.History
	t := time.Now()
	var ordersURL, ledgerURL string
	seeds, sctx := errgroup.WithContext(ctx)
	seeds.Go(func() (err error) {
		if ordersURL, err = e.database(sctx, "s5", "orders"); err != nil {
			return err
		}
		return withConn(sctx, ordersURL, func(c *pgx.Conn) error { return seedOutbox(sctx, c, "order-events", s.History, true) })
	})
	seeds.Go(func() (err error) {
		if ledgerURL, err = e.database(sctx, "s5", "ledger"); err != nil {
			return err
		}
		return withConn(sctx, ledgerURL, func(c *pgx.Conn) error { return seedInbox(sctx, c, s.History) })
	})
	if err := seeds.Wait(); err != nil {
		return err
	}
	// Gigabytes were just written: flush them now, or the checkpoint that
	// follows would write them back during the measurements.
	if err := e.checkpoint(ctx); err != nil {
		return fmt.Errorf("checkpoint after the seed: %w", err)
	}
	g.SeedSeconds = time.Since(t).Seconds()
	// S2 on the history, alternated with S2 on a fresh database: a single
	// drain right after the seed's checkpoint, against S2 of half an hour
	// before, measured 0.75-1.04 across runs.
	freshURL, err := e.database(ctx, "s5s2", "orders")
	if err != nil {
		return err
	}
	drains := []struct {
		url string
		out *[]DrainResult
	}{{ordersURL, &g.S2Runs}, {freshURL, &g.S2Base}}
	err = alternated(s.GrowthRounds, len(drains), func(round, side int) error {
		b, err := e.newBacklog(ctx, fmt.Sprintf("s5s2-%d-%d", round, side), drains[side].url, s.Backlog)
		if err != nil {
			return err
		}
		r, err := e.drain(ctx, b, 1)
		if err != nil {
			return err
		}
		*drains[side].out = append(*drains[side].out, r)
		return nil
	})
	if err != nil {
		return err
	}
	g.S2 = median(g.S2Runs, drainRate)
	history, err := e.newPipeline(ctx, "s5s4", ordersURL, ledgerURL)
	if err != nil {
		return err
	}
	defer history.stop()
	fresh, err := e.newPipeline(ctx, "s5base", "", "")
	if err != nil {
		return err
	}
	defer fresh.stop()
	pct := growthPercent
	g.Rounds = s.GrowthRounds
	runs := []struct {
		p   *pipeline
		out *[]E2EResult
	}{{history, &g.S4}, {fresh, &g.Base}}
	for _, r := range runs {
		if err := e.warmUp(ctx, r.p, best, pct, s); err != nil {
			return err
		}
	}
	err = alternated(s.GrowthRounds, len(runs), func(_, side int) (err error) {
		r := runs[side]
		*r.out, err = e.endToEndModes(ctx, r.p, best, pct, s, *r.out)
		return err
	})
	if err != nil {
		return err
	}
	g.Pooled, g.BasePooled = pooled(g.S4), pooled(g.Base)
	return nil
}

// pooled is runs as one run per mode and load: their payments, and the
// latencies of all their events as one distribution. A round's p99 at 25 %
// of S1 moves with whatever stalls the machine during its 20 s (a burst of
// commits waiting on one WAL flush, a checkpoint's writes), by more than the
// 10 % S5 allows history; pooled, such a stall is one part in Rounds of the
// tail, and the p99 is the whole measurement's.
func pooled(runs []E2EResult) []E2EResult {
	var out []E2EResult
	for _, m := range e2eModes(runs) {
		p := E2EResult{Mode: m.Mode, Percent: m.Percent, StatusCodes: map[string]int{}}
		var missingPublished, missingApplied int
		for _, r := range e2eRuns(runs, m) {
			p.PollIntervalMs, p.Rate, p.Listens = r.PollIntervalMs, r.Rate, r.Listens
			p.Sent += r.Sent * float64(r.Payments)
			p.Payments += r.Payments
			p.API.N += r.API.N
			p.API.Max = max(p.API.Max, r.API.Max)
			for code, n := range r.StatusCodes {
				p.StatusCodes[code] += n
			}
			p.published = append(p.published, r.published...)
			p.applied = append(p.applied, r.applied...)
			missingPublished += r.Published.Missing
			missingApplied += r.Applied.Missing
		}
		if p.Payments > 0 {
			p.Sent /= float64(p.Payments)
		}
		p.Published = distribution(p.published, missingPublished)
		p.Applied = distribution(p.applied, missingApplied)
		out = append(out, p)
	}
	return out
}

// checkpoint flushes what was just written: a stage's seed, so that the
// measurement after it neither competes with the checkpointer writing it
// back nor meets a checkpoint another contender did not (a checkpoint also
// restarts checkpoint_timeout's clock).
func (e *env) checkpoint(ctx context.Context) error {
	return withConn(ctx, e.cfg.AdminURL, func(c *pgx.Conn) error { _, err := c.Exec(ctx, "CHECKPOINT"); return err })
}

func withConn(ctx context.Context, url string, fn func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}
