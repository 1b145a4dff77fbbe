package bench

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylab/paylab/pkg/outbox"
)

// The targets (ratios from one run). A miss is reported, never hidden, and
// does not fail the run.
const (
	targetCapture    = 0.85 // S1/B1 at every concurrency
	targetDrain      = 0.5  // S2 (1 relay)/B2
	targetRelays     = 1.0  // S2 3 relays / 1 relay: no slower
	targetStatements = 2.0  // per batch
	targetConsume    = 0.5  // S3/B3
	targetGrowth     = 0.10 // S5: what history may cost
	targetWrite      = 0.9  // C1 notify-after-commit / insert-only
	targetWatermill  = 1.0  // C1 notify-after-commit / watermill
	targetDebezium   = 1.0  // P1 paylab / Debezium below a million events
	targetPollM      = 1.0  // P1 polling relay / Debezium at a million and more
	targetWALM       = 2.5  // P1 WAL relay / Debezium at a million and more
	targetWALCPU     = 12.0 // P1 WAL relay's own CPU per event, µs, at every size
)

// Latency targets of S4 (p99 of commit → applied): with LISTEN/NOTIFY, by
// S4's load as a percentage of S1's best rate; polling only, at any load.
var (
	targetNotify  = map[int]time.Duration{25: 50 * time.Millisecond, 50: 150 * time.Millisecond}
	targetPolling = outbox.DefaultPollInterval + 50*time.Millisecond
)

