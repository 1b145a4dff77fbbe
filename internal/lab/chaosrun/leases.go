package chaosrun

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/chaos"
)

// killRelayHoldingLeases holds the first relay right after it leases a
// batch (a delay fault), kills it, and measures how long its rows stay
// unpublished: the takeover time, at most the lease TTL plus one poll. The
// killed relay comes back by its restart policy, but its rows stay leased
// until the lease expires, whoever publishes them then.
func killRelayHoldingLeases(ctx context.Context, d *Deployment, _ Sizes) (string, time.Duration, error) {
	victim := d.Relays[0]
	if err := victim.Arm(ctx, "relay.after_lease", chaos.Fault{Action: chaos.Delay, Delay: chaos.Duration(time.Minute)}); err != nil {
		return "", 0, err
	}
	conn, err := pgx.Connect(ctx, d.Src.OrdersURL)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	owner, rows, err := stuckLease(ctx, conn, victim)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, fmt.Errorf("%s never held a lease", victim.Name)
		}
		return "", 0, err
	}
	d.mark(fmt.Sprintf("%s stalled holding %d leased rows", victim.Name, rows))
	killed, back, err := victim.killAndAwaitRestart(ctx)
	if err != nil {
		return "", 0, err
	}
	held := func() int {
		var n int
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE lease_owner = $1 AND dispatched_at IS NULL`, owner).Scan(&n)
		return n
	}
	for held() > 0 && ctx.Err() == nil {
		pause(ctx, 20*time.Millisecond)
	}
	if ctx.Err() != nil {
		return "", 0, fmt.Errorf("%s killed holding %d leased rows; not taken over", victim.Name, rows)
	}
	takeover := time.Since(killed)
	d.markEnd("leased rows taken over")
	cb := <-back
	if cb.err != nil {
		return "", takeover, cb.err
	}
	return fmt.Sprintf("%s killed holding %d leased rows; taken over in %s (TTL %s + poll); %s ready again within %s",
		victim.Name, rows, takeover.Round(10*time.Millisecond), d.LeaseTTL, victim.Name, cb.after.Round(10*time.Millisecond)), takeover, nil
}

// stuckLease waits until the delay fault armed at relay.after_lease on
// victim has fired — victim then sits on a leased batch — and returns the
// lease owner victim writes and how many rows it holds. Victim's lease is the
// one that does not move: every other relay publishes its batch and
// releases or renews its lease, however long that takes on a loaded
// machine, so the leases seen when the fault fired are watched until one
// alone is left unchanged.
func stuckLease(ctx context.Context, conn *pgx.Conn, victim *Process) (owner string, rows int, err error) {
	if err := victim.waitFired(ctx, "relay.after_lease"); err != nil {
		return "", 0, err
	}
	type lease struct {
		owner string
		until time.Time
	}
	leases := func() (map[lease]int, error) {
		r, err := conn.Query(ctx, `SELECT lease_owner, leased_until, count(*) FROM outbox
			WHERE dispatched_at IS NULL AND lease_owner IS NOT NULL AND leased_until > now() GROUP BY 1, 2`)
		if err != nil {
			return nil, err
		}
		out := map[lease]int{}
		var l lease
		var n int
		_, err = pgx.ForEachRow(r, []any{&l.owner, &l.until, &n}, func() error { out[l] = n; return nil })
		return out, err
	}
	first, err := leases()
	if err != nil {
		return "", 0, err
	}
	for {
		pause(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		now, err := leases()
		if err != nil {
			return "", 0, err
		}
		var still []lease
		for l := range first {
			if now[l] > 0 {
				still = append(still, l)
			}
		}
		switch len(still) {
		case 0:
			return "", 0, fmt.Errorf("%s: no lease held still after its fault fired", victim.Name)
		case 1:
			return still[0].owner, now[still[0]], nil
		}
	}
}
