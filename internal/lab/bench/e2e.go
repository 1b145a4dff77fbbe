package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/pkg/outbox"
)

// E2EResult is one S4 run: payments at a steady rate through the whole
// system, each timed from its capture to its journal entry in the ledger.
type E2EResult struct {
	Mode           string         `json:"mode"` // "LISTEN/NOTIFY" or "polling only"
	PollIntervalMs Millis         `json:"poll_interval_ms"`
	Percent        int            `json:"percent_of_s1"` // Rate as a percentage of S1's best
	Rate           int            `json:"rate_per_s"`    // the open model's target
	Sent           float64        `json:"sent_per_s"`    // what the load generator achieved
	Payments       int            `json:"payments"`      // captured (201)
	StatusCodes    map[string]int `json:"status_codes"`
	API            Latency        `json:"api"`                 // POST /v1/payments, as the client saw it
	Published      Latency        `json:"commit_to_published"` // outbox created_at → dispatched_at
	Applied        Latency        `json:"commit_to_applied"`   // outbox created_at → journal entry created_at
	Listens        int            `json:"listen_statements"`   // the relay's LISTENs: 1, or 0 polling only
	CPU            *PipelineCPU   `json:"cpu,omitempty"`       // from the load's start until the ledger caught up
	// published and applied are the samples Published and Applied
	// summarise (their missing ones counted there), for pooling runs.
	published, applied []time.Duration
}

// The modes of S4.
const (
	modeNotify  = "LISTEN/NOTIFY"
	modePolling = "polling only"
)

// pipeline is the whole system on databases and a topic of its own: the
// orders API and the ledger as child processes (default settings); S4 adds
// the relay.
type pipeline struct {
	ordersURL, ledgerURL, topic string
	api, ledger                 *service
	keys                        loadgen.Keys // an API key per merchant
}

// newPipeline starts the API and the ledger for stage, on fresh databases
// unless their URLs are given.
func (e *env) newPipeline(ctx context.Context, stage, ordersURL, ledgerURL string) (*pipeline, error) {
	p := &pipeline{ordersURL: ordersURL, ledgerURL: ledgerURL}
	var err error
	if p.ordersURL == "" {
		if p.ordersURL, err = e.database(ctx, stage, "orders"); err != nil {
			return nil, err
		}
	}
	if p.ledgerURL == "" {
		if p.ledgerURL, err = e.database(ctx, stage, "ledger"); err != nil {
			return nil, err
		}
	}
	if p.topic, err = e.topic(stage); err != nil {
		return nil, err
	}
	if p.keys, err = issueKeys(ctx, p.ordersURL); err != nil {
		return nil, err
	}
	if p.api, err = e.orders(ctx, stage+"-orders", p.ordersURL, p.topic, 0); err != nil {
		return nil, err
	}
	if p.ledger, err = e.ledger(ctx, stage+"-ledger", p.ledgerURL, p.topic); err != nil {
		p.api.stop()
		return nil, err
	}
	return p, nil
}

func (p *pipeline) stop() {
	p.api.stop()
	p.ledger.stop()
}

