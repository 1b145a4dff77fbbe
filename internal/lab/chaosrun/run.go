package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/lab/reconcile"
)

// Select returns the scenarios named, or for "all" every scenario but those
// on a Patroni cluster, or with quick those of make test's quick set; "ha"
// names those on a Patroni cluster (make chaos-ha).
func Select(names []string, quick bool) ([]Scenario, error) {
	all := Scenarios()
	if len(names) == 1 && names[0] == "all" {
		all = slices.DeleteFunc(all, func(s Scenario) bool { return s.pg != "" })
		if quick {
			all = slices.DeleteFunc(all, func(s Scenario) bool { return s.fullOnly })
		}
		return all, nil
	}
	if len(names) == 1 && names[0] == "ha" {
		return slices.DeleteFunc(all, func(s Scenario) bool { return s.pg == "" }), nil
	}
	var out []Scenario
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no scenario %q (paylab chaos list)", n)
		}
	}
	return out, nil
}

// Run runs each scenario on target with sizes s, printing progress to log,
// and returns one result per scenario, in order. On a target that gives
// each scenario its own deployment, scenarios run `parallel` at a time,
// except those that stop a server they all share, which run alone; on a
// shared deployment they run one at a time.
func Run(ctx context.Context, target Target, scenarios []Scenario, s Sizes, parallel int, log io.Writer) []Result {
	results := make([]Result, len(scenarios))
	var mu sync.Mutex
	report := func(i int, r Result) {
		mu.Lock()
		defer mu.Unlock()
		results[i] = r
		if r.Skipped != "" {
			fmt.Fprintf(log, "  SKIP %s: %s\n", r.Scenario, r.Skipped)
			return
		}
		fmt.Fprintf(log, "  %s %s (expect %s): %d payments, %d of %d acknowledged lost, %d lost, %d phantom, %d duplicate effects, %d duplicates on the wire, %d left pending in the outbox. %s %s\n",
			r.verdict(), r.Scenario, r.Expect, r.Payments, r.AckLost, r.Acknowledged, r.Lost, r.Phantom, r.DupEffects, r.DupOnWire, r.PendingOutbox, r.Note, r.Error)
	}
	run := func(i int) {
		sc := scenarios[i]
		mu.Lock()
		fmt.Fprintf(log, "[%d/%d] %s: %s\n", i+1, len(scenarios), sc.Name, sc.Description)
		mu.Unlock()
		report(i, runOne(ctx, target, sc, s, uint64(i+1)))
	}
	alone := func(sc Scenario) bool { return target.Shared() || sc.stops != "" }
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, sc := range scenarios {
		if alone(sc) || ctx.Err() != nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			run(i)
		}()
	}
	wg.Wait()
	for i, sc := range scenarios {
		if alone(sc) && ctx.Err() == nil {
			run(i)
		}
	}
	for i := range results {
		if results[i].Scenario == "" {
			results[i] = Result{Scenario: scenarios[i].Name, Mode: scenarios[i].mode(), Expect: scenarios[i].expect, Error: "not run"}
		}
	}
	return results
}

