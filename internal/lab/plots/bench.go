package plots

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/paylab/paylab/internal/lab/bench"
)

// Bench draws rep's charts next to its JSON report, base being the report's
// path without ".json": base-throughput (each stage's throughput against
// its raw baseline and the peers) and base-latency (S4's commit → Kafka and
// commit → ledger distributions), each as .svg and .png. A chart the report
// has no figures for (a run that ended early) is not drawn. It returns the
// files written.
func Bench(rep bench.Report, base string) ([]string, error) {
	var files []string
	var errs []error
	if panels := throughputPanels(rep.Stages); len(panels) > 0 {
		title := fmt.Sprintf("paylab bench (%s sizes): throughput against the raw baselines and the peers", rep.Sizes.Name)
		f, err := WriteBars(base+"-throughput", title, panels)
		files, errs = append(files, f...), append(errs, err)
	}
	if curves, runs := latencyCurves(rep.Stages.S4); len(curves) > 0 {
		title := fmt.Sprintf("paylab bench (%s sizes): S4 end to end, %s: latency by percentile", rep.Sizes.Name, runs)
		f, err := WritePercentiles(base+"-latency", title, curves)
		files, errs = append(files, f...), append(errs, err)
	}
	return files, errors.Join(errs...)
}

// throughputPanels are the throughput chart's panels: capture, the outbox
// write, the relay, the consumer.
func throughputPanels(st bench.Stages) []BarPanel {
	var capture []Bar
	for i, b := range st.B1 {
		capture = append(capture, Bar{Label: fmt.Sprintf("B1 capture SQL on a bare pgx pool, concurrency %d", b.Concurrency),
			Value: b.PerSecond, Figure: perSecond(b.PerSecond, "tx/s"), Kind: Baseline})
		if i < len(st.S1) {
			s := st.S1[i]
			capture = append(capture, Bar{Label: fmt.Sprintf("S1 POST /v1/payments through the orders API, concurrency %d", s.Concurrency),
				Value: s.PerSecond, Figure: perSecond(s.PerSecond, "req/s") + versus(s.PerSecond, b.PerSecond, "B1"), Kind: Paylab})
		}
	}

	var write []Bar
	base := map[int]float64{}
	for _, w := range st.C1 {
		if w.Contender == "insert-only" {
			base[w.Concurrency] = w.PerSecond
		}
	}
	for _, w := range st.C1 {
		b := Bar{Label: fmt.Sprintf("C1 %s, concurrency %d", w.Contender, w.Concurrency), Value: w.PerSecond,
			Figure: perSecond(w.PerSecond, "tx/s"), Kind: contender(w.Contender)}
		if b.Kind == Baseline {
			b.Label = fmt.Sprintf("C1 insert-only (a plain INSERT of the row), concurrency %d", w.Concurrency)
		} else {
			b.Figure += versus(w.PerSecond, base[w.Concurrency], "insert-only")
		}
		write = append(write, b)
	}

	var relay []Bar
	if st.B2.PerSecond > 0 {
		relay = append(relay, Bar{Label: "B2 raw produce (the relay's producer settings and messages)",
			Value: st.B2.PerSecond, Figure: perSecond(st.B2.PerSecond, "events/s"), Kind: Baseline})
	}
	var one float64
	for _, d := range st.S2 {
		b := Bar{Label: fmt.Sprintf("S2 relay drain of %s events, %s", thousands(float64(d.Events)), relays(d.Relays)), Value: d.PerSecond,
			Figure: perSecond(d.PerSecond, "events/s"), Kind: Paylab}
		if d.Relays == 1 {
			one = d.PerSecond
			b.Figure += versus(d.PerSecond, st.B2.PerSecond, "B2")
		} else {
			b.Figure += versus(d.PerSecond, one, "1 relay")
		}
		relay = append(relay, b)
	}
	if g := st.S5; g.S2.PerSecond > 0 {
		// S5's S2 is judged against the drains it alternated with on a fresh
		// database, not against S2's one drain at the run's start.
		base, baseName := one, "S2"
		if m, ok := g.S2WithoutHistory(); ok {
			base, baseName = m.PerSecond, "without history"
			relay = append(relay, Bar{Label: "S5 the same drain on a fresh database, 1 relay", Value: m.PerSecond,
				Figure: perSecond(m.PerSecond, "events/s"), Kind: Baseline})
		}
		relay = append(relay, Bar{Label: fmt.Sprintf("S5 the same drain over %s rows of history, 1 relay", thousands(float64(g.History))), Value: g.S2.PerSecond,
			Figure: perSecond(g.S2.PerSecond, "events/s") + versus(g.S2.PerSecond, base, baseName), Kind: Paylab})
	}
	debezium := map[int]float64{}
	for _, d := range st.P1 {
		if d.Contender == "debezium" {
			debezium[d.Events] = d.PerSecond
		}
	}
	for _, d := range st.P1 {
		b := Bar{Label: fmt.Sprintf("P1 %s, drain of %s events", d.Contender, thousands(float64(d.Events))), Value: d.PerSecond,
			Figure: perSecond(d.PerSecond, "events/s"), Kind: contender(d.Contender)}
		if b.Kind == Paylab {
			b.Figure += versus(d.PerSecond, debezium[d.Events], "Debezium")
		}
		relay = append(relay, b)
	}

	var consume []Bar
	if st.B3.PerSecond > 0 {
		consume = append(consume, Bar{Label: "B3 a bare consumer group, marking offsets", Value: st.B3.PerSecond,
			Figure: perSecond(st.B3.PerSecond, "events/s"), Kind: Baseline})
	}
	if st.S3.PerSecond > 0 {
		consume = append(consume, Bar{Label: "S3 the ledger through the inbox", Value: st.S3.PerSecond,
			Figure: perSecond(st.S3.PerSecond, "events/s") + versus(st.S3.PerSecond, st.B3.PerSecond, "B3"), Kind: Paylab})
	}

	var out []BarPanel
	for _, p := range []BarPanel{
		{Title: "Capture: the orders API against the same SQL on a bare pool", Unit: "transactions (requests) per second", Bars: capture},
		{Title: "Outbox write: UPDATE an order and write its event, one transaction", Unit: "transactions per second", Bars: write},
		{Title: "Relay: outbox to Kafka", Unit: "events per second", Bars: relay},
		{Title: "Consumer: Kafka to the ledger", Unit: "events per second", Bars: consume},
	} {
		if len(p.Bars) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// contender is the kind of a C1 or P1 contender, by its name.
func contender(name string) Kind {
	switch {
	case name == "insert-only":
		return Baseline
	case strings.HasPrefix(name, "paylab"), strings.HasPrefix(name, "notify-"):
		return Paylab
	}
	return Peer
}

// latencyCurves are S4's distributions at its highest load — commit →
// Kafka (blue) and commit → ledger (green), LISTEN/NOTIFY solid and polling
// only dashed — and its runs' sizes.
func latencyCurves(s4 []bench.E2EResult) ([]Curve, string) {
	var curves []Curve
	var runs []string
	top := 0
	for _, r := range s4 {
		top = max(top, r.Percent)
	}
	for _, r := range s4 {
		if r.Percent != top {
			continue
		}
		dashed := r.Mode != "LISTEN/NOTIFY"
		for _, hop := range []struct {
			name string
			l    bench.Latency
			c    Curve
		}{
			{"commit → Kafka", r.Published, Curve{Color: blue}},
			{"commit → ledger", r.Applied, Curve{Color: green}},
		} {
			c := hop.c
			c.Dashed = dashed
			c.Name = fmt.Sprintf("%s, %s (p50 %s, p99 %s)", hop.name, r.Mode, millis(hop.l.P50), millis(hop.l.P99))
			if hop.l.Missing > 0 {
				c.Name += fmt.Sprintf(", %d of %d never arrived", hop.l.Missing, hop.l.N)
			}
			for _, q := range hop.l.Quantiles {
				c.Points = append(c.Points, Quantile{Q: q.Q, Millis: float64(q.Millis)})
			}
			if len(c.Points) > 0 {
				curves = append(curves, c)
			}
		}
		runs = append(runs, fmt.Sprintf("%d payments at %d/s", r.Payments, r.Rate))
	}
	return curves, strings.Join(slices.Compact(runs), " and ") + " each"
}

// perSecond writes a throughput.
func perSecond(v float64, unit string) string {
	if v >= 100 {
		return thousands(v) + " " + unit
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// versus is " · 0.81× of", or nothing without a baseline.
func versus(v, base float64, of string) string {
	if base <= 0 || math.IsInf(base, 0) || math.IsNaN(v) {
		return ""
	}
	r := v / base
	if r < 0.1 {
		return fmt.Sprintf("  (%.3f× %s)", r, of)
	}
	return fmt.Sprintf("  (%.2f× %s)", r, of)
}

func millis(m bench.Millis) string {
	switch v := float64(m); {
	case math.IsInf(v, 1):
		return "never"
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

// relays is "1 relay" or "n relays".
func relays(n int) string {
	if n == 1 {
		return "1 relay"
	}
	return fmt.Sprintf("%d relays", n)
}
