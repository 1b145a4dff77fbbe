package chaosrun

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/chaos"
)

// Scenarios lists every scenario, in the order `all` runs them.
func Scenarios() []Scenario {
	outbox := options{mode: "outbox", inboxEnabled: true, relays: 2, leaseTTL: 10 * time.Second}
	with := func(o options, f func(*options)) options { f(&o); return o }
	return append([]Scenario{
		{
			Name:        "naive-crash-after-commit",
			Description: "naive mode: the API crashes after committing, before publishing",
			opts:        with(outbox, func(o *options) { o.mode = "naive" }),
			expect:      Lost,
			during:      crashAt(func(d *Deployment) *Process { return d.Orders }, "orders.after_commit_before_publish"),
		},
		{
			Name:        "naive-publish-first-rollback",
			Description: "naive publish-first: the transaction fails after the event was published",
			opts:        with(outbox, func(o *options) { o.mode = "naive-publish-first" }),
			expect:      Phantom,
			during:      failSometimes("orders.after_publish_before_commit", 0.05),
		},
		{
			Name:        "outbox-crash-after-commit",
			Description: "outbox: the API crashes after committing (same point as the naive run)",
			opts:        outbox,
			expect:      Clean,
			during:      crashAt(func(d *Deployment) *Process { return d.Orders }, "orders.after_commit_before_publish"),
		},
		{
			Name:        "outbox-fail-before-commit",
			Description: "outbox: the transaction fails before commit (same point as publish-first)",
			opts:        outbox,
			expect:      Clean,
			during:      failSometimes("orders.before_commit", 0.05),
		},
		{
			Name:        "relay-crash-after-publish",
			Description: "a relay crashes after publishing, before marking the rows dispatched (wal: before confirming them)",
			opts:        outbox,
			expect:      CleanWithWireDuplicates,
			minRelays:   1,
			during:      crashRelay("relay.after_publish_before_mark"),
		},
		{
			Name:        "relay-crash-after-publish-inbox-off",
			Description: "the same with INBOX_ENABLED=false: the duplicates reach the effects",
			opts:        with(outbox, func(o *options) { o.inboxEnabled = false }),
			expect:      DuplicateEffects,
			minRelays:   1,
			during:      crashRelay("relay.after_publish_before_mark"),
		},
		{
			Name:        "relay-killed-holding-leases",
			Description: "several relays; one is killed while it holds leased rows (wal: the reader, mid-stream)",
			opts:        with(outbox, func(o *options) { o.relays, o.leaseTTL = 3, 3*time.Second }),
			expect:      Clean,
			minRelays:   2,
			during:      killRelay,
		},
		{
			Name:        "ledger-crash-before-offset-commit",
			Description: "the ledger crashes after applying, before committing its Kafka offset",
			opts:        outbox,
			expect:      Clean,
			during:      crashAt(func(d *Deployment) *Process { return d.Ledger }, "ledger.after_apply_before_offset_commit"),
		},
		{
			Name:        "kafka-down",
			Description: "Kafka is stopped under load, then started again",
			opts:        outbox,
			expect:      Clean,
			stops:       kafkaServer,
			during:      kafkaDown,
		},
		{
			Name:        "kafka-leader-killed",
			Description: "3-broker cluster: the broker leading most partitions is SIGKILLed under load, restarted later",
			opts:        outbox,
			expect:      Clean,
			stops:       kafkaServer,
			brokers:     3,
			during:      kafkaLeaderKilled,
		},
		{
			Name:        "kafka-two-brokers-down",
			Description: "3-broker cluster: two brokers SIGKILLed, below min.insync.replicas: nothing acknowledged; then restarted",
			opts:        outbox,
			expect:      Clean,
			stops:       kafkaServer,
			brokers:     3,
			fullOnly:    true,
			during:      kafkaTwoBrokersDown,
		},
		{
			Name:        "relay-paused-past-lease",
			Description: "a relay frozen (SIGSTOP) on leased rows past the lease wakes up after another relay took them over",
			opts:        with(outbox, func(o *options) { o.leaseTTL = 3 * time.Second }),
			expect:      CleanWithWireDuplicates,
			minRelays:   2,
			pauses:      true,
			pollOnly:    true,
			during:      relayPausedPastLease,
		},
		{
			Name:        "relay-paused-past-lease-unfenced",
			Description: "the same with RELAY_LEASE_FENCING=false: the woken relay records rows the other relay holds",
			opts:        with(outbox, func(o *options) { o.leaseTTL, o.unfenced = 3*time.Second, true }),
			expect:      ZombieWrites,
			minRelays:   2,
			pauses:      true,
			pollOnly:    true,
			during:      relayPausedPastLease,
		},
		{
			Name:        "ledger-paused",
			Description: "one of two ledger instances frozen (SIGSTOP) past the group's session timeout, then woken",
			opts:        with(outbox, func(o *options) { o.ledgers = 2 }),
			expect:      Clean,
			pauses:      true,
			fullOnly:    true,
			during:      ledgerPaused,
		},
		{
			Name:        "ledger-scaled-rebalance",
			Description: "three ledger instances in one group: one SIGKILLed and one restarted under load (rebalances)",
			opts:        with(outbox, func(o *options) { o.ledgers = 3 }),
			expect:      Clean,
			fullOnly:    true,
			during:      ledgerScaledRebalance,
		},
		{
			Name:        "wal-slot-dropped",
			Description: "wal: the replication slot is dropped under its reader (walsender ended, slot dropped) while payments flow",
			opts:        with(outbox, func(o *options) { o.wal = true }),
			expect:      Clean,
			during:      walSlotDropped,
		},
		{
			Name:        "wal-slot-recreated",
			Description: "wal: the slot is dropped and created again by the superuser behind its (frozen) reader, payments committed in between",
			opts:        with(outbox, func(o *options) { o.wal = true }),
			expect:      Clean,
			pauses:      true,
			during:      walSlotRecreated,
		},
		{
			Name:        "wal-publication-drift",
			Description: "wal: the outbox table is removed from the relay's publication for a few seconds under load, then added back",
			opts:        with(outbox, func(o *options) { o.wal = true }),
			expect:      Clean,
			during:      walPublicationDrift,
		},
		{
			Name:        "wal-poison-event",
			Description: "wal: among the payments, one event for a topic that does not exist (relays park after 5 attempts)",
			opts: with(outbox, func(o *options) {
				o.wal = true
				o.relayEnv = []string{fmt.Sprintf("RELAY_MAX_ATTEMPTS=%d", walPoisonAttempts), "RELAY_RETRY_BACKOFF=250ms"}
			}),
			expect: Clean,
			during: walPoisonEvent,
		},
		{
			Name:        "relay-mode-switch",
			Description: "a rolling switch under load from polling relays to WAL relays and back, orders refunded alongside",
			opts:        with(outbox, func(o *options) { o.wal, o.relayMode = true, RelayPoll }),
			expect:      Clean,
			during:      relayModeSwitch,
		},
		{
			Name:        "postgres-restart",
			Description: "PostgreSQL is restarted under load",
			opts:        outbox,
			expect:      Clean,
			stops:       postgresServer,
			during:      postgresRestart,
		},
	}, pgScenarios(outbox)...)
}

