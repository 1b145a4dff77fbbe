package orderapp

import "fmt"

// Mode is how the service gets its events to Kafka.
type Mode string

const (
	// ModeOutbox writes each event to the outbox table in the transaction of
	// the change it announces; a relay publishes it after the commit. The
	// default, and the only correct mode.
	ModeOutbox Mode = "outbox"
	// ModeNaive commits the change, then publishes the event to Kafka
	// directly. A crash or a broker outage between the two loses the event.
	// It exists only to demonstrate the dual-write hole.
	ModeNaive Mode = "naive"
	// ModeNaivePublishFirst publishes the event, then commits the change. A
	// failed commit leaves a phantom event for a change that never happened.
	// It exists only to demonstrate the dual-write hole.
	ModeNaivePublishFirst Mode = "naive-publish-first"
)

// Modes lists the valid modes.
var Modes = []Mode{ModeOutbox, ModeNaive, ModeNaivePublishFirst}

// ParseMode parses an OUTBOX_MODE value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown mode %q (want one of %v)", s, Modes)
}

func (m Mode) naive() bool { return m == ModeNaive || m == ModeNaivePublishFirst }
