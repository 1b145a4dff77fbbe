package chaosrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/chaos"
)

// walActiveReader is the WAL relay's gauge: 1 on the relay that holds the
// reader lease and streams the slot, 0 on a standby.
const walActiveReader = "paylab_outbox_wal_active_reader"

// walReader waits until one of the relays reports that it streams the slot
// and returns it.
func (d *Deployment) walReader(ctx context.Context) (*Process, error) {
	for {
		for _, p := range d.Relays {
			if v, err := p.Metric(ctx, walActiveReader); err == nil && v == 1 {
				return p, nil
			}
		}
		pause(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no relay became the WAL reader: %w", ctx.Err())
		}
	}
}

// crashRelay crashes a relay at point, Crashes times, like crashAt. With
// polling relays it is always the first one; in WAL mode it is whichever
// relay streams the slot at the time (only the reader reaches the relay's
// fault points), found again before each crash. A fault armed on a reader
// that lost the lease in the meantime stays armed and fires if it reads
// again; the scenario disarms it at the end.
func crashRelay(point string) func(context.Context, *Deployment, Sizes) (string, time.Duration, error) {
	poll := crashAt(func(d *Deployment) *Process { return d.Relays[0] }, point)
	return func(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
		if d.RelayMode != RelayWAL {
			return poll(ctx, d, s)
		}
		var crashes int
		var longest time.Duration
		var victims []string
		for crashes < s.Crashes && ctx.Err() == nil {
			reader, err := d.walReader(ctx)
			if err != nil {
				break // ctx ended
			}
			// The lease may pass to a standby before the fault fires: look
			// for the reader again after at most two lease terms.
			rctx, cancel := context.WithTimeout(ctx, 2*d.LeaseTTL+5*time.Second)
			n, back, err := reader.CrashRepeatedly(rctx, point, 1)
			cancel()
			if err != nil {
				return "", longest, err
			}
			if n > 0 {
				crashes += n
				longest = max(longest, back)
				victims = append(victims, reader.Name)
			}
		}
		note := fmt.Sprintf("the WAL reader crashed %d× at %s (%s)", crashes, point, strings.Join(victims, ", "))
		if crashes > 0 {
			note += fmt.Sprintf(", ready again within %s", longest.Round(10*time.Millisecond))
		}
		return note, longest, nil
	}
}

// killRelay kills a relay while it holds work: with polling relays, one
// holding leased rows (killRelayHoldingLeases); in WAL mode, the reader in
// the middle of the stream (killWALReader).
func killRelay(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	if d.RelayMode == RelayWAL {
		return killWALReader(ctx, d, s)
	}
	return killRelayHoldingLeases(ctx, d, s)
}

// killWALReader holds the WAL reader after Kafka acknowledged a batch,
// before the rows are deleted and the slot position confirmed (a delay
// fault), kills it, and measures how long until the batch and everything
// pending at the kill is published and deleted by whichever relay streams
// next: the killed one, back by its restart policy and taking its own lease
// again, or a standby once the lease expires. The batch goes out twice
// (duplicates on the wire, absorbed by the inbox); nothing is lost.
func killWALReader(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	victim, err := d.walReader(ctx)
	if err != nil {
		return "", 0, err
	}
	const point = "relay.after_publish_before_mark"
	if err := victim.Arm(ctx, point, chaos.Fault{Action: chaos.Delay, Delay: chaos.Duration(time.Minute)}); err != nil {
		return "", 0, err
	}
	if err := victim.waitFired(ctx, point); err != nil {
		return "", 0, fmt.Errorf("%s never published a batch while it read the slot", victim.Name)
	}
	d.mark(victim.Name + " stalled after publishing")
	conn, err := pgx.Connect(ctx, d.Src.OrdersURL)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pending int
	var last int64
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM outbox WHERE dispatched_at IS NULL`).Scan(&pending, &last); err != nil {
		return "", 0, err
	}
	killed, back, err := victim.killAndAwaitRestart(ctx)
	if err != nil {
		return "", 0, err
	}
	left := func() int {
		n := -1
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id <= $1 AND dispatched_at IS NULL`, last).Scan(&n)
		return n
	}
	for left() != 0 && ctx.Err() == nil {
		pause(ctx, 20*time.Millisecond)
	}
	if ctx.Err() != nil {
		return "", 0, fmt.Errorf("%s (the WAL reader) killed mid-stream with %d events pending; the stream did not resume", victim.Name, pending)
	}
	resumed := time.Since(killed)
	d.markEnd("stream resumed")
	reader, err := d.walReader(ctx)
	if err != nil {
		return "", resumed, err
	}
	cb := <-back
	if cb.err != nil {
		return "", resumed, cb.err
	}
	return fmt.Sprintf("%s (the WAL reader) killed mid-stream, its published batch unconfirmed, %d events pending; %s streams again, all of them published in %s (lease TTL %s); %s ready again within %s",
		victim.Name, pending, reader.Name, resumed.Round(10*time.Millisecond), d.LeaseTTL, victim.Name, cb.after.Round(10*time.Millisecond)), resumed, nil
}