// crashAt crashes the process that pick returns at point, Crashes times,
// letting its restart policy bring it back each time; the recovery is the
// longest it took to be ready again.
func crashAt(pick func(*Deployment) *Process, point string) func(context.Context, *Deployment, Sizes) (string, time.Duration, error) {
	return func(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
		p := pick(d)
		n, back, err := p.CrashRepeatedly(ctx, point, s.Crashes)
		note := fmt.Sprintf("%s crashed %d× at %s", p.Name, n, point)
		if n > 0 {
			note += fmt.Sprintf(", ready again within %s", back.Round(10*time.Millisecond))
		}
		return note, back, err
	}
}

// failSometimes arms an error with a probability at an orders step.
func failSometimes(point string, p float64) func(context.Context, *Deployment, Sizes) (string, time.Duration, error) {
	return func(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
		err := d.Orders.Arm(ctx, point, chaos.Fault{Action: chaos.Error, Probability: p})
		d.markArmed(fmt.Sprintf("%s fails %.0f%%", point, p*100))
		return fmt.Sprintf("%s fails with probability %.2f", point, p), 0, err
	}
}

// publishLagThreshold is the OutboxPublishLag alert's threshold
// (deploy/prometheus/alerts.yml).
const publishLagThreshold = 30 * time.Second