// rows builds the table from the stages.
func rows(st Stages, s Sizes) []Row {
	var out []Row
	for i, b := range st.B1 {
		out = append(out, Row{Stage: "B1", What: fmt.Sprintf("raw capture SQL (pgx pool), concurrency %d", b.Concurrency),
			Figure: rate(b.PerSecond, "tx/s") + roundSpread(b), P50: ptr(b.Latency.P50), P99: ptr(b.Latency.P99), Max: ptr(b.Latency.Max)})
		var floor *CaptureResult
		if i < len(st.B1HTTP) {
			floor = &st.B1HTTP[i]
			out = append(out, Row{Stage: "B1", What: fmt.Sprintf("the same SQL behind a bare net/http handler, concurrency %d", floor.Concurrency),
				Figure: rate(floor.PerSecond, "req/s") + roundSpread(*floor), P50: ptr(floor.Latency.P50), P99: ptr(floor.Latency.P99), Max: ptr(floor.Latency.Max),
				Baseline: fmt.Sprintf("B1 c=%d", b.Concurrency), Ratio: ratio(floor.PerSecond, b.PerSecond)})
		}
		if i >= len(st.S1) {
			continue
		}
		h := st.S1[i]
		row := Row{Stage: "S1", What: fmt.Sprintf("POST /v1/payments (orders API), concurrency %d", h.Concurrency),
			Figure: rate(h.PerSecond, "req/s") + roundSpread(h), P50: ptr(h.Latency.P50), P99: ptr(h.Latency.P99), Max: ptr(h.Latency.Max),
			Baseline: fmt.Sprintf("B1 c=%d", b.Concurrency), Ratio: ratio(h.PerSecond, b.PerSecond),
			Target: fmt.Sprintf("≥ %.2f", targetCapture)}
		row.Verdict = verdict(row.Ratio != nil && *row.Ratio >= targetCapture)
		out = append(out, row)
		if floor != nil {
			out = append(out, Row{Stage: "S1", What: fmt.Sprintf("the API against the bare handler, concurrency %d", h.Concurrency), Figure: "-",
				Baseline: fmt.Sprintf("B1 HTTP c=%d", floor.Concurrency), Ratio: ratio(h.PerSecond, floor.PerSecond)})
		}
	}
	out = append(out, writeRows(st.C1)...)
	out = append(out, Row{Stage: "B2", What: "raw produce (relay's producer settings and messages)", Figure: rate(st.B2.PerSecond, "events/s")})
	var one DrainResult
	for _, d := range st.S2 {
		row := Row{Stage: "S2", What: fmt.Sprintf("relay drain of %d events, %s", d.Events, relaysN(d.Relays)),
			Figure: rate(d.PerSecond, "events/s")}
		if d.Relays == 1 {
			one = d
			row.Baseline, row.Ratio, row.Target = "B2", ratio(d.PerSecond, st.B2.PerSecond), fmt.Sprintf("≥ %.2f", targetDrain)
			row.Verdict = verdict(row.Ratio != nil && *row.Ratio >= targetDrain)
		} else if one.Relays == 1 {
			row.Baseline, row.Ratio, row.Target = "S2 1 relay", ratio(d.PerSecond, one.PerSecond), "≥ 1.00 (no slower)"
			row.Verdict = verdict(row.Ratio != nil && *row.Ratio >= targetRelays)
		}
		out = append(out, row)
	}
	for _, d := range st.S2 {
		c := d.Statements
		out = append(out, Row{Stage: "S2", What: "PostgreSQL statements, " + relaysN(d.Relays),
			Figure: fmt.Sprintf("%.2f per batch (%.2f with idle polls and gauges), %.4f per event", c.PerBatch, c.PerBatchAll, c.PerEvent),
			Target: fmt.Sprintf("≤ %.0f per batch", targetStatements), Verdict: verdict(c.Batches > 0 && c.PerBatch <= targetStatements)})
	}
	for _, d := range st.S2 {
		if d.CPU != nil {
			out = append(out, Row{Stage: "S2", What: "CPU per event, " + relaysN(d.Relays), Figure: cpuFigure(d.CPU, "relays")})
		}
	}
	out = append(out, Row{Stage: "B3", What: "raw consumer group", Figure: rate(st.B3.PerSecond, "events/s")})
	s3 := Row{Stage: "S3", What: "ledger through the inbox", Figure: rate(st.S3.PerSecond, "events/s"),
		Baseline: "B3", Ratio: ratio(st.S3.PerSecond, st.B3.PerSecond), Target: fmt.Sprintf("≥ %.2f", targetConsume)}
	s3.Verdict = verdict(s3.Ratio != nil && *s3.Ratio >= targetConsume)
	out = append(out, s3)
	for _, v := range st.S3Variants {
		out = append(out, Row{Stage: "S3", What: "  " + v.Name, Figure: rate(v.PerSecond, "events/s"),
			Baseline: "S3", Ratio: ratio(v.PerSecond, st.S3.PerSecond)})
	}
	for _, r := range st.S4 {
		out = append(out, e2eRow("S4", fmt.Sprintf("commit → ledger applied at %d %% of S1, %s", r.Percent, r.Mode), r))
		p := r.Published
		out = append(out, Row{Stage: "S4", What: "  of which commit → published (relay), " + r.Mode, Figure: "-",
			P50: ptr(p.P50), P99: ptr(p.P99), Max: ptr(p.Max)})
		if c := r.CPU; c != nil {
			out = append(out, Row{Stage: "S4", What: fmt.Sprintf("  CPU per payment at %d %%, %s", r.Percent, r.Mode),
				Figure: fmt.Sprintf("%.0f µs: API %.0f, ledger %.0f, relay and load generator %.0f, broker %.0f, PostgreSQL %.0f (API's backends %.0f, relay's %.0f, ledger's %.0f, the rest %.0f); %.2f of %d cores busy",
					c.Total(), c.API, c.Ledger, c.Harness, c.Broker, c.PostgreSQL, c.OrdersDB, c.RelayDB, c.LedgerDB,
					c.PostgreSQL-c.OrdersDB-c.RelayDB-c.LedgerDB, c.Busy, runtime.NumCPU())})
		}
	}
	out = append(out, peerRows(st.P1)...)
	if st.S5.History > 0 {
		g := st.S5
		base, baseName := one.PerSecond, "S2 1 relay"
		if m, ok := g.S2WithoutHistory(); ok {
			what, spread := drainRounds(g.S2Base)
			out = append(out, Row{Stage: "S5", What: "S2 without history, 1 relay" + what, Figure: rate(m.PerSecond, "events/s") + spread})
			base, baseName = m.PerSecond, "without history"
		}
		what, spread := drainRounds(g.S2Runs)
		row := Row{Stage: "S5", What: fmt.Sprintf("S2 with %d rows of history, 1 relay", g.History) + what,
			Figure: rate(g.S2.PerSecond, "events/s") + spread, Baseline: baseName, Ratio: ratio(g.S2.PerSecond, base),
			Target: fmt.Sprintf("≥ %.2f", 1-targetGrowth)}
		row.Verdict = verdict(row.Ratio != nil && *row.Ratio >= 1-targetGrowth)
		out = append(out, row)
		out = append(out, growthRows(g, st.S4)...)
	}
	return out
}

// drainRate and captureRate are a drain's and a capture's rate, for median
// and medianSpread.
func drainRate(d DrainResult) float64     { return d.PerSecond }
func captureRate(c CaptureResult) float64 { return c.PerSecond }

