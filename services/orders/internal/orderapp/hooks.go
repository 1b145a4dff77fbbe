package orderapp

import "context"

// Step names a boundary between two steps of a state change. The names are
// the fault points of the chaos controls.
type Step string

const (
	// StepBeforeCommit: the change (and, in outbox mode, its event) is written
	// but not committed. Every mode.
	StepBeforeCommit Step = "orders.before_commit"
	// StepAfterCommitBeforePublish: naive mode has committed the change and
	// not yet published its event. Failing here loses the event.
	StepAfterCommitBeforePublish Step = "orders.after_commit_before_publish"
	// StepAfterPublishBeforeCommit: naive-publish-first mode has published
	// the event and not yet committed. Failing here leaves a phantom event.
	StepAfterPublishBeforeCommit Step = "orders.after_publish_before_commit"
)

// Op names the operation a hook runs in.
type Op string

const (
	OpPlacePayment Op = "place_payment"
	OpCreateOrder  Op = "create_order"
	OpCapture      Op = "capture"
	OpRefund       Op = "refund"
)

// Hooks are optional functions called at the step boundaries. A hook that
// returns an error makes the step fail there, as a fault would: before the
// commit, the transaction rolls back; after it, the event is not published.
// Tests inject errors with them; the chaos controls attach fault points.
type Hooks struct {
	BeforeCommit             func(ctx context.Context, op Op) error
	AfterCommitBeforePublish func(ctx context.Context, op Op) error
	AfterPublishBeforeCommit func(ctx context.Context, op Op) error
}

func (h Hooks) at(ctx context.Context, step Step, op Op) error {
	var f func(context.Context, Op) error
	switch step {
	case StepBeforeCommit:
		f = h.BeforeCommit
	case StepAfterCommitBeforePublish:
		f = h.AfterCommitBeforePublish
	case StepAfterPublishBeforeCommit:
		f = h.AfterPublishBeforeCommit
	}
	if f == nil {
		return nil
	}
	if err := f(ctx, op); err != nil {
		return &StepError{Step: step, Err: err}
	}
	return nil
}

// StepError is a failure injected at a step boundary.
type StepError struct {
	Step Step
	Err  error
}

func (e *StepError) Error() string { return "at " + string(e.Step) + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }
