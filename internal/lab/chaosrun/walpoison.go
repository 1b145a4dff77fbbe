package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/broker"
)

// walPoisonAttempts is the relays' RELAY_MAX_ATTEMPTS in wal-poison-event:
// an event that fails that many times is parked. With the default (100
// attempts, backoff up to a minute) parking takes more than an hour.
const walPoisonAttempts = 5

// walPoisonEvent slips one event the broker can never take among the
// payments: an outbox row, inserted as a service's Enqueue would, for a
// topic that does not exist (the broker creates no topic on its own). The
// relay must park it with the reason (parked_at, last_error) within the
// run, and go on publishing every other event: the healthy orders' oldest
// pending event never gets near the OutboxPublishLag alert's threshold,
// and once the load is over the relays' pending gauge is back to 0, the
// parked event counted apart.
func walPoisonEvent(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	if _, err := walControlOf(d); err != nil {
		return "", 0, err
	}
	stopLoad := onceLoad(keepLoad(ctx, d, 92))
	defer stopLoad()
	reader, err := awaitStreaming(ctx, d)
	if err != nil {
		return "", 0, err
	}
	topic := fmt.Sprintf("no-such-topic-%016x", rand.Uint64())
	if exists, err := topicExists(d.Src.Brokers, topic); err != nil || exists {
		return "", 0, errors.Join(err, fmt.Errorf("topic %s should not exist", topic))
	}
	conn, err := pgx.Connect(ctx, d.Src.OrdersURL)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var id int64
	var order string
	err = conn.QueryRow(ctx, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, sequence, topic, payload, occurred_at)
		VALUES (gen_random_uuid(), 'order', gen_random_uuid()::text, 'OrderCaptured', 1, $1,
		        jsonb_build_object('note', 'an event for a topic that does not exist'), now())
		RETURNING id, aggregate_id`, topic).Scan(&id, &order)
	if err != nil {
		return "", 0, fmt.Errorf("inserting the poison event: %w", err)
	}
	inserted := time.Now()
	d.mark("event for a missing topic inserted")

	// Until it is parked, and then until the healthy backlog is gone, the
	// age of the oldest healthy pending event.
	var (
		peak     float64
		parked   time.Duration
		attempts int
		lastErr  string
	)
	wctx, cancel := context.WithTimeout(ctx, walRecoveryLimit)
	defer cancel()
	for {
		pending := peakPending(wctx, conn, id, &peak)
		if parked > 0 && pending == 0 {
			break
		}
		if parked == 0 {
			var isParked bool
			err := conn.QueryRow(wctx, `SELECT parked_at IS NOT NULL, attempts, coalesce(last_error, '') FROM outbox WHERE id = $1`, id).
				Scan(&isParked, &attempts, &lastErr)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return "", 0, fmt.Errorf("the event for %s (outbox id %d) was recorded as published", topic, id)
			case err == nil && isParked:
				parked = time.Since(inserted)
				d.markEnd("event parked")
				stopLoad()
			}
		}
		pause(wctx, 250*time.Millisecond)
		if wctx.Err() != nil {
			if parked == 0 {
				return "", 0, fmt.Errorf("the event for %s (outbox id %d) not parked within %s: %d attempts recorded, last error %q; healthy orders' oldest pending event %.1fs old at most",
					topic, id, walRecoveryLimit, attempts, lastErr, peak)
			}
			return "", 0, fmt.Errorf("the event for %s parked, but the other events not all published within %s", topic, walRecoveryLimit)
		}
	}
	drained := time.Since(inserted)
	gauges, err := awaitGauges(ctx, d)
	if err != nil {
		return "", 0, err
	}
	note := fmt.Sprintf("%s streaming; an event for %s (order %s) parked %s after its insert, %d attempts, reason %q; healthy orders' oldest pending event %.1fs old at most (OutboxPublishLag fires above %s), all published %s after the insert; %s",
		reader.Name, topic, order, parked.Round(10*time.Millisecond), attempts, truncate(lastErr, 160), peak, publishLagThreshold, drained.Round(10*time.Millisecond), gauges)
	if exists, err := topicExists(d.Src.Brokers, topic); err != nil || exists {
		return note, parked, errors.Join(err, fmt.Errorf("topic %s exists after the run: the broker created it", topic))
	}
	switch {
	case lastErr == "":
		return note, parked, errors.New("the event was parked without a reason (last_error empty)")
	case peak >= publishLagThreshold.Seconds():
		return note, parked, fmt.Errorf("the healthy orders' oldest pending event was %.1fs old: the OutboxPublishLag condition held", peak)
	}
	return note, parked, nil
}

// peakPending raises peak to the age of the oldest pending outbox event
// other than the one with id skip, and returns how many are pending (-1
// when the read failed).
func peakPending(ctx context.Context, conn *pgx.Conn, skip int64, peak *float64) int {
	var n int
	var age float64
	err := conn.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
		FROM outbox WHERE dispatched_at IS NULL AND parked_at IS NULL AND id <> $1`, skip).Scan(&n, &age)
	if err != nil {
		return -1
	}
	*peak = max(*peak, age)
	return n
}

// awaitGauges waits until every relay's gauges (refreshed every
// RELAY_STATS_INTERVAL) show no pending event and the parked one, and
// describes them.
func awaitGauges(ctx context.Context, d *Deployment) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ok := true
		var desc string
		for _, r := range d.Relays {
			pending, err1 := r.Metric(ctx, "paylab_outbox_pending")
			parked, err2 := r.Metric(ctx, "paylab_outbox_parked")
			age, err3 := r.Metric(ctx, "paylab_outbox_oldest_pending_age_seconds")
			if err := errors.Join(err1, err2, err3); err != nil || pending != 0 || parked < 1 {
				ok = false
			}
			desc += fmt.Sprintf("%s's gauges: pending %.0f, parked %.0f, oldest pending %.1fs; ", r.Name, pending, parked, age)
		}
		if ok {
			return desc[:len(desc)-2], nil
		}
		pause(ctx, 250*time.Millisecond)
		if ctx.Err() != nil {
			return "", fmt.Errorf("the relays' gauges did not settle on 0 pending and the parked event: %s", desc)
		}
	}
}

// topicExists asks the brokers whether topic exists.
func topicExists(brokers []string, topic string) (bool, error) {
	admin, err := sarama.NewClusterAdmin(brokers, broker.Config("paylab-chaos"))
	if err != nil {
		return false, err
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		return false, fmt.Errorf("listing the topics: %w", err)
	}
	_, ok := topics[topic]
	return ok, nil
}

// onceLoad makes a load's stop safe to call again (its deferred call after
// an early one).
func onceLoad[T any](stop func() T) func() {
	var once sync.Once
	return func() { once.Do(func() { stop() }) }
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