// drainRounds says, of several drains, that a row is their median, and gives
// the slowest and fastest after its rate.
func drainRounds(runs []DrainResult) (what, spread string) {
	if len(runs) < 2 {
		return "", ""
	}
	_, lo, hi := medianSpread(runs, drainRate)
	return fmt.Sprintf(", median of %d", len(runs)), fmt.Sprintf(" (%.0f–%.0f)", lo, hi)
}

// growthRows are S5's S4 rows: per mode, the runs on the history pooled
// against the runs without it that alternated with them, pooled (a report
// without those compares its runs with S4's). LISTEN/NOTIFY is judged by
// p99. Polling only is judged by p50: its p99 is set by whether the relay,
// once in the run, found nothing and slept a whole poll interval (a
// moment's gap in the stream), which history does not decide.
func growthRows(g Growth, s4 []E2EResult) []Row {
	var out []Row
	for _, with := range g.Pooled {
		stat, statName := growthStat(with.Mode)
		name := "S4 " + with.Mode + " " + statName
		var without *E2EResult
		if i := slices.IndexFunc(g.BasePooled, with.sameLoad); i >= 0 {
			without = &g.BasePooled[i]
			row := e2eRow("S5", fmt.Sprintf("S4 without history at %d %% of S1, %s", with.Percent, with.Mode)+pooledRuns(g.Base, with, stat, statName), *without)
			row.Target, row.Verdict = "", "" // S4's rows carry S4's targets
			out = append(out, row)
			name = "without history " + statName
		} else if i := slices.IndexFunc(s4, with.sameLoad); i >= 0 {
			without = &s4[i]
		}
		row := e2eRow("S5", fmt.Sprintf("S4 with history at %d %% of S1, %s", with.Percent, with.Mode)+pooledRuns(g.S4, with, stat, statName), with)
		row.Baseline, row.Ratio, row.Target = name, nil, fmt.Sprintf("%s ≤ %.2f", statName, 1+targetGrowth)
		if without != nil {
			row.Ratio = ratio(float64(stat(with)), float64(stat(*without)))
		}
		row.Verdict = verdict(row.Ratio != nil && *row.Ratio <= 1+targetGrowth)
		out = append(out, row)
	}
	return out
}

// sameLoad reports whether r ran in m's mode and at m's load.
func (m E2EResult) sameLoad(r E2EResult) bool { return r.Mode == m.Mode && r.Percent == m.Percent }

// growthStat is the latency S5 judges a mode by, and its name.
func growthStat(mode string) (func(E2EResult) Millis, string) {
	if mode == modePolling {
		return func(r E2EResult) Millis { return r.Applied.P50 }, "p50"
	}
	return func(r E2EResult) Millis { return r.Applied.P99 }, "p99"
}

// e2eModes are the runs' modes and loads, in the order they first ran.
func e2eModes(runs []E2EResult) []E2EResult {
	var modes []E2EResult
	for _, r := range runs {
		if !slices.ContainsFunc(modes, r.sameLoad) {
			modes = append(modes, E2EResult{Mode: r.Mode, Percent: r.Percent})
		}
	}
	return modes
}

// e2eRuns are the runs in m's mode and load.
func e2eRuns(runs []E2EResult, m E2EResult) []E2EResult {
	var out []E2EResult
	for _, r := range runs {
		if m.sameLoad(r) {
			out = append(out, r)
		}
	}
	return out
}

// pooledRuns says, when there are several runs of m, that a row pools
// them, and how far the rounds' own stat spread.
func pooledRuns(runs []E2EResult, m E2EResult, stat func(E2EResult) Millis, statName string) string {
	rs := e2eRuns(runs, m)
	if len(rs) < 2 {
		return ""
	}
	lo, hi := stat(rs[0]), stat(rs[0])
	for _, r := range rs {
		lo, hi = min(lo, stat(r)), max(hi, stat(r))
	}
	return fmt.Sprintf(", %d rounds pooled (each round's %s %s–%s)", len(rs), statName, fmtMillis(&lo), fmtMillis(&hi))
}