func runOne(ctx context.Context, target Target, sc Scenario, s Sizes, seed uint64) (r Result) {
	r = Result{Scenario: sc.Name, Mode: sc.mode(), Expect: sc.expect}
	if sc.sizes != nil {
		s = sc.sizes(s)
	}
	fail := func(err error) Result {
		r.Error = err.Error()
		r.Pass = false
		return r
	}
	d, err := target.Deploy(ctx, sc)
	if errors.Is(err, ErrSkip) {
		r.Skipped = strings.TrimPrefix(err.Error(), ErrSkip.Error()+": ")
		return r
	}
	if err != nil {
		return fail(err)
	}
	defer d.Stop()
	if d.RelayMode == RelayWAL && len(d.Relays) > 0 {
		r.Mode += ", wal relay"
	}
	// A shared deployment has a history: the scenario is judged on what it
	// adds to the settled state it starts from.
	var base reconcile.Report
	if target.Shared() {
		if base, err = reconcile.Settle(ctx, d.Src, s.Settle, 2*time.Second); err != nil {
			return fail(fmt.Errorf("settling before the scenario: %w", err))
		}
	}

	tl := d.startTimeline(ctx)
	defer tl.stop()
	d.zombie = 0 // a shared deployment still holds the last scenario's count
	// The load runs while the scenario injects its fault.
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	keys, err := d.Keys(ctx)
	if err != nil {
		return fail(err)
	}
	loadDone := make(chan loadgen.Report, 1)
	acknowledged := loadgen.NewAcknowledged(nil)
	go func() {
		rep, _ := loadgen.Run(loadCtx, loadgen.Config{
			BaseURL: d.APIURL, Rate: s.Rate, Count: s.Payments, Seed: seed, Timeout: 30 * time.Second, Keys: keys,
			OnCreated: acknowledged.Add,
		})
		loadDone <- rep
	}()
	faultCtx, cancelFault := context.WithTimeout(ctx, s.Settle)
	note, recovery, faultErr := sc.during(faultCtx, d, s)
	cancelFault()
	load := <-loadDone
	r.StatusCode = load.StatusCode
	r.Note, r.Recovery, r.Zombie = note, recovery, d.zombie
	disarmCtx, cancelDisarm := context.WithTimeout(ctx, time.Minute)
	disarmErr := d.disarm(disarmCtx)
	cancelDisarm()
	d.markDisarmed()

	rep, err := reconcile.Settle(ctx, d.Src, s.Settle, 4*time.Second)
	r.Timeline = tl.stop()
	if err != nil {
		return fail(err)
	}
	// Every payment the API acknowledged is in the orders database: a
	// failover must not take back a 201.
	ids := acknowledged.IDs()
	missing, err := loadgen.Missing(ctx, d.Src.OrdersURL, ids)
	if err != nil {
		return fail(err)
	}
	r.Acknowledged, r.AckLost = len(ids), len(missing)
	// On a shared deployment the counts are the scenario's additions, and
	// the outbox's pending rows those it inserted and left pending: a row
	// already pending before is the history's (Report.Since), and shows
	// among the violations the deployment already had.
	if target.Shared() {
		if v := base.Violations(); len(v) > 0 {
			r.Note += fmt.Sprintf("; the deployment already showed %d violations before (not counted: %s)", len(v), strings.Join(v, ", "))
		}
		rep = rep.Since(base)
	}
	r.judge(rep)
	if n := load.StatusCode["503"]; n > 0 {
		r.Note += fmt.Sprintf("; the API answered 503 %d times", n)
	}
	// Whatever the fault, the API answers with a success, a 4xx, or a clean
	// 503 — never a 500.
	if n := load.StatusCode["500"]; n > 0 {
		r.Pass = false
		r.Error = strings.TrimSpace(r.Error + fmt.Sprintf(" %d responses were 500", n))
	}
	if err := errors.Join(faultErr, disarmErr); err != nil {
		r.Error = strings.TrimSpace(r.Error + " " + err.Error())
		r.Pass = false
	}
	return r
}

// Table renders results as the report table.
func Table(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tmode\tpayments\tack lost\tlost\tphantom\tdup on wire\tdup effects\tout of order\tpending outbox\trecovery\texpected\tverdict")
	for _, r := range results {
		rec := "-"
		if r.Recovery > 0 {
			rec = r.Recovery.Round(10 * time.Millisecond).String()
		}
		figures := fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d", r.Payments, r.AckLost, r.Lost, r.Phantom, r.DupOnWire, r.DupEffects, r.OutOfOrder, r.PendingOutbox)
		if r.Skipped != "" {
			figures = "-\t-\t-\t-\t-\t-\t-\t-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Mode, figures, rec, r.Expect, r.verdict())
	}
	tw.Flush()
	for _, r := range results {
		if r.Note != "" || r.Error != "" || r.Skipped != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Scenario, strings.TrimSpace(r.Skipped+" "+r.Note+" "+r.Error))
		}
	}
}
