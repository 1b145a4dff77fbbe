package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSummarizeCountsMissingSamplesAsSlowest(t *testing.T) {
	t.Parallel()
	var samples []time.Duration
	for i := 1; i <= 100; i++ {
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		name          string
		missing       int
		p50, p99, max float64
	}{
		{name: "all completed", missing: 0, p50: 50, p99: 99, max: 100},
		{name: "one missing", missing: 1, p50: 51, p99: 100, max: math.Inf(1)},
		{name: "two missing", missing: 2, p50: 51, p99: math.Inf(1), max: math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := summarize(samples, tc.missing)
			if float64(l.P50) != tc.p50 || float64(l.P99) != tc.p99 || float64(l.Max) != tc.max || l.N != 100+tc.missing {
				t.Errorf("summarize = %+v, want p50 %v p99 %v max %v", l, tc.p50, tc.p99, tc.max)
			}
		})
	}
	if l := summarize(nil, 0); l.N != 0 || l.P99 != 0 {
		t.Errorf("summarize(nil) = %+v", l)
	}
}

func TestMillisJSONHoldsInfinity(t *testing.T) {
	t.Parallel()
	in := Latency{N: 3, Missing: 1, P50: 12.5, P99: Millis(math.Inf(1)), Max: Millis(math.Inf(1))}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"p99_ms":null`) || !strings.Contains(string(b), `"p50_ms":12.500`) {
		t.Errorf("JSON %s", b)
	}
	var out Latency
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(out, in) {
		t.Errorf("round trip: %+v, %v", out, err)
	}
}

func TestStatementNames(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- name: ClaimBatch :many\n-- Leases …\nWITH candidates AS (": "ClaimBatch",
		"  -- name: PendingStats :one\nSELECT":                         "PendingStats",
		`LISTEN "paylab_outbox"`:                                       "LISTEN",
		"select 1":                                                     "SELECT",
		"":                                                             "(empty)",
	} {
		if got := statementName(sql); got != want {
			t.Errorf("statementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

func TestStatementsPerBatchLeaveOutBackgroundAndIdleClaims(t *testing.T) {
	t.Parallel()
	s := newStatements()
	// The gauges' refreshes: three, two committed and one rolled back.
	s.byName = map[string]int{stmtClaim: 10, stmtComplete: 10, stmtClaimEmpty: 4, "PendingStats": 3, "StatsSettings": 3,
		"BEGIN": 3, "COMMIT": 2, "ROLLBACK": 1, "LISTEN": 1, "DeleteDispatched": 2}
	c := s.counts(5000)
	if c.Total != 39 || c.Batches != 10 || c.PerBatch != 2 || c.PerBatchAll != 3.9 || c.PerEvent != 0.0078 {
		t.Errorf("counts = %+v", c)
	}
	// A third statement per batch shows.
	s.byName["UPDATE"] = 10
	if c := s.counts(5000); c.PerBatch != 3 {
		t.Errorf("with an extra statement per batch: %+v", c)
	}
}

// The verdicts follow the targets, both ways.
func TestRowsJudgeTheTargets(t *testing.T) {
	t.Parallel()
	good := Stages{
		B1: []CaptureResult{{Concurrency: 8, PerSecond: 1000}, {Concurrency: 32, PerSecond: 1000}},
		S1: []CaptureResult{{Concurrency: 8, PerSecond: 850}, {Concurrency: 32, PerSecond: 900}},
		B2: ProduceResult{PerSecond: 10000},
		S2: []DrainResult{
			{Relays: 1, PerSecond: 6000, Statements: StatementCounts{Batches: 10, PerBatch: 2}},
			{Relays: 3, PerSecond: 6000, Statements: StatementCounts{Batches: 10, PerBatch: 2}},
		},
		B3: ConsumeResult{PerSecond: 1000}, S3: ConsumeResult{PerSecond: 600},
		S4: []E2EResult{
			{Percent: 25, Mode: modeNotify, Listens: 1, Applied: Latency{P99: 40}}, {Percent: 25, Mode: modePolling, Applied: Latency{P99: 1040}},
			{Percent: 50, Mode: modeNotify, Listens: 1, Applied: Latency{P99: 140}}, {Percent: 50, Mode: modePolling, Applied: Latency{P50: 100, P99: 1000}},
		},
		S5: Growth{History: 10, S2: DrainResult{Relays: 1, PerSecond: 5500},
			Pooled: []E2EResult{{Percent: 50, Mode: modeNotify, Applied: Latency{P99: 150}}, {Percent: 50, Mode: modePolling, Applied: Latency{P50: 105, P99: 1100}}}},
	}
	bad := good
	bad.S1 = []CaptureResult{{Concurrency: 8, PerSecond: 840}, {Concurrency: 32, PerSecond: 700}}
	bad.S2 = []DrainResult{
		{Relays: 1, PerSecond: 4000, Statements: StatementCounts{Batches: 10, PerBatch: 2.1}},
		{Relays: 3, PerSecond: 3900, Statements: StatementCounts{Batches: 10, PerBatch: 2}},
	}
	bad.S3 = ConsumeResult{PerSecond: 400}
	bad.S4 = []E2EResult{
		{Percent: 25, Mode: modeNotify, Listens: 1, Applied: Latency{P99: 51}}, {Percent: 25, Mode: modePolling, Applied: Latency{P99: 1051}},
		{Percent: 50, Mode: modeNotify, Listens: 1, Applied: Latency{P99: 151}}, {Percent: 50, Mode: modePolling, Applied: Latency{P50: 100, P99: Millis(math.Inf(1))}},
	}
	bad.S5.S2.PerSecond = 3500
	bad.S5.Pooled = []E2EResult{{Percent: 50, Mode: modeNotify, Applied: Latency{P99: 167}}, {Percent: 50, Mode: modePolling, Applied: Latency{P50: 120, P99: 1200}}}

	verdicts := func(st Stages) (pass, miss int, table string) {
		r := Report{Rows: rows(st, Full)}
		var b bytes.Buffer
		r.Table(&b)
		for _, row := range r.Rows {
			switch row.Verdict {
			case Pass:
				pass++
			case Miss:
				miss++
			}
		}
		return pass, miss, b.String()
	}
	// 2×S1, S2/B2, 3 relays, 2 statement rows, S3, 4×S4, S5 S2, 2×S5 S4.
	if pass, miss, table := verdicts(good); pass != 14 || miss != 0 {
		t.Errorf("good figures: %d pass, %d miss\n%s", pass, miss, table)
	}
	pass, miss, table := verdicts(bad)
	if pass != 1 || miss != 13 { // only the 3-relay statements still pass
		t.Errorf("bad figures: %d pass, %d miss\n%s", pass, miss, table)
	}
	if !strings.Contains(table, "never") {
		t.Errorf("an infinite p99 is not shown as never:\n%s", table)
	}
}

// S5 judges history by the rounds on it pooled against the rounds without
// it they alternated with, pooled: the latencies of all a side's events as
// one distribution, not the rounds' own p99s. By p99 with LISTEN/NOTIFY, by
// p50 polling only.
func TestGrowthRowsComparePooledRounds(t *testing.T) {
	t.Parallel()
	// run is a run of 100 events: n at each latency given, by pairs.
	run := func(mode string, counts ...int) E2EResult {
		r := E2EResult{Percent: 25, Mode: mode, Rate: 10, Payments: 100, API: Latency{N: 100}}
		for i := 0; i < len(counts); i += 2 {
			for range counts[i] {
				r.applied = append(r.applied, time.Duration(counts[i+1])*time.Millisecond)
			}
		}
		r.Applied = distribution(r.applied, 100-len(r.applied))
		return r
	}
	// On the history one round meets a stall: two events at 400 ms, that
	// round's p99. Pooled with the other round, they are 1 % of the tail.
	g := Growth{History: 10, Rounds: 2,
		S4: []E2EResult{
			run(modeNotify, 98, 20, 2, 400), run(modePolling, 100, 30),
			run(modeNotify, 100, 20), run(modePolling, 100, 40)},
		Base: []E2EResult{
			run(modeNotify, 100, 20), run(modePolling, 100, 30),
			run(modeNotify, 99, 19, 1, 20), run(modePolling, 100, 30)},
	}
	g.Pooled, g.BasePooled = pooled(g.S4), pooled(g.Base)
	if n := g.Pooled[0]; n.Payments != 200 || n.API.N != 200 || n.Applied.N != 200 || n.Applied.P99 != 20 || n.Applied.Max != 400 {
		t.Fatalf("pooled LISTEN/NOTIFY on the history: %+v", n)
	}
	// S4's own runs would give another verdict.
	s4 := []E2EResult{run(modeNotify, 100, 10), run(modePolling, 100, 20)}
	type judged struct {
		what, target, verdict string
		ratio                 float64
	}
	judge := func(rows []Row) []judged {
		var got []judged
		for _, r := range rows {
			j := judged{what: r.What, target: r.Target, verdict: r.Verdict}
			if r.Ratio != nil {
				j.ratio = math.Round(*r.Ratio*1000) / 1000
			}
			got = append(got, j)
		}
		return got
	}
	want := []judged{
		{"S4 without history at 25 % of S1, LISTEN/NOTIFY, 2 rounds pooled (each round's p99 19ms–20ms)", "", "", 0},
		{"S4 with history at 25 % of S1, LISTEN/NOTIFY, 2 rounds pooled (each round's p99 20ms–400ms)", "p99 ≤ 1.10", Pass, 1},
		{"S4 without history at 25 % of S1, polling only, 2 rounds pooled (each round's p50 30ms–30ms)", "", "", 0},
		{"S4 with history at 25 % of S1, polling only, 2 rounds pooled (each round's p50 30ms–40ms)", "p50 ≤ 1.10", Pass, 1},
	}
	if got := judge(growthRows(g, s4)); !reflect.DeepEqual(got, want) {
		t.Errorf("rows\n got %+v\nwant %+v", got, want)
	}
	// The stall in every round on the history is 2 % of its events: the
	// pooled p99. Polling, the slower events set the pooled p50 once they
	// are more than half of all.
	g.S4[2] = run(modeNotify, 98, 20, 2, 400)
	g.S4[1] = run(modePolling, 49, 30, 51, 40)
	g.Pooled = pooled(g.S4)
	rows := growthRows(g, s4)
	if rows[1].Verdict != Miss || *rows[1].Ratio != 20 || rows[3].Verdict != Miss || *rows[3].Ratio != 40.0/30 {
		t.Errorf("a stall in every round, most events slower polling: %+v", judge(rows))
	}
	// An event the ledger never applied is slower than all of them.
	g.Base[0] = run(modeNotify, 97, 20)
	g.Base[2] = run(modeNotify, 97, 20)
	if b := pooled(g.Base)[0].Applied; b.N != 200 || b.Missing != 6 || !math.IsInf(float64(b.P99), 1) {
		t.Errorf("pooled with 6 of 200 never applied: %+v", b)
	}
	// Without runs of its own, S5 compares with S4.
	g.Base, g.BasePooled = nil, nil
	rows = growthRows(g, s4)
	if len(rows) != 2 || rows[0].Baseline != "S4 LISTEN/NOTIFY p99" || *rows[0].Ratio != 400.0/10 || rows[1].Baseline != "S4 polling only p50" || *rows[1].Ratio != 40.0/20 {
		t.Errorf("against S4: %+v", judge(rows))
	}
}

// S5's S2 is judged by the median of its drains on the history against the
// median of the drains on a fresh database it alternated with, not against
// S2 of the run's start.
func TestGrowthS2AgainstTheDrainsItAlternatedWith(t *testing.T) {
	t.Parallel()
	d := func(rates ...float64) []DrainResult {
		var out []DrainResult
		for _, r := range rates {
			out = append(out, DrainResult{Relays: 1, Events: 100, PerSecond: r})
		}
		return out
	}
	st := Stages{S2: d(60000, 60000)}
	st.S2[1].Relays = 3
	st.S5 = Growth{History: 10, S2Runs: d(40000, 50000, 45000), S2Base: d(50000, 48000, 52000)}
	st.S5.S2 = median(st.S5.S2Runs, drainRate)
	s5 := func() []Row {
		var out []Row
		for _, r := range rows(st, Full) {
			if r.Stage == "S5" {
				out = append(out, r)
			}
		}
		return out
	}
	got := s5()
	if len(got) != 2 || got[0].What != "S2 without history, 1 relay, median of 3" || got[0].Figure != "50000 events/s (48000–52000)" ||
		got[1].What != "S2 with 10 rows of history, 1 relay, median of 3" || got[1].Figure != "45000 events/s (40000–50000)" ||
		got[1].Baseline != "without history" || *got[1].Ratio != 0.9 || got[1].Verdict != Pass {
		t.Fatalf("rows %+v", got)
	}
	st.S5.S2Runs[2].PerSecond = 44000
	st.S5.S2 = median(st.S5.S2Runs, drainRate)
	if got := s5(); *got[1].Ratio != 0.88 || got[1].Verdict != Miss {
		t.Errorf("44 000 against 50 000: %+v", got[1])
	}
}

// P1 holds paylab's relays to 1.0× Debezium below a million events; from a
// million on the polling relay to 1.0× and the WAL relay to 2.5×, and the
// WAL relay's own CPU to 12 µs per event.
func TestPeerRowsTargets(t *testing.T) {
	d := func(name string, n int, rate float64) PeerDrain {
		return PeerDrain{Contender: name, Rounds: 1, DrainResult: DrainResult{Events: n, PerSecond: rate}}
	}
	rows := peerRows([]PeerDrain{
		d(drainWAL, 100_000, 11_000), d(drainDebezium, 100_000, 10_000),
		d(drainPoll, 1_000_000, 30_000), d(drainWAL, 1_000_000, 74_000), d(drainDebezium, 1_000_000, 30_000),
	})
	cpu := peerRows([]PeerDrain{
		{Contender: drainWAL, Rounds: 1, DrainResult: DrainResult{Events: 100, PerSecond: 1, CPU: &CPU{Contender: 12}}},
		{Contender: drainWAL, Rounds: 1, DrainResult: DrainResult{Events: 200, PerSecond: 1, CPU: &CPU{Contender: 12.5}}},
	})
	if cpu[1].Verdict != Pass || cpu[3].Verdict != Miss {
		t.Errorf("WAL CPU rows %+v", cpu)
	}
	verdicts := map[string]string{}
	for _, r := range rows {
		if r.Target != "" {
			verdicts[r.What] = r.Target + " " + string(r.Verdict)
		}
	}
	want := map[string]string{
		"  paylab-wal vs Debezium, 100000 events":   "≥ 1.00 pass",
		"  paylab-wal vs Debezium, 1000000 events":  "≥ 2.50 miss",
		"  paylab-poll vs Debezium, 1000000 events": "≥ 1.00 pass",
	}
	for what, v := range want {
		if verdicts[what] != v {
			t.Errorf("%q: %q, want %q (rows %v)", what, verdicts[what], v, verdicts)
		}
	}
}

// Each contender goes first once in as many rounds as there are
// contenders, and the first error stops the rounds.
func TestAlternatedMovesWhoGoesFirst(t *testing.T) {
	t.Parallel()
	var order []int
	err := alternated(3, 3, func(_, c int) error { order = append(order, c); return nil })
	if want := []int{0, 1, 2, 1, 2, 0, 2, 0, 1}; err != nil || !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, %v; want %v", order, err, want)
	}
	calls := 0
	stop := errors.New("stop")
	if err := alternated(3, 2, func(round, _ int) error {
		calls++
		if round == 1 {
			return stop
		}
		return nil
	}); err != stop || calls != 3 {
		t.Errorf("%d calls, %v; want 3, stop", calls, err)
	}
	byName, err := alternatedByName(2, []string{"a", "b"}, func(round int, name string) (string, error) {
		return fmt.Sprintf("%s%d", name, round), nil
	})
	if want := map[string][]string{"a": {"a0", "a1"}, "b": {"b0", "b1"}}; err != nil || !reflect.DeepEqual(byName, want) {
		t.Errorf("by name %v, %v; want %v", byName, err, want)
	}
}
