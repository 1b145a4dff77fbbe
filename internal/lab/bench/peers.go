package bench

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/paylab/paylab/internal/lab/localstack"
)

// The peers' stages (paylab bench --peers): C1 gains Watermill's publisher,
// and P1 drains backlogs of Sizes.PeerBacklogs events with every relay —
// paylab's polling relay, paylab's WAL relay, Debezium, Watermill — each on
// a fresh database and topic of the same PostgreSQL and Kafka, seeded in
// peerTransactions equal transactions the way each is written, rounds
// alternating who goes first, the median and the spread reported. paylab's
// relays are the orders binary's relay command, started as a user starts it.

// The contenders of P1.
const (
	drainPoll      = "paylab-poll"
	drainPollDel   = "paylab-poll-delete" // RELAY_DELETE_DISPATCHED=true: no history kept
	drainWAL       = "paylab-wal"
	drainDebezium  = "debezium"
	drainWatermill = "watermill"
)

// peerTransactions is how many transactions each backlog is written in.
const peerTransactions = 100

// watermillMaxBacklog is the largest backlog Watermill drains in a run: at
// about a thousand events a second, a million would take a quarter of an
// hour.
const watermillMaxBacklog = 100_000

// bigBacklog is the size from which paylab's target against Debezium is
// the higher one.
const bigBacklog = 1_000_000

// PeerDrain is one contender's drain of one backlog: the median round, and
// the slowest and fastest rounds' rates.
type PeerDrain struct {
	Contender    string  `json:"contender"`
	Rounds       int     `json:"rounds"`
	MinPerSecond float64 `json:"min_per_second"`
	MaxPerSecond float64 `json:"max_per_second"`
	DrainResult
}

// peerTools are the peers' built programs.
type peerTools struct {
	watermill, debezium, payload string
}

// buildPeers builds the Watermill peer and the Debezium jar into the run's
// log folder and writes the payload file they send.
func (e *env) buildPeers(ctx context.Context) (peerTools, error) {
	var t peerTools
	repo, err := localstack.RepoRoot()
	if err != nil {
		return t, err
	}
	if t.watermill, err = buildWatermillPeer(ctx, repo, e.cfg.LogDir); err != nil {
		return t, fmt.Errorf("building the Watermill peer: %w", err)
	}
	if t.debezium, err = buildDebeziumPeer(ctx, repo, e.cfg.LogDir); err != nil {
		return t, fmt.Errorf("building the Debezium peer: %w", err)
	}
	t.payload = filepath.Join(e.cfg.LogDir, "peer-payload.json")
	return t, writePayloadFile(t.payload)
}

// watermillWrites is C1's Watermill contender.
func (e *env) watermillWrites(t peerTools, s Sizes) writePeer {
	return func(ctx context.Context, dbURL string, workers int) (CaptureResult, error) {
		return e.watermillCapture(ctx, t.watermill, dbURL, workers, s, writeUpdate, writeOrderIDs, t.payload)
	}
}

// peerDrains is P1.
func (e *env) peerDrains(ctx context.Context, t peerTools, s Sizes) ([]PeerDrain, error) {
	var out []PeerDrain
	for _, n := range s.PeerBacklogs {
		txs := peerTransactionsOf(n)
		contenders := []string{drainPoll, drainPollDel, drainWAL, drainDebezium}
		if n <= watermillMaxBacklog {
			contenders = append(contenders, drainWatermill)
		}
		rounds := s.PeerRounds
		results, err := alternatedByName(rounds, contenders, func(_ int, name string) (DrainResult, error) {
			r, err := e.peerDrain(ctx, t, name, n, txs)
			if err != nil {
				return r, fmt.Errorf("%s drain of %d: %w", name, n, err)
			}
			fmt.Fprintf(e.cfg.Log, "bench:   %s drained %d in %.1fs: %.0f events/s\n", name, n, r.Seconds, r.PerSecond)
			return r, nil
		})
		if err != nil {
			return out, err
		}
		for _, name := range contenders {
			d := PeerDrain{Contender: name, Rounds: rounds}
			d.DrainResult, d.MinPerSecond, d.MaxPerSecond = medianSpread(results[name], drainRate)
			out = append(out, d)
		}
	}
	return out, nil
}

// peerDrain drains one backlog of n events with contender name.
func (e *env) peerDrain(ctx context.Context, t peerTools, name string, n, txs int) (DrainResult, error) {
	switch name {
	case drainPoll:
		return e.relayBinaryDrain(ctx, "poll", n, txs)
	case drainPollDel:
		return e.relayBinaryDrain(ctx, "poll", n, txs, "RELAY_DELETE_DISPATCHED=true")
	case drainWAL:
		return e.relayBinaryDrain(ctx, "wal", n, txs)
	case drainDebezium:
		return e.debeziumDrain(ctx, t.debezium, n, txs)
	case drainWatermill:
		return e.watermillDrain(ctx, t.watermill, n, n/txs, t.payload)
	}
	return DrainResult{}, fmt.Errorf("unknown contender %q", name)
}

// alternated calls fn for each of n contenders in each of rounds rounds;
// the contender that goes first moves on by one each round, so that none
// always meets the machine first (or last).
func alternated(rounds, n int, fn func(round, contender int) error) error {
	for round := range rounds {
		for i := range n {
			if err := fn(round, (i+round)%n); err != nil {
				return err
			}
		}
	}
	return nil
}

// alternatedByName runs the named contenders as alternated does and returns
// each one's results, in the order of its rounds.
func alternatedByName[T any](rounds int, names []string, run func(round int, name string) (T, error)) (map[string][]T, error) {
	out := map[string][]T{}
	err := alternated(rounds, len(names), func(round, i int) error {
		r, err := run(round, names[i])
		if err != nil {
			return err
		}
		out[names[i]] = append(out[names[i]], r)
		return nil
	})
	return out, err
}

// median is the round with the median throughput (rate).
func median[T any](rounds []T, rate func(T) float64) T {
	m, _, _ := medianSpread(rounds, rate)
	return m
}

// medianSpread is the round with the median rate, and the lowest and
// highest rates of the rounds.
func medianSpread[T any](rounds []T, rate func(T) float64) (m T, lo, hi float64) {
	rounds = slices.Clone(rounds)
	slices.SortFunc(rounds, func(a, b T) int { return cmp.Compare(rate(a), rate(b)) })
	return rounds[len(rounds)/2], rate(rounds[0]), rate(rounds[len(rounds)-1])
}
