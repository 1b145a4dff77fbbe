package chaosrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/loadgen"
)

// recordAudit records, in the deployment's orders database, every
// statement that records outbox events as published — a polling relay's
// UPDATE of dispatched_at, a WAL relay's DELETE — with the session's
// application_name (each relay's RELAY_ID), how many events it recorded
// and when. Claims and parks are not records of a publish.
const recordAudit = `
CREATE TABLE IF NOT EXISTS chaos_relay_records (
    relay text, events bigint, at timestamptz DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION chaos_relay_dispatched() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_relay_records (relay, events)
    SELECT current_setting('application_name'), count(*) FROM old_rows o JOIN new_rows n USING (id)
    WHERE o.dispatched_at IS NULL AND n.dispatched_at IS NOT NULL HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION chaos_relay_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_relay_records (relay, events)
    SELECT current_setting('application_name'), count(*) FROM old_rows
    WHERE dispatched_at IS NULL AND parked_at IS NULL HAVING count(*) > 0;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS chaos_relay_dispatched ON outbox;
CREATE TRIGGER chaos_relay_dispatched AFTER UPDATE ON outbox REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chaos_relay_dispatched();
DROP TRIGGER IF EXISTS chaos_relay_deleted ON outbox;
CREATE TRIGGER chaos_relay_deleted AFTER DELETE ON outbox REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chaos_relay_deleted();`

// switchEvents is how many events the relays of a mode must record before
// the switch goes on: proof that the mode publishes.
const switchEvents = 100

// relayModeSwitch switches the relays from polling to WAL and back, one
// relay at a time, as a rolling deployment would, while payments flow and
// orders are refunded twice each (three events per order, for the order
// check): a WAL relay is started, then a polling relay stopped, and so on;
// once the WAL relays published, polling relays replace them likewise.
// Nothing may be lost or left pending, no order's events may go out of
// order, and the two modes must never publish at once: a record of one
// mode's relays after the other's first, within a switch, fails the
// scenario. The note says whether the slot was left behind.
func relayModeSwitch(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	c, err := walControlOf(d)
	if err != nil {
		return "", 0, err
	}
	conn, err := pgx.Connect(ctx, d.Src.OrdersURL)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, recordAudit); err != nil {
		return "", 0, fmt.Errorf("installing the audit triggers: %w", err)
	}
	stopLoad := onceLoad(keepLoad(ctx, d, 88))
	defer stopLoad()
	refunds := startRefunds(ctx, d, 5)
	defer refunds.stop()

	var groups [3][]string // the polling relays, the WAL relays, the polling relays again
	for _, p := range d.Relays {
		groups[0] = append(groups[0], p.Name)
	}
	if err := awaitRecords(ctx, conn, groups[0], 1); err != nil {
		return "", 0, err
	}
	// One relay at a time: a new one is started and, once it has found its
	// place (below), an old one is stopped. Once the last old one stopped,
	// every new relay must be ready.
	roll := func(to string, group *[]string) error {
		for _, old := range slices.Clone(d.Relays) {
			p, err := c.startRelay(ctx, to)
			if err != nil {
				return err
			}
			*group = append(*group, p.Name)
			if err := awaitPlace(ctx, conn, c, p, *group); err != nil {
				return err
			}
			if err := c.stopRelay(old); err != nil {
				return err
			}
		}
		rctx, cancel := context.WithTimeout(ctx, walRecoveryLimit)
		defer cancel()
		for _, p := range d.Relays {
			if err := p.WaitReady(rctx); err != nil {
				return fmt.Errorf("after the switch to RELAY_MODE=%s: %w", to, err)
			}
		}
		return nil
	}
	started := time.Now()
	d.mark("switch to WAL")
	if err := roll(RelayWAL, &groups[1]); err != nil {
		return "", 0, err
	}
	d.RelayMode = RelayWAL
	if err := awaitRecords(ctx, conn, groups[1], switchEvents); err != nil {
		return "", 0, err
	}
	d.markEnd("WAL relays publish")
	d.mark("switch back to polling")
	if err := roll(RelayPoll, &groups[2]); err != nil {
		return "", 0, err
	}
	d.RelayMode = RelayPoll
	switched := time.Now()
	if err := awaitRecords(ctx, conn, groups[2], switchEvents); err != nil {
		return "", 0, err
	}
	d.markEnd("polling relays publish")
	stopLoad()
	placed := refunds.stop()
	admin, err := superuserConn(ctx, c, d)
	if err != nil {
		return "", 0, err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	hw, err := highWater(ctx, admin)
	if err != nil {
		return "", 0, err
	}
	if err := awaitPublished(ctx, admin, hw, walRecoveryLimit); err != nil {
		return "", 0, fmt.Errorf("after the switch back to polling: %w", err)
	}
	drained := time.Since(switched)
	slot := "the slot was dropped"
	if left, err := slotExists(ctx, admin, c.walSlot()); err != nil || left {
		slot = "the slot was left behind"
	}

	spans, err := recordSpans(ctx, conn, groups)
	if err != nil {
		return "", 0, err
	}
	note := fmt.Sprintf("polling %s → WAL %s → polling %s, one relay at a time, in %s; %s; %d orders refunded twice alongside; backlog drained %s after the polling relays were ready; %s",
		strings.Join(groups[0], ", "), strings.Join(groups[1], ", "), strings.Join(groups[2], ", "),
		switched.Sub(started).Round(100*time.Millisecond), spans, placed.orders, drained.Round(10*time.Millisecond), slot)
	var errs []error
	for i, to := range []string{"WAL", "polling"} {
		if spans.overlap[i].events > 0 {
			errs = append(errs, fmt.Errorf("switching to %s, the relays of both modes recorded publishes at once for %s (%d events recorded by the old mode's relays after the new mode's first)",
				to, spans.overlap[i].span.Round(10*time.Millisecond), spans.overlap[i].events))
		}
	}
	if placed.failed > 0 {
		errs = append(errs, fmt.Errorf("%d order or refund requests failed: %s", placed.failed, placed.firstErr))
	}
	return note, drained, errors.Join(errs...)
}

