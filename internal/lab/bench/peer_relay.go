package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/pkg/outbox"
)

// relayBinaryDrain is P1's paylab contender as a user runs it: the orders
// binary's relay command (`orders relay`) with its defaults, RELAY_MODE=poll
// or wal (and the given settings, as KEY=value), on a fresh orders database and 6-partition topic holding n
// undispatched events committed in txs equal transactions (in WAL mode after
// its slot and publication exist, as `paylab init` makes them). The clock
// runs from the process's start to the n-th message in the topic; the CPU
// is the process's own over its life, and the servers' over the same span.
func (e *env) relayBinaryDrain(ctx context.Context, mode string, n, txs int, settings ...string) (res DrainResult, err error) {
	res = DrainResult{Relays: 1, Events: n}
	stage := fmt.Sprintf("p%s%d%s", mode, n, randomHex(2))
	dbURL, topic, err := e.databaseAndTopic(ctx, stage)
	if err != nil {
		return res, err
	}
	env := append([]string{"DATABASE_URL=" + dbURL, "RELAY_MODE=" + mode}, settings...)
	if mode == "wal" {
		slot, cleanup, err := e.relaySlot(ctx, dbURL, stage)
		if err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, cleanup()) }()
		env = append(env, "RELAY_SLOT="+slot)
	}
	if err := withConn(ctx, dbURL, func(c *pgx.Conn) error { return seedOutboxTx(ctx, c, topic, n, txs, false) }); err != nil {
		return res, err
	}
	if err := e.checkpoint(ctx); err != nil {
		return res, err
	}
	client, err := sarama.NewClient(e.cfg.Brokers, broker.Config("paylab-bench-p1-offsets"))
	if err != nil {
		return res, err
	}
	defer client.Close()

	cpu := sampleCPU()
	start := time.Now()
	relay, err := e.start(ctx, stage+"-relay", "orders", []string{"relay"}, env...)
	if err != nil {
		return res, err
	}
	defer relay.stop()
	for {
		got, err := topicMessages(client, topic)
		if err != nil {
			return res, err
		}
		if got >= int64(n) {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	span := time.Since(start)
	if r := relay.Restarts(); r > 0 {
		return res, fmt.Errorf("the relay restarted %d times (log: %s)", r, relay.LogPath)
	}
	own, err := processCPU(relay.Pid())
	if err != nil {
		return res, fmt.Errorf("the relay's CPU (log: %s): %w", relay.LogPath, err)
	}
	res.CPU = cpu.perEvent(sampleCPU(), n, max(own, time.Nanosecond))
	res.PeerCPUSeconds = own.Seconds()
	res.Seconds, res.PerSecond = span.Seconds(), perSecond(n, span)
	return res, nil
}

// relaySlot gives the run's role REPLICATION and makes the outbox's slot and
// publication in the database at dbURL, under a name of the run's (a slot
// belongs to the server, not to a database). cleanup drops the slot.
func (e *env) relaySlot(ctx context.Context, dbURL, stage string) (slot string, cleanup func() error, err error) {
	admin, err := pgx.Connect(ctx, e.cfg.AdminURL)
	if err != nil {
		return "", nil, err
	}
	if _, err := admin.Exec(ctx, "ALTER ROLE "+pgx.Identifier{e.role}.Sanitize()+" REPLICATION"); err != nil {
		admin.Close(context.WithoutCancel(ctx))
		return "", nil, fmt.Errorf("granting REPLICATION to %s: %w", e.role, err)
	}
	cfg := outbox.WALConfig{MetricPrefix: telemetry.OutboxMetricPrefix, Slot: "paylab_bench_" + e.run + "_" + stage}
	e.mu.Lock()
	e.slots = append(e.slots, cfg.Slot) // dropped by close, should cleanup not get to it
	e.mu.Unlock()
	cleanup = func() error {
		defer admin.Close(context.WithoutCancel(ctx))
		return dropSlot(context.WithoutCancel(ctx), admin, cfg.Slot)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return "", nil, errors.Join(err, cleanup())
	}
	defer pool.Close()
	if err := outbox.SetupWAL(ctx, pool, cfg); err != nil {
		return "", nil, errors.Join(err, cleanup())
	}
	return cfg.Slot, cleanup, nil
}

// topicMessages is how many messages topic holds: the sum of its
// partitions' newest offsets (a fresh topic, nothing deleted), asked of each
// partition's leader in one request, so the clock's polling costs the
// broker little of the drain it times.
func topicMessages(client sarama.Client, topic string) (int64, error) {
	partitions, err := client.Partitions(topic)
	if err != nil {
		return 0, err
	}
	requests := map[*sarama.Broker]*sarama.OffsetRequest{}
	for _, p := range partitions {
		leader, err := client.Leader(topic, p)
		if err != nil {
			return 0, err
		}
		if requests[leader] == nil {
			requests[leader] = &sarama.OffsetRequest{Version: 1}
		}
		requests[leader].AddBlock(topic, p, sarama.OffsetNewest, 1)
	}
	var sum int64
	for leader, req := range requests {
		resp, err := leader.GetAvailableOffsets(req)
		if err != nil {
			return 0, err
		}
		for _, p := range partitions {
			if b := resp.GetBlock(topic, p); b != nil {
				if b.Err != sarama.ErrNoError {
					return 0, fmt.Errorf("newest offset of %s/%d: %w", topic, p, b.Err)
				}
				sum += b.Offset
			}
		}
	}
	return sum, nil
}

// processCPU is the user and system time process pid has used so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
