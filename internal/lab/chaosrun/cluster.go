package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/platform/broker"
)

// topicState is where a topic's partitions are led and how many are
// short of in-sync replicas.
func topicState(brokers []string, topic string) (broker.Replication, error) {
	admin, err := sarama.NewClusterAdmin(brokers, broker.Config("paylab-chaos"))
	if err != nil {
		return broker.Replication{}, err
	}
	defer admin.Close()
	return broker.TopicReplication(admin, topic)
}

// leadersByLoad lists the topic's leader nodes, the one leading most
// partitions first.
func leadersByLoad(r broker.Replication, nodes int) []int {
	ids := make([]int, 0, nodes)
	for id := 1; id <= nodes; id++ {
		ids = append(ids, id)
	}
	slices.SortStableFunc(ids, func(a, b int) int { return r.LeaderPerNode[int32(b)] - r.LeaderPerNode[int32(a)] })
	return ids
}

// waitTopic polls the topic's state until ok holds, and returns how long
// that took. It asks on one admin client, replaced after a failure: a
// client whose controller is the broker just killed fails until then.
func waitTopic(ctx context.Context, d *Deployment, ok func(broker.Replication) bool) (time.Duration, error) {
	start := time.Now()
	var admin sarama.ClusterAdmin
	defer func() {
		if admin != nil {
			admin.Close()
		}
	}()
	for {
		var err error
		if admin == nil {
			admin, err = sarama.NewClusterAdmin(d.Src.Brokers, broker.Config("paylab-chaos"))
		}
		if err == nil {
			var r broker.Replication
			if r, err = broker.TopicReplication(admin, d.Src.Topic); err != nil {
				admin.Close()
				admin = nil
			} else if ok(r) {
				return time.Since(start), nil
			}
		}
		pause(ctx, 250*time.Millisecond)
		if ctx.Err() != nil {
			return time.Since(start), fmt.Errorf("topic %s: %w (last error: %v)", d.Src.Topic, ctx.Err(), err)
		}
	}
}

// sideLoad places payments at 20/s while a fault lasts and reports them
// when done is closed: captures never depend on Kafka, so every one of them
// must succeed.
func sideLoad(ctx context.Context, d *Deployment, n int, seed uint64) <-chan loadgen.Report {
	out := make(chan loadgen.Report, 1)
	go func() {
		keys, err := d.Keys(ctx)
		if err != nil {
			out <- loadgen.Report{Errors: []string{err.Error()}}
			return
		}
		rep, _ := loadgen.Run(ctx, loadgen.Config{BaseURL: d.APIURL, Rate: 20, Count: max(n, 1), Seed: seed, Timeout: 30 * time.Second, Keys: keys})
		out <- rep
	}()
	return out
}

// keepLoad places payments at 20/s until the returned stop is called, so
// that a fault that waits for the pipeline to move (a relay leasing a batch,
// a consumer holding fetched messages) finds it moving after the main load
// is done; stop returns what was placed.
func keepLoad(ctx context.Context, d *Deployment, seed uint64) (stop func() loadgen.Report) {
	ctx, cancel := context.WithCancel(ctx)
	rep := sideLoad(ctx, d, 20*3600, seed)
	return func() loadgen.Report {
		cancel()
		return <-rep
	}
}

func allCaptured(rep loadgen.Report) error {
	if rep.Requests == 0 || uint64(rep.StatusCode["201"]) != rep.Requests {
		return fmt.Errorf("payments failed while brokers were down: %v", rep.StatusCode)
	}
	return nil
}

// kafkaLeaderKilled SIGKILLs the broker leading most of the topic's
// partitions while payments flow. Its partitions get new leaders from the
// in-sync replicas (min.insync.replicas 2 still holds with two brokers), the
// relays' idempotent producers retry there, and the backlog drains without
// it; it is started again after the outage and catches up.
func kafkaLeaderKilled(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	r, err := topicState(d.Src.Brokers, d.Src.Topic)
	if err != nil {
		return "", 0, err
	}
	victim := leadersByLoad(r, d.servers.brokerNodes())[0]
	led := r.LeaderPerNode[int32(victim)]
	pause(ctx, 2*time.Second) // payments are flowing
	meanwhile := sideLoad(ctx, d, int(s.Outage.Seconds()*20), 97)
	if err := d.servers.killBroker(victim); err != nil {
		return "", 0, err
	}
	killed := time.Now()
	d.mark(fmt.Sprintf("broker %d killed", victim))
	elected, err := waitTopic(ctx, d, func(r broker.Replication) bool {
		return r.LeaderPerNode[int32(victim)] == 0 && r.LeaderPerNode[-1] == 0
	})
	if err != nil {
		return "", 0, fmt.Errorf("no new leaders after broker %d was killed: %w", victim, err)
	}
	if _, err := d.waitOutboxEmpty(ctx); err != nil {
		return "", 0, err
	}
	recovery := time.Since(killed)
	pause(ctx, time.Until(killed.Add(s.Outage)))
	load := <-meanwhile
	down := time.Since(killed)
	if err := d.servers.startServer(kafkaServer); err != nil {
		return "", recovery, err
	}
	restarted := time.Since(killed) - down
	d.markEnd(fmt.Sprintf("broker %d restarted", victim))
	resync, err := waitTopic(ctx, d, func(r broker.Replication) bool { return r.InSyncShort == 0 })
	if err != nil {
		return "", recovery, fmt.Errorf("broker %d did not rejoin the in-sync replicas: %w", victim, err)
	}
	note := fmt.Sprintf("broker %d (leader of %d/%d partitions) SIGKILLed: new leaders in %s, backlog drained %s after the kill; "+
		"%d/%d payments captured meanwhile; down %s, started again in %s, back in sync %s later",
		victim, led, sum(r.LeaderPerNode), elected.Round(10*time.Millisecond), recovery.Round(10*time.Millisecond),
		load.StatusCode["201"], load.Requests, down.Round(100*time.Millisecond), restarted.Round(100*time.Millisecond), resync.Round(100*time.Millisecond))
	return note, recovery, allCaptured(load)
}

// kafkaTwoBrokersDown SIGKILLs two of the three brokers: below
// min.insync.replicas (and the controllers' quorum) no write can be
// acknowledged, so the relays must publish nothing, the payments still
// succeed, the backlog and its age grow (the lag alert's condition), and
// after the restart everything drains: nothing lost.
func kafkaTwoBrokersDown(ctx context.Context, d *Deployment, s Sizes) (string, time.Duration, error) {
	r, err := topicState(d.Src.Brokers, d.Src.Topic)
	if err != nil {
		return "", 0, err
	}
	victims := leadersByLoad(r, d.servers.brokerNodes())[:2]
	note, drained, err := brokerOutage(ctx, d, s, fmt.Sprintf("brokers %d and %d", victims[0], victims[1]),
		func() error { return errors.Join(d.servers.killBroker(victims[0]), d.servers.killBroker(victims[1])) },
		func() error { return d.servers.startServer(kafkaServer) })
	if err != nil {
		return note, drained, err
	}
	resync, err := waitTopic(ctx, d, func(r broker.Replication) bool { return r.InSyncShort == 0 })
	if err != nil {
		return note, drained, fmt.Errorf("brokers did not rejoin the in-sync replicas: %w", err)
	}
	return note + fmt.Sprintf("; replicas back in sync %s after the drain", resync.Round(100*time.Millisecond)), drained, nil
}

func sum(m map[int32]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