// kafkaDown stops the broker (every broker of a cluster), places payments
// while it is down (they must all succeed: capture does not depend on the
// broker), checks that the publish-lag gauges rise, and measures how long the
// backlog takes to drain once the broker is back.
func kafkaDown(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	return brokerOutage(ctx, d, s, "Kafka",
		func() error { return d.servers.stopServer(kafkaServer) },
		func() error { return d.servers.startServer(kafkaServer) })
}

// brokerOutage stops what (with stop) under load, places payments at 20/s
// meanwhile (all must succeed), keeps it down until the publish-lag gauges
// show the backlog and its age — at least the outage, longer on a busy
// machine, never judged on how long the gauges took — checks that no event
// was acknowledged meanwhile, starts it again and measures the drain, which
// it returns with its note.
func brokerOutage(ctx context.Context, d *Deployment, s Sizes, what string, stop, start func() error) (string, time.Duration, error) {
	if err := stop(); err != nil {
		return "", 0, err
	}
	down := time.Now()
	d.mark(what + " down")
	meanwhile := sideLoad(ctx, d, int(s.Outage.Seconds()*20), 99)
	// What was acknowledged just before the stop is still being recorded
	// for a moment; once the publishing relays report the outage and their
	// count stands still, nothing more may be.
	publishedBefore := d.quiescent(ctx, 30*time.Second)
	want := max(s.Outage.Seconds()/2, 1)
	if s.Outage > publishLagThreshold {
		want = publishLagThreshold.Seconds() + 1
	}
	var lag, pending float64
	for wait := time.Until(down.Add(s.Outage)); ; wait = 250 * time.Millisecond {
		pause(ctx, wait)
		lag, _ = d.Relays[0].Metric(ctx, "paylab_outbox_oldest_pending_age_seconds")
		pending, _ = d.Relays[0].Metric(ctx, "paylab_outbox_pending")
		if (pending > 0 && lag >= want) || ctx.Err() != nil {
			break
		}
	}
	publishedAfter, err := d.published(ctx)
	for err != nil && ctx.Err() == nil {
		pause(ctx, 200*time.Millisecond)
		publishedAfter, err = d.published(ctx)
	}
	acked := publishedAfter - publishedBefore
	during := <-meanwhile
	if err := start(); err != nil {
		return "", 0, err
	}
	up := time.Now()
	d.markEnd(what + " back")
	drained, err := d.waitOutboxEmpty(ctx)
	if err != nil {
		return "", 0, err
	}
	note := fmt.Sprintf("%s down %s: %d/%d payments captured meanwhile, %.0f events acknowledged; pending rose to %.0f, oldest pending %.1fs (the OutboxPublishLag alert fires above 30s); drained %s after restart",
		what, up.Sub(down).Round(100*time.Millisecond), during.StatusCode["201"], during.Requests, acked, pending, lag, drained.Round(100*time.Millisecond))
	switch {
	case allCaptured(during) != nil:
		return note, drained, allCaptured(during)
	case acked != 0:
		return note, drained, fmt.Errorf("%.0f events were acknowledged while %s was down, below min.insync.replicas", acked, what)
	case pending == 0 || lag < want:
		return note, drained, fmt.Errorf("the publish-lag metrics did not rise during the outage")
	case s.Outage > publishLagThreshold && lag <= publishLagThreshold.Seconds():
		return note, drained, fmt.Errorf("the OutboxPublishLag condition (oldest pending > 30s) did not hold during a %s outage", s.Outage)
	}
	return note, drained, nil
}

// published sums the relays' published_total: events acknowledged by Kafka
// and recorded; an error when a relay does not answer.
func (d *Deployment) published(ctx context.Context) (float64, error) {
	var n float64
	for _, r := range d.Relays {
		v, err := r.Metric(ctx, "paylab_outbox_published_total")
		if err != nil {
			return 0, err
		}
		n += v
	}
	return n, nil
}