// writeRows are C1's rows: each contender at each concurrency, against the
// insert-only baseline, and paylab's way against Watermill's.
func writeRows(c1 []WriteResult) []Row {
	base := map[int]float64{}
	for _, w := range c1 {
		if w.Contender == writeInsertOnly {
			base[w.Concurrency] = w.PerSecond
		}
	}
	paylab := map[int]float64{}
	var out []Row
	for _, w := range c1 {
		row := Row{Stage: "C1", What: fmt.Sprintf("UPDATE order + 1 event, %s, concurrency %d", w.Contender, w.Concurrency),
			Figure: rate(w.PerSecond, "tx/s"), P50: ptr(w.Latency.P50), P99: ptr(w.Latency.P99), Max: ptr(w.Latency.Max)}
		row.Figure += roundSpread(w.CaptureResult)
		switch w.Contender {
		case writeNotifyInTx, writeWatermill:
			row.Baseline, row.Ratio = "insert-only", ratio(w.PerSecond, base[w.Concurrency])
		case writeAfterCommit:
			paylab[w.Concurrency] = w.PerSecond
			row.Baseline, row.Ratio, row.Target = "insert-only", ratio(w.PerSecond, base[w.Concurrency]), fmt.Sprintf("≥ %.2f", targetWrite)
			row.Verdict = verdict(row.Ratio != nil && *row.Ratio >= targetWrite)
		}
		out = append(out, row)
		if w.Contender == writeWatermill {
			r := Row{Stage: "C1", What: fmt.Sprintf("  paylab (notify-after-commit) vs Watermill, concurrency %d", w.Concurrency),
				Figure: "-", Baseline: "watermill", Ratio: ratio(paylab[w.Concurrency], w.PerSecond), Target: fmt.Sprintf("≥ %.2f", targetWatermill)}
			r.Verdict = verdict(r.Ratio != nil && *r.Ratio >= targetWatermill)
			out = append(out, r)
		}
	}
	return out
}

// e2eRow is an S4 row, judged by S4's targets.
func e2eRow(stage, what string, r E2EResult) Row {
	a := r.Applied
	row := Row{Stage: stage, What: what, Figure: fmt.Sprintf("%d payments at %d/s", r.Payments, r.Rate),
		P50: ptr(a.P50), P99: ptr(a.P99), Max: ptr(a.Max)}
	switch {
	case r.Mode == modeNotify:
		if t, ok := targetNotify[r.Percent]; ok {
			row.Target = fmt.Sprintf("p99 ≤ %s", t)
			row.Verdict = verdict(float64(a.P99) <= float64(ms(t)))
		}
	default:
		row.Target = fmt.Sprintf("p99 ≤ %s", targetPolling)
		row.Verdict = verdict(float64(a.P99) <= float64(ms(targetPolling)))
	}
	return row
}

