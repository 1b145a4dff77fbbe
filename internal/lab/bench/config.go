package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Sizes are how much a run does. Full is `paylab bench`; Quick is a tiny
// run that exercises every stage in well under a minute on an idle machine
// (the harness's own test). The durations are the measurements' windows; a
// window that has not yet seen MinOps operations goes on until it has, so a
// busy machine makes a run slower, never empty.
type Sizes struct {
	Name            string        `json:"name"`
	Concurrency     []int         `json:"concurrency"`       // B1 and S1: closed-loop workers
	Warmup          time.Duration `json:"warmup_ns"`         // B1 and S1: not measured
	CaptureDuration time.Duration `json:"capture_ns"`        // B1 and S1: measured, per concurrency
	MinOps          int           `json:"min_ops"`           // B1, S1 and S3: the windows last until this many completed
	Backlog         int           `json:"backlog"`           // S2 (and B2, B3, S3): events
	ConsumeWindow   time.Duration `json:"consume_window_ns"` // S3: the ledger's measured window at most
	E2EDuration     time.Duration `json:"e2e_ns"`            // S4: load per mode
	Settle          time.Duration `json:"settle_ns"`         // S4: longest wait for the ledger to catch up (a deadline, not a window)
	History         int           `json:"history"`           // S5: dispatched outbox rows and processed inbox rows
	Rounds          int           `json:"rounds"`            // B1/S1 and C1: rounds, contenders alternated; the median is reported
	GrowthRounds    int           `json:"growth_rounds"`     // S5: rounds of S2 and S4 on and off the history, alternated
	PeerRounds      int           `json:"peer_rounds"`       // the peers' drains: rounds, contenders alternated; the median is reported
	PeerBacklogs    []int         `json:"peer_backlogs"`     // the peers' stage: backlogs drained by each contender
}

// Full and Quick are the two sizes `paylab bench` knows.
var (
	Full = Sizes{
		Name: "full", Concurrency: []int{8, 32}, Warmup: 2 * time.Second, CaptureDuration: 10 * time.Second, MinOps: 1000,
		Backlog: 100_000, ConsumeWindow: 30 * time.Second, E2EDuration: 20 * time.Second, Settle: 90 * time.Second,
		History: 5_000_000, Rounds: 3, GrowthRounds: 5, PeerRounds: 5, PeerBacklogs: []int{100_000, 1_000_000},
	}
	Quick = Sizes{
		Name: "quick", Concurrency: []int{8, 32}, Warmup: 200 * time.Millisecond, CaptureDuration: time.Second, MinOps: 50,
		Backlog: 2000, ConsumeWindow: 2 * time.Second, E2EDuration: 2 * time.Second, Settle: 5 * time.Minute,
		History: 20_000, Rounds: 1, GrowthRounds: 1, PeerRounds: 1, PeerBacklogs: []int{2000},
	}
)

// Config is one run.
type Config struct {
	Bin      string    // folder holding the orders and ledger binaries
	AdminURL string    // a PostgreSQL role that may create roles and databases
	Brokers  []string  // Kafka bootstrap servers
	Sizes    Sizes     //
	Log      io.Writer // progress; nil discards
	LogDir   string    // the child processes' logs; default: a temporary folder
	Keep     bool      // keep the run's databases, role and topics
	Peers    bool      // also measure the peers (Watermill, Debezium) and the drains of Sizes.PeerBacklogs
	// Stages, when not empty, runs only these stages (B1, S1, C1, B2, S2,
	// B3, S3, S4, S5, P1) and what they need; S4 and S5 then take S1's
	// best rate from S1Rate when S1 is not among them.
	Stages []string
	S1Rate float64
}

var stageNames = []string{"B1", "S1", "C1", "B2", "S2", "B3", "S3", "S4", "S5", "P1"}

// runs reports whether the run includes stage (one of Stages' names).
func (c *Config) runs(stage ...string) bool {
	if len(c.Stages) == 0 {
		return true
	}
	for _, s := range stage {
		if slices.Contains(c.Stages, s) {
			return true
		}
	}
	return false
}

func (c *Config) validate() error {
	switch {
	case c.Bin == "":
		return errors.New("bench: no folder of binaries")
	case c.AdminURL == "":
		return errors.New("bench: no PostgreSQL admin URL")
	case len(c.Brokers) == 0:
		return errors.New("bench: no Kafka brokers")
	case !c.runs("S1") && c.runs("S4", "S5") && c.S1Rate <= 0:
		return errors.New("bench: S4 and S5 without S1 need S1's rate")
	case len(c.Sizes.Concurrency) == 0 || c.Sizes.Backlog < 2 || c.Sizes.History < 1 || c.Sizes.Rounds < 1 || c.Sizes.GrowthRounds < 1 || c.Sizes.PeerRounds < 1:
		return fmt.Errorf("bench: sizes %q are incomplete", c.Sizes.Name)
	}
	for _, st := range c.Stages {
		if !slices.Contains(stageNames, st) {
			return fmt.Errorf("bench: no stage %q (stages: %s)", st, strings.Join(stageNames, ", "))
		}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}
