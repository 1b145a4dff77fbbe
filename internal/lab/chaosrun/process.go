package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paylab/paylab/internal/lab/supervise"
	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/chaos"
)

// Process is one process of a deployment as a scenario drives it: faults,
// readiness and metrics over its admin listener, whichever target runs it.
// Only killing it is the target's: a signal from the local supervisor, the
// admin kill action in compose. Either way its restart policy brings it
// back.
type Process struct {
	Name  string
	Admin string // base URL of the admin listener
	chaos *chaos.Client
	kill  func(ctx context.Context) error
	// signal sends a signal to the process; nil where the target cannot.
	signal func(syscall.Signal) error
	// timeline records the process's crashes and returns (timeline.go).
	timeline atomic.Pointer[timeline]
}

func newProcess(name, adminURL, token string, kill func(context.Context) error) *Process {
	return &Process{Name: name, Admin: adminURL, chaos: &chaos.Client{BaseURL: adminURL, Token: token}, kill: kill}
}

// Arm arms a fault at point.
func (p *Process) Arm(ctx context.Context, point string, f chaos.Fault) error {
	if _, err := p.chaos.Arm(ctx, point, f); err != nil {
		return fmt.Errorf("arming %s on %s: %w", point, p.Name, err)
	}
	return nil
}

// Kill ends the process at once, without cleanup.
func (p *Process) Kill(ctx context.Context) error {
	if err := p.kill(ctx); err != nil {
		return fmt.Errorf("killing %s: %w", p.Name, err)
	}
	return nil
}

// Signal sends sig to the process (SIGSTOP to stall it, SIGCONT to wake it).
func (p *Process) Signal(sig syscall.Signal) error {
	if p.signal == nil {
		return fmt.Errorf("%s: this target cannot signal its processes", p.Name)
	}
	if err := p.signal(sig); err != nil {
		return fmt.Errorf("sending %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// WaitReady waits until the process's /readyz answers 2xx.
func (p *Process) WaitReady(ctx context.Context) error {
	return supervise.WaitReady(ctx, p.Name, p.Admin+"/readyz")
}

// Metric reads one of the process's metrics, summed over its series.
func (p *Process) Metric(ctx context.Context, name string) (float64, error) {
	return admin.Metric(ctx, p.Admin, name)
}

// started identifies the running incarnation of the process: its start
// time, which changes when it is restarted.
func (p *Process) started(ctx context.Context) (float64, error) {
	return p.Metric(ctx, "process_start_time_seconds")
}

// awaitRestart waits until an incarnation other than the one that started
// at before answers and is ready, and returns how long the process was away:
// from the last answer of the old incarnation to the new one's readiness.
func (p *Process) awaitRestart(ctx context.Context, before float64) (time.Duration, error) {
	lastSeen := time.Now()
	for {
		now := time.Now()
		s, err := p.started(ctx)
		switch {
		case err == nil && s == before:
			lastSeen = now
		case err == nil:
			if err := p.WaitReady(ctx); err != nil {
				return 0, err
			}
			return time.Since(lastSeen), nil
		}
		pause(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%s did not come back: %w", p.Name, ctx.Err())
		}
	}
}

// CrashRepeatedly arms a one-shot crash at point, and again each time the
// process has come back, until it crashed times times or ctx ends. It
// returns how many crashes happened and the longest time the process took
// to be ready again; an error only when the process refuses the fault.
func (p *Process) CrashRepeatedly(ctx context.Context, point string, times int) (crashes int, longest time.Duration, err error) {
	for crashes < times && ctx.Err() == nil {
		if err := p.WaitReady(ctx); err != nil {
			return crashes, longest, nil // ctx ended
		}
		before, err := p.started(ctx)
		if err == nil {
			err = p.Arm(ctx, point, chaos.Fault{Action: chaos.Crash, Count: 1})
		}
		var apiErr *chaos.APIError
		switch {
		case errors.As(err, &apiErr):
			return crashes, longest, err
		case err != nil: // gone again meanwhile; wait for it
			pause(ctx, 50*time.Millisecond)
			continue
		}
		back, err := p.awaitRestart(ctx, before)
		if err != nil {
			return crashes, longest, nil // ctx ended
		}
		crashes++
		longest = max(longest, back)
		p.restarted("crashed", back)
	}
	return crashes, longest, nil
}

// waitFired waits until the fault armed at point on p has fired.
func (p *Process) waitFired(ctx context.Context, point string) error {
	for {
		s, err := p.chaos.Status(ctx, point)
		if err == nil && s.Fired > 0 {
			return nil
		}
		pause(ctx, 10*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// freeze stops p with SIGSTOP, marking the moment, and returns when, and
// the wake-up (SIGCONT) to call once; calling it again does nothing, so it
// may also be deferred.
func (p *Process) freeze(d *Deployment) (time.Time, func() error, error) {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return time.Time{}, nil, err
	}
	d.mark(p.Name + " frozen")
	var once sync.Once
	var err error
	return time.Now(), func() error {
		once.Do(func() {
			d.markEnd(p.Name + " woken")
			err = p.Signal(syscall.SIGCONT)
		})
		return err
	}, nil
}

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// disarm disarms every fault of the process once it is ready: a fault left
// armed on a long-lived deployment would fire in the next scenario. A
// process that crashed comes back with nothing armed.
func (p *Process) disarm(ctx context.Context) error {
	if err := p.WaitReady(ctx); err != nil {
		return err
	}
	var apiErr *chaos.APIError
	switch err := p.chaos.DisarmAll(ctx); {
	case err == nil:
		return nil
	case errors.As(err, &apiErr):
		return fmt.Errorf("disarming %s: %w", p.Name, err)
	default:
		// Gone between readiness and the call: it comes back disarmed.
		return p.WaitReady(ctx)
	}
}

// comeback is an ended process's return: how long it was away, or why it
// did not come back.
type comeback struct {
	after time.Duration
	err   error
}

// killAndAwaitRestart kills p and returns when, and a channel that reports
// its return by its restart policy.
func (p *Process) killAndAwaitRestart(ctx context.Context) (time.Time, <-chan comeback, error) {
	return p.endAndAwaitRestart(ctx, "killed", p.Kill)
}

// endAndAwaitRestart ends p with end, marking it as what says, and returns
// when, and a channel that reports its return by its restart policy.
func (p *Process) endAndAwaitRestart(ctx context.Context, what string, end func(context.Context) error) (time.Time, <-chan comeback, error) {
	before, err := p.started(ctx)
	if err != nil {
		return time.Time{}, nil, err
	}
	if err := end(ctx); err != nil {
		return time.Time{}, nil, err
	}
	ended := time.Now()
	p.mark(what)
	back := make(chan comeback, 1)
	go func() {
		after, err := p.awaitRestart(ctx, before)
		p.markBack(err)
		back <- comeback{after, err}
	}()
	return ended, back, nil
}