// awaitPlace waits until the relay p, just started, has found its place
// among relays of the other mode: its mode's relays (group) publish, or it
// holds back (its /readyz answers not ready), or it was refused (it exited
// and was started again).
func awaitPlace(ctx context.Context, conn *pgx.Conn, c walControl, p *Process, group []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		var recorded bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chaos_relay_records WHERE relay = ANY($1))`, group).Scan(&recorded)
		if _, held := notReady(ctx, client, p); held || c.restarts(p) > 0 || (err == nil && recorded) {
			return nil
		}
		pause(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("%s, started among relays of the other mode, neither published, nor held back (not ready), nor was refused within a minute", p.Name)
		}
	}
}

// awaitRecords waits until the relays named recorded at least n published
// events between them.
func awaitRecords(ctx context.Context, conn *pgx.Conn, relays []string, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, walRecoveryLimit)
	defer cancel()
	var got int64
	for {
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(events), 0)::bigint FROM chaos_relay_records WHERE relay = ANY($1)`, relays).Scan(&got)
		if err == nil && got >= n {
			return nil
		}
		pause(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("%s recorded %d published events within %s, want %d", strings.Join(relays, ", "), got, walRecoveryLimit, n)
		}
	}
}

// switchSpans is what the audit saw of a switch's three groups of relays:
// each group's events and the time from its first record to its last, and
// at each switch how the old group's records overlapped the new one's.
type switchSpans struct {
	events  [3]int64
	first   [3]time.Time
	last    [3]time.Time
	overlap [2]struct {
		span   time.Duration // from the new group's first record to the old one's last
		events int64         // recorded by the old group after the new one's first record
	}
}