// notes say how the figures were measured, with this run's settings.
func notes(st Stages, s Sizes) []string {
	n := []string{
		fmt.Sprintf("B1/S1: closed loop, N workers back to back for %s after %s of warm-up (longer until %d have completed); B1's pgx pool, its HTTP floor's pool and S1's DATABASE_MAX_CONNS all equal N; latency per transaction / request. The HTTP floor serves B1's statements from a bare net/http handler in the bench's process (decode, capture, 201 with the order; no router, authentication, validation, spans or metrics) to the client S1 uses: what it costs beyond B1 is HTTP's, and bounds any HTTP API's S1 / B1. B1, the floor and S1 alternate within each of %d round(s), each on a fresh database after a CHECKPOINT; the median round is reported, the slowest and fastest in brackets.", s.CaptureDuration, s.Warmup, s.MinOps, s.Rounds),
		fmt.Sprintf("C1: one UPDATE of an order and its one event per transaction, closed loop as B1, a fresh orders database (%d orders, each worker its own, vacuumed, then a CHECKPOINT) per contender and round, a LISTEN connection open; paylab's contenders send the transaction as the orders service does (BEGIN with the UPDATE, the event with COMMIT: two round trips), Watermill's publisher one statement at a time (four); %d round(s), contenders alternated, median reported with the slowest and fastest round in brackets. insert-only = a plain INSERT of the row (the baseline); notify-in-tx = outbox.Enqueue's default, a NOTIFY in the transaction; notify-after-commit = Config.NotifyAfterCommit and a Notifier, as the orders service runs.", writeOrders, s.Rounds),
		"B2: the relay's producer settings (idempotent, acks=all, one request in flight) and its messages (the S2 backlog, encoded by Event.ProducerMessage), fed continuously; first send to last ack.",
		"S2: relays in this process with the default outbox.Config, one pool and producer each; start to the last event recorded dispatched.",
		"statements: counted by a pgx tracer on the relays' connections (pg_stat_statements is not needed); per batch = all but the gauges, retention, LISTEN and claims that leased nothing, divided by the claims that leased events.",
	}
	for _, d := range st.S2 {
		n = append(n, fmt.Sprintf("  %s: %d statements %v for %d batches; pg_stat_database counted %d transactions meanwhile (autovacuum's and 2 reads of this run included).",
			relaysN(d.Relays), d.Statements.Total, d.Statements.ByName, d.Statements.Batches, d.Statements.ServerTransactions))
	}
	n = append(n,
		"B3: a consumer group marking offsets as the inbox does, nothing else; S3: the ledger binary (inbox on, defaults) on the same topic, for at most "+s.ConsumeWindow.String()+" of its run (longer until "+strconv.Itoa(s.MinOps)+" are processed), from its journal's created_at. Its variants change one thing each: INBOX_ENABLED=false, INBOX_BATCH_SIZE=1, or a copy of the topic where every fifth message repeats an earlier event (the rate counts events applied once).",
		fmt.Sprintf("S4: the orders API and ledger binaries and one relay; payments at 25%% and at 50%% of S1's best rate (open model, paylab load) for %s each, after %s at the same rate that is not measured (the relay is started for each run), the pipeline having run once at %d %% unmeasured first; commit → applied = ledger journal entry created_at − outbox created_at, both on the database clock; polling only runs the relay with outbox.RelayConfig.PollOnly, on its %s poll.", s.E2EDuration, s.Warmup, e2ePercents[0], outbox.DefaultPollInterval),
	)
	for _, r := range st.S4 {
		n = append(n, overload("S4", r, st.S3.PerSecond)...)
	}
	for _, r := range slices.Concat(st.S5.Base, st.S5.S4) {
		n = append(n, overload("S5", r, st.S3.PerSecond)...)
	}
	if len(st.P1) > 0 {
		n = append(n, fmt.Sprintf("P1 (--peers): each contender drains a backlog written in %d equal transactions the way it is meant to be written (paylab: INSERT into the outbox; Debezium: INSERT into its outbox table; Watermill: its transactional SQL publisher), on a fresh database and 6-partition topic of the same servers, checkpointed before the clock starts, contenders alternated, median of %d rounds with the slowest and fastest in brackets. paylab-poll and paylab-wal: the orders binary's relay command as a user starts it, its defaults with RELAY_MODE=poll or wal (and in WAL mode RELAY_SLOT naming a slot made before the backlog); paylab-poll-delete: paylab-poll with RELAY_DELETE_DISPATCHED=true (published rows deleted, no history kept: a setting's trade-off, without a target); for the three, the clock runs from process start to the last event in the topic; Debezium %s (internal/lab/peers/debezium/pom.xml): embedded engine, pgoutput, outbox EventRouter, KafkaProducer acks=all idempotent, offsets committed after each acknowledged batch, clock from engine start (JVM launch excluded); Watermill: forwarder, SQL subscriber → Kafka publisher, clock until the topic holds every record. CPU: PostgreSQL's and the broker's from /proc over the drain, the contender's its own.",
			peerTransactions, st.P1[0].Rounds, "3.6.1.Final"))
	}
	if st.S5.History > 0 {
		n = append(n, fmt.Sprintf("S5: %d dispatched outbox rows and %d processed inbox rows (with their orders' sequences), seeded, vacuumed and checkpointed in %.0fs, before S2 and S4 run again. S2 drains a backlog of %d events with one relay on the history, alternated with the same on a fresh database, %d round(s) each, median of each.",
			st.S5.History, st.S5.History, st.S5.SeedSeconds, s.Backlog, len(st.S5.S2Runs)))
		if len(st.S5.Base) > 0 {
			n = append(n, fmt.Sprintf("  S5's S4: %d round(s) at %d %% of S1 (at 50 %% the pipeline keeps both cores busy and single runs collapse into queues of seconds, with or without history), each on the history and on a pipeline of fresh databases (the API and ledger binaries started once for each, and each pipeline run once unmeasured first), alternated; per mode each side's rounds are pooled, their events' latencies taken as one distribution (a stall that sets one round's p99 is one part in the rounds of the pooled tail), and history is judged by the ratio of the two sides' pooled latencies: of p99 with LISTEN/NOTIFY, of p50 polling only, whose p99 is set by whether the relay, once in the run, found the outbox empty and slept a whole poll interval.", st.S5.Rounds, st.S5.Base[0].Percent))
		}
	}
	return n
}