// endToEnd is one S4 run: one relay (default settings; pollingOnly sets
// outbox.RelayConfig.PollOnly), payments placed at rate per second for
// s.E2EDuration by the load generator (an open model), then a wait of at
// most s.Settle for the ledger to apply them all. Times come from the
// database clock, one server for both databases: capture = the outbox row's
// created_at (the capture transaction's start, just before its commit),
// applied = the journal entry's created_at (the ledger transaction's start,
// just before its commit). The errors of the two roughly cancel.
func (e *env) endToEnd(ctx context.Context, p *pipeline, pollingOnly bool, rate int, s Sizes, seed uint64) (E2EResult, error) {
	res := E2EResult{Mode: modeNotify, PollIntervalMs: ms(outbox.DefaultPollInterval), Rate: rate}
	if pollingOnly {
		res.Mode = modePolling
	}
	orders, err := pgx.Connect(ctx, p.ordersURL)
	if err != nil {
		return res, err
	}
	defer orders.Close(context.WithoutCancel(ctx))
	ledger, err := pgx.Connect(ctx, p.ledgerURL)
	if err != nil {
		return res, err
	}
	defer ledger.Close(context.WithoutCancel(ctx))
	tracer := newStatements()
	rs, err := e.startRelays(ctx, p.ordersURL, 1, pollingOnly, tracer)
	if err != nil {
		return res, err
	}
	load := func(count int, seed uint64) (loadgen.Report, error) {
		return loadgen.Run(ctx, loadgen.Config{BaseURL: p.api.URL, Rate: rate, Count: count, Seed: seed, Timeout: 10 * time.Second, Keys: p.keys})
	}
	// The warm-up: the relay was just started, and the broker, the ledger
	// and the API meet this run's rate (and, in a run's first mode, a new
	// topic's partitions) cold. s.Warmup of payments at the same rate go
	// first, not measured, as B1's and S1's first seconds are not; the
	// measured payments follow at once, so the pipeline does not idle in
	// between (a polling relay that found the outbox empty would sleep).
	firstEvent, err := maxID(ctx, orders, "outbox")
	var firstEntry int64
	if err == nil {
		firstEntry, err = maxID(ctx, ledger, "journal_entries")
	}
	lastEvent := firstEvent // the measured events are those after it
	if err == nil && s.Warmup > 0 {
		if _, err = load(max(1, int(float64(rate)*s.Warmup.Seconds())), seed|1<<32); err == nil {
			lastEvent, err = maxID(ctx, orders, "outbox")
		}
	}
	var rep loadgen.Report
	before := samplePipeline(p.api.Pid(), p.ledger.Pid())
	if err == nil {
		rep, err = load(max(1, int(float64(rate)*s.E2EDuration.Seconds())), seed)
	}
	if err == nil {
		err = waitApplied(ctx, orders, ledger, firstEvent, firstEntry, s.Settle)
	}
	after := samplePipeline(p.api.Pid(), p.ledger.Pid())
	var backends map[int]string
	if err == nil {
		backends, err = dbBackends(ctx, orders)
	}
	if stopErr := rs.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return res, err
	}
	res.Sent, res.Payments, res.StatusCodes = rep.Rate, int(rep.Created), rep.StatusCode
	res.CPU = before.perPayment(after, res.Payments, backends, orders.Config().Database, ledger.Config().Database)
	res.API = Latency{N: int(rep.Requests), P50: ms(rep.P50), P99: ms(rep.P99), Max: ms(rep.Max)}
	res.Listens = tracer.counts(0).ByName["LISTEN"]
	if pollingOnly != (res.Listens == 0) {
		return res, fmt.Errorf("the relay sent %d LISTEN statements", res.Listens)
	}
	if res.Payments == 0 {
		return res, fmt.Errorf("no payment was captured: %v %v", rep.StatusCode, rep.Errors)
	}
	var events int
	if res.published, res.applied, events, err = e2eLatencies(ctx, orders, ledger, lastEvent, firstEntry); err != nil {
		return res, err
	}
	res.Published = distribution(res.published, events-len(res.published))
	res.Applied = distribution(res.applied, events-len(res.applied))
	return res, nil
}

// maxID returns the newest id of table (0 while it is empty): the rows of
// what runs next are those after it.
func maxID(ctx context.Context, c *pgx.Conn, table string) (id int64, err error) {
	err = c.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&id)
	return id, err
}

// waitApplied waits until the ledger has an entry for every event written
// after lastEvent, or until settle passes (the latencies then count the
// missing ones as slower than any).
func waitApplied(ctx context.Context, orders, ledger *pgx.Conn, lastEvent, lastEntry int64, settle time.Duration) error {
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		var events, entries int
		if err := orders.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id > $1`, lastEvent).Scan(&events); err != nil {
			return err
		}
		if err := ledger.QueryRow(ctx, `SELECT count(*) FROM journal_entries WHERE id > $1`, lastEntry).Scan(&entries); err != nil {
			return err
		}
		if entries >= events {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// e2eLatencies joins the run's outbox rows with the ledger's entries: how
// long each event took to be published and to be applied, of how many
// events (the others were not, by the time of the join).
func e2eLatencies(ctx context.Context, orders, ledger *pgx.Conn, lastEvent, lastEntry int64) (published, applied []time.Duration, n int, err error) {
	type times struct {
		created    time.Time
		dispatched *time.Time
	}
	events := map[uuid.UUID]times{}
	rows, err := orders.Query(ctx, `SELECT event_id, created_at, dispatched_at FROM outbox WHERE id > $1`, lastEvent)
	if err != nil {
		return nil, nil, 0, err
	}
	for rows.Next() {
		var (
			id uuid.UUID
			t  times
		)
		if err := rows.Scan(&id, &t.created, &t.dispatched); err != nil {
			rows.Close()
			return nil, nil, 0, err
		}
		events[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, err
	}
	entries := map[uuid.UUID]time.Time{}
	rows, err = ledger.Query(ctx, `SELECT event_id, min(created_at) FROM journal_entries WHERE id > $1 GROUP BY event_id`, lastEntry)
	if err != nil {
		return nil, nil, 0, err
	}
	for rows.Next() {
		var (
			id uuid.UUID
			t  time.Time
		)
		if err := rows.Scan(&id, &t); err != nil {
			rows.Close()
			return nil, nil, 0, err
		}
		entries[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, err
	}
	if len(events) == 0 {
		return nil, nil, 0, errors.New("no event was written")
	}
	for id, t := range events {
		if t.dispatched != nil {
			published = append(published, t.dispatched.Sub(t.created))
		}
		if at, ok := entries[id]; ok {
			applied = append(applied, at.Sub(t.created))
		}
	}
	return published, applied, len(events), nil
}