func recordSpans(ctx context.Context, conn *pgx.Conn, groups [3][]string) (switchSpans, error) {
	var s switchSpans
	for i, g := range groups {
		var first, last *time.Time
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(events), 0)::bigint, min(at), max(at) FROM chaos_relay_records WHERE relay = ANY($1)`, g).
			Scan(&s.events[i], &first, &last); err != nil {
			return s, fmt.Errorf("reading the audit: %w", err)
		}
		if first != nil {
			s.first[i], s.last[i] = *first, *last
		}
	}
	for i := range s.overlap {
		old, next := i, i+1
		if s.first[next].IsZero() || !s.last[old].After(s.first[next]) {
			continue
		}
		s.overlap[i].span = s.last[old].Sub(s.first[next])
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(events), 0)::bigint FROM chaos_relay_records WHERE relay = ANY($1) AND at > $2`,
			groups[old], s.first[next]).Scan(&s.overlap[i].events); err != nil {
			return s, fmt.Errorf("reading the audit: %w", err)
		}
	}
	return s, nil
}

func (s switchSpans) String() string {
	return fmt.Sprintf("recorded published: %d events by the first polling relays, %d by the WAL relays, %d by the second polling relays; the modes overlapped %s (to WAL) and %s (back)",
		s.events[0], s.events[1], s.events[2], s.overlap[0].span.Round(10*time.Millisecond), s.overlap[1].span.Round(10*time.Millisecond))
}

// refunds places orders and refunds each twice (capture, refund, refund:
// three events of one order, in sequence), at a rate, until stopped.
type refunds struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	res    refundReport
}

type refundReport struct {
	orders, failed int
	firstErr       string
}

func startRefunds(ctx context.Context, d *Deployment, perSecond int) *refunds {
	ctx, cancel := context.WithCancel(ctx)
	r := &refunds{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		client := &http.Client{Timeout: 30 * time.Second}
		keys, err := d.Keys(ctx)
		if err != nil {
			r.res.failed, r.res.firstErr = 1, err.Error()
			return
		}
		next := loadgen.Payments(86)
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := placeAndRefund(ctx, client, d.APIURL, keys, next(), n); err != nil && ctx.Err() == nil {
				r.res.failed++
				if r.res.firstErr == "" {
					r.res.firstErr = err.Error()
				}
				continue
			}
			if ctx.Err() == nil {
				r.res.orders++
			}
		}
	}()
	return r
}

// stop ends the refunds and reports them; it may be called again.
func (r *refunds) stop() refundReport {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
	return r.res
}

// placeAndRefund places a payment with its merchant's key and refunds a
// quarter of it twice.
func placeAndRefund(ctx context.Context, client *http.Client, api string, keys loadgen.Keys, p loadgen.Payment, n int) error {
	apiKey, p := keys.For(p)
	var order struct {
		ID string `json:"id"`
	}
	if err := post(ctx, client, api+"/v1/payments", apiKey, fmt.Sprintf("switch-pay-%d", n), p, &order); err != nil {
		return err
	}
	for i := range 2 {
		body := map[string]int64{"amount": p.Amount / 4}
		if err := post(ctx, client, api+"/v1/orders/"+order.ID+"/refunds", apiKey, fmt.Sprintf("switch-refund-%d-%d", n, i), body, nil); err != nil {
			return err
		}
	}
	return nil
}

func post(ctx context.Context, client *http.Client, url, apiKey, key string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	// A 503 (the API shedding load, a database failing over) or 429 is
	// retried with the same Idempotency-Key, as a client would, until ctx
	// ends: the scenario counts what the relays lose, not what a busy
	// machine delays.
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", "Bearer "+apiKey)
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("POST %s: %w", url, err)
		}
		retry := res.StatusCode == http.StatusServiceUnavailable || res.StatusCode == http.StatusTooManyRequests
		if !retry {
			defer res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				return fmt.Errorf("POST %s: %s", url, res.Status)
			}
			if out != nil {
				return json.NewDecoder(res.Body).Decode(out)
			}
			return nil
		}
		res.Body.Close()
		select {
		case <-ctx.Done():
			return fmt.Errorf("POST %s: %s after %d attempts", url, res.Status, attempt)
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, 2*time.Second)):
		}
	}
}