// overload notes an S4 run whose rate the system could not sustain on this
// machine: its latencies then measure a queue that grows for as long as the
// load lasts, not a steady state.
func overload(stage string, r E2EResult, ledgerRate float64) []string {
	var why []string
	if float64(r.Rate) > ledgerRate && ledgerRate > 0 {
		why = append(why, fmt.Sprintf("%d/s is more than the ledger alone processes (S3: %.0f/s)", r.Rate, ledgerRate))
	}
	if r.API.N > r.Payments {
		why = append(why, fmt.Sprintf("the API captured %d of %d payments (%v; p50 %s)", r.Payments, r.API.N, r.StatusCodes, fmtMillis(&r.API.P50)))
	}
	if len(why) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("  %s %s is overloaded: %s — its latencies measure a queue growing while the load lasts, not a steady state.",
		stage, r.Mode, strings.Join(why, "; "))}
}

// cpuFigure is a drain's CPU per event, the contender called who.
func cpuFigure(c *CPU, who string) string {
	return fmt.Sprintf("PostgreSQL %.1f µs, broker %.1f µs, %s %.1f µs", c.PostgreSQL, c.Broker, who, c.Contender)
}

// peerRows are P1's rows: each contender's drain of each backlog, and
// paylab's relays against Debezium (with the target) and Watermill.
func peerRows(p1 []PeerDrain) []Row {
	var out []Row
	by := map[int]map[string]DrainResult{}
	for _, d := range p1 {
		if by[d.Events] == nil {
			by[d.Events] = map[string]DrainResult{}
		}
		by[d.Events][d.Contender] = d.DrainResult
		row := Row{Stage: "P1", What: fmt.Sprintf("drain of %d events (%d transactions), %s", d.Events, peerTransactionsOf(d.Events), d.Contender),
			Figure: rate(d.PerSecond, "events/s")}
		if d.Rounds > 1 {
			row.What += fmt.Sprintf(", median of %d", d.Rounds)
			row.Figure += fmt.Sprintf(" (%.0f–%.0f)", d.MinPerSecond, d.MaxPerSecond)
		}
		out = append(out, row)
		if d.CPU != nil {
			cpu := Row{Stage: "P1", What: "  CPU per event, " + d.Contender, Figure: cpuFigure(d.CPU, d.Contender)}
			if d.Contender == drainWAL {
				cpu.Target = fmt.Sprintf("%s ≤ %.0f µs", d.Contender, targetWALCPU)
				cpu.Verdict = verdict(d.CPU.Contender <= targetWALCPU)
			}
			out = append(out, cpu)
		}
		if c := d.Statements; c.Batches > 0 {
			out = append(out, Row{Stage: "P1", What: "  PostgreSQL statements, " + d.Contender,
				Figure: fmt.Sprintf("%.2f per batch, %d batches", c.PerBatch, c.Batches)})
		}
	}
	for _, d := range p1 {
		if d.Contender != drainPoll && d.Contender != drainPollDel && d.Contender != drainWAL {
			continue
		}
		peers := by[d.Events]
		if dbz, ok := peers[drainDebezium]; ok {
			r := Row{Stage: "P1", What: fmt.Sprintf("  %s vs Debezium, %d events", d.Contender, d.Events), Figure: "-",
				Baseline: drainDebezium, Ratio: ratio(d.PerSecond, dbz.PerSecond)}
			if d.Contender != drainPollDel { // the deleting setting is a trade-off: no target
				target := targetDebezium
				switch {
				case d.Events < bigBacklog:
				case d.Contender == drainWAL:
					target = targetWALM
				default:
					target = targetPollM
				}
				r.Target = fmt.Sprintf("≥ %.2f", target)
				r.Verdict = verdict(r.Ratio != nil && *r.Ratio >= target)
			}
			out = append(out, r)
		}
		if wm, ok := peers[drainWatermill]; ok {
			out = append(out, Row{Stage: "P1", What: fmt.Sprintf("  %s vs Watermill, %d events", d.Contender, d.Events), Figure: "-",
				Baseline: drainWatermill, Ratio: ratio(d.PerSecond, wm.PerSecond)})
		}
	}
	return out
}

// peerTransactionsOf is how many transactions peerDrains writes n events in.
func peerTransactionsOf(n int) int {
	txs := min(peerTransactions, n)
	for n%txs != 0 {
		txs--
	}
	return txs
}

// roundSpread is the slowest and fastest rounds' rates of a median, when
// there were rounds.
func roundSpread(c CaptureResult) string {
	if c.Rounds < 2 {
		return ""
	}
	return fmt.Sprintf(" (%.0f–%.0f)", c.MinPerSecond, c.MaxPerSecond)
}
