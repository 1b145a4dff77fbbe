package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paylab/paylab/internal/lab/pgha"
)

// pgScenarios are the scenarios on a Patroni cluster of three PostgreSQL
// members (make chaos-ha; `paylab chaos run ha`): the orders database fails
// over under load, and every payment the API acknowledged must be on the
// new leader — except with asynchronous replication, where the scenario
// shows that it is not.
func pgScenarios(outbox options) []Scenario {
	ha := func(s Sizes) Sizes {
		// At least 2 000 payments, at a rate that keeps them coming
		// through the failover and well after it (40 s).
		s.Payments, s.Rate = max(s.Payments, 2000), 50
		return s
	}
	const stops = "a PostgreSQL cluster member"
	return []Scenario{
		{
			Name:        "postgres-leader-killed",
			Description: "Patroni cluster of three, synchronous replication: the leader's PostgreSQL is SIGKILLed under load",
			opts:        outbox,
			expect:      Clean,
			stops:       stops,
			pg:          pgha.Synchronous,
			sizes:       ha,
			during:      postgresLeaderKilled,
		},
		{
			Name:        "postgres-async-failover",
			Description: "the same with asynchronous replication, both replicas lagging (walreceivers frozen): acknowledged payments are lost",
			opts:        outbox,
			expect:      AcknowledgedLost,
			stops:       stops,
			pg:          pgha.Asynchronous,
			sizes:       ha,
			during:      postgresAsyncFailover,
		},
		{
			Name:        "postgres-switchover",
			Description: "Patroni cluster of three, synchronous replication: a planned switchover (patronictl switchover) under load",
			opts:        outbox,
			expect:      Clean,
			stops:       stops,
			pg:          pgha.Synchronous,
			sizes:       ha,
			during:      postgresSwitchover,
		},
	}
}

// haLead is the share of the payments committed before the fault.
const haLead = 5

// underHALoad waits until a fifth of the payments are committed, and
// returns the leader then.
func underHALoad(ctx context.Context, d *Deployment, s Sizes) (int, error) {
	if d.HA == nil {
		return 0, errors.New("the deployment has no Patroni cluster")
	}
	if err := await(ctx, 2*time.Minute, "payments committed before the fault", func() bool {
		n, err := ordersSince(ctx, d.HA.URL("orders"), time.Time{})
		return err == nil && n >= s.Payments/haLead
	}); err != nil {
		return 0, err
	}
	// Patroni promotes only a healthy synchronous standby (or, replicating
	// asynchronously, a streaming replica): wait for one, else it would
	// restart the old leader in place.
	if err := awaitWhole(ctx, d.HA); err != nil {
		return 0, err
	}
	leader := d.HA.Leader(ctx)
	if leader == 0 {
		return 0, errors.New("no leader under load")
	}
	return leader, nil
}

// postgresLeaderKilled SIGKILLs the leader's postmaster under load: with
// synchronous replication the standby Patroni promotes has every commit the
// API acknowledged; the API answers 503 (never 500, never a hang) until the
// pools reach the new leader, and nothing is restarted.
func postgresLeaderKilled(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	old, err := underHALoad(ctx, d, s)
	if err != nil {
		return "", 0, err
	}
	watch := watchReadiness(ctx, []*Process{d.Orders})
	killed := time.Now()
	if err := d.HA.KillPostmaster(old); err != nil {
		return "", 0, err
	}
	d.mark(fmt.Sprintf("leader pg%d SIGKILLed", old))
	return afterFailover(ctx, d, old, killed, watch, "leader killed")
}

// afterFailover waits for the new leader and the first payment on it, the
// orders API ready again, and in WAL mode the relays' slot on the new leader.
func afterFailover(ctx context.Context, d *Deployment, old int, at time.Time, watch *readinessWatch, what string) (string, time.Duration, error) {
	f, err := awaitFailover(ctx, d, old, at)
	if err != nil {
		watch.stop()
		return "", 0, err
	}
	readyErr := d.Orders.WaitReady(ctx)
	note := fmt.Sprintf("%s, %s; orders API: %s", what, f, strings.Join(strings.Fields(watch.stop()), " "))
	if d.RelayMode == RelayWAL {
		if !hasSlot(ctx, d.HA.MemberURL(f.leader, "orders"), haSlot) {
			return note, f.writable, fmt.Errorf("the slot %s is not on the new leader pg%d", haSlot, f.leader)
		}
		note += fmt.Sprintf("; slot %s found on pg%d", haSlot, f.leader)
	}
	if readyErr != nil {
		return note, f.writable, fmt.Errorf("the orders API not ready again after the failover: %w", readyErr)
	}
	return note, f.writable, nil
}

// haFreeze is how long both replicas lag before the leader dies: short
// enough that they stay within Patroni's maximum_lag_on_failover (1 MB), so
// that one is promoted all the same.
const haFreeze = 1500 * time.Millisecond

// postgresAsyncFailover is the replication hole: with asynchronous
// replication a commit returns before any replica has it. Both replicas'
// walreceivers are frozen (SIGSTOP), the leader commits and
// acknowledges payments alone, then dies; the frozen walreceivers are killed
// with it, so what they held unflushed is gone too, and Patroni promotes a
// replica that lacks those payments.
func postgresAsyncFailover(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	old, err := underHALoad(ctx, d, s)
	if err != nil {
		return "", 0, err
	}
	var frozen []*pgha.Frozen
	defer func() {
		for _, f := range frozen {
			_ = f.Thaw()
		}
	}()
	for m := 1; m <= pgha.Members; m++ {
		if m == old {
			continue
		}
		f, err := d.HA.FreezeReplica(ctx, m)
		if err != nil {
			return "", 0, err
		}
		frozen = append(frozen, f)
	}
	d.mark("replicas frozen")
	before, err := ordersSince(ctx, d.HA.MemberURL(old, "postgres"), time.Time{})
	if err != nil {
		return "", 0, err
	}
	pause(ctx, haFreeze)
	after, err := ordersSince(ctx, d.HA.MemberURL(old, "postgres"), time.Time{})
	if err != nil {
		return "", 0, err
	}
	watch := watchReadiness(ctx, []*Process{d.Orders})
	killed := time.Now()
	if err := d.HA.KillPostmaster(old); err != nil {
		return "", 0, err
	}
	for _, f := range frozen {
		// A walreceiver killed is a crash of its replica's PostgreSQL,
		// which restarts from what it flushed: what the frozen process
		// held in its socket is gone with the leader.
		_ = f.Kill()
	}
	d.mark(fmt.Sprintf("leader pg%d SIGKILLed", old))
	note, rec, err := afterFailover(ctx, d, old, killed, watch, "leader killed")
	return fmt.Sprintf("%d payments committed on pg%d alone while the replicas were frozen; %s", after-before, old, note), rec, err
}

// postgresSwitchover is a planned switchover under load: Patroni demotes
// the leader once its synchronous standby has every commit, and promotes
// that standby.
func postgresSwitchover(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	old, err := underHALoad(ctx, d, s)
	if err != nil {
		return "", 0, err
	}
	candidate := d.HA.SynchronousStandby(ctx)
	if candidate == 0 {
		return "", 0, errors.New("no synchronous standby to switch over to")
	}
	watch := watchReadiness(ctx, []*Process{d.Orders})
	at := time.Now()
	d.mark(fmt.Sprintf("switchover pg%d → pg%d", old, candidate))
	if err := d.HA.Switchover(ctx, old, candidate); err != nil {
		watch.stop()
		return "", 0, err
	}
	return afterFailover(ctx, d, old, at, watch, "switchover")
}