// quiescent waits, at most limit, until the relays that publish report a
// broker outage (all of them polling; the reader streaming a slot) and
// their published count has stood still for a second, and returns it.
func (d *Deployment) quiescent(ctx context.Context, limit time.Duration) float64 {
	deadline := time.Now().Add(limit)
	last := -1.0
	for {
		pause(ctx, time.Second)
		n, err := d.published(ctx)
		inOutage := 0
		for _, r := range d.Relays {
			if v, err := r.Metric(ctx, "paylab_outbox_broker_outage"); err == nil && v == 1 {
				inOutage++
			}
		}
		seen := inOutage == len(d.Relays) || (d.RelayMode == RelayWAL && inOutage > 0)
		if err == nil && ((seen && n == last) || time.Now().After(deadline) || ctx.Err() != nil) {
			return n
		}
		if err == nil {
			last = n
		}
	}
}

// postgresRestart restarts the database while payments keep coming: they get
// clean 503s during the outage, nothing is half written, nothing is lost.
func postgresRestart(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	done := sideLoad(ctx, d, 200, 98)
	time.Sleep(time.Second)
	if err := d.servers.stopServer(postgresServer); err != nil {
		return "", 0, err
	}
	down := time.Now()
	d.mark("PostgreSQL stopped")
	time.Sleep(2 * time.Second)
	if err := d.servers.startServer(postgresServer); err != nil {
		return "", 0, err
	}
	outage := time.Since(down)
	d.markEnd("PostgreSQL started")
	during := <-done
	drained, err := d.waitOutboxEmpty(ctx)
	if err != nil {
		return "", 0, err
	}
	half, err := d.halfWritten(ctx)
	if err != nil {
		return "", 0, err
	}
	halfNote := fmt.Sprintf("%d orders half written", half)
	if d.RelayMode == RelayWAL {
		// The WAL relay deletes the rows it published: an order without
		// its event in the outbox is the rule, not a half write. A capture
		// committed without its event shows as lost in the reconciliation.
		halfNote = "half writes judged by the reconciliation (the WAL relay deletes published rows)"
	}
	note := fmt.Sprintf("PostgreSQL down %s: of %d payments meanwhile, %d captured, %d answered 503; %s; drained %s after restart",
		outage.Round(100*time.Millisecond), during.Requests, during.StatusCode["201"], during.StatusCode["503"], halfNote, drained.Round(100*time.Millisecond))
	switch {
	case half > 0:
		return note, drained, fmt.Errorf("half-written state: %d orders", half)
	case during.StatusCode["500"] > 0:
		return note, drained, fmt.Errorf("%d payments answered 500 during the outage", during.StatusCode["500"])
	}
	return note, drained, nil
}

// waitOutboxEmpty waits until no undispatched outbox row is left. It asks
// on one connection, opened again after a failure (the server restarted).
func (d *Deployment) waitOutboxEmpty(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	for {
		var err error
		if conn == nil {
			conn, err = pgx.Connect(ctx, d.Src.OrdersURL)
		}
		if err == nil {
			var n int
			if err = conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE dispatched_at IS NULL`).Scan(&n); err != nil {
				conn.Close(context.WithoutCancel(ctx))
				conn = nil
			} else if n == 0 {
				return time.Since(start), nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("outbox not drained: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// halfWritten counts captured orders whose OrderCaptured event is missing
// from the outbox: a change committed without its event. The WAL relay
// deletes the rows it published, so in that mode there is nothing to count
// here (0): the reconciliation's lost events are the check.
func (d *Deployment) halfWritten(ctx context.Context) (int, error) {
	if d.RelayMode == RelayWAL {
		return 0, nil
	}
	conn, err := pgx.Connect(ctx, d.Src.OrdersURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM orders o WHERE o.status <> 'authorized'
		AND NOT EXISTS (SELECT 1 FROM outbox x WHERE x.aggregate_id = o.id::text AND x.event_type = 'OrderCaptured')`).Scan(&n)
	return n, err
}
