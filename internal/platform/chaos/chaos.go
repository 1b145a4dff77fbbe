// Package chaos is paylab's fault injection: named fault points at the step
// boundaries of every service, armed at run time to crash the process, return
// an error or add a delay — so the experiments can show what each failure
// does to the event flow.
//
// A point is a package-level variable, declared once where the step lives:
//
//	var afterLease = chaos.NewPoint("relay.after_lease")
//
//	if err := afterLease.Hit(ctx); err != nil { … }
//
// Disarmed, Hit is one atomic load: points stay in production code at no
// cost. Faults are armed over the admin listener (Mount) only when
// CHAOS_ENABLED=true, and every call needs the CHAOS_TOKEN bearer token.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what an armed fault does when its point is hit.
type Action string

// The actions.
const (
	// Crash exits the process at once with ExitCode: no deferred functions,
	// no graceful shutdown, no flushed buffers — a real crash.
	Crash Action = "crash"
	// Error makes Hit return an error wrapping ErrInjected.
	Error Action = "error"
	// Delay makes Hit sleep for the fault's Delay (or until ctx ends).
	Delay Action = "delay"
)

// ExitCode is the status of a process crashed by a fault or killed over the
// admin API; it mimics a process killed by SIGKILL (128+9).
const ExitCode = 137

// ErrInjected is wrapped by the errors of the Error action.
var ErrInjected = errors.New("chaos: injected fault")

// Fault is an armed fault.
type Fault struct {
	Action Action `json:"action"`
	// Count is how many times the fault fires before it disarms itself;
	// zero means every time.
	Count int64 `json:"count,omitempty"`
	// Probability that a hit fires, in (0, 1]; zero means 1.
	Probability float64 `json:"probability,omitempty"`
	// Delay is the sleep of the Delay action, e.g. "500ms" in JSON.
	Delay Duration `json:"delay,omitempty"`
}

// Validate reports whether f can be armed.
func (f Fault) Validate() error {
	switch f.Action {
	case Crash, Error:
	case Delay:
		if f.Delay <= 0 {
			return errors.New(`action "delay" needs a positive "delay", e.g. "500ms"`)
		}
	default:
		return fmt.Errorf("action %q is not one of crash, error, delay", f.Action)
	}
	if f.Count < 0 {
		return fmt.Errorf("count %d is negative", f.Count)
	}
	if f.Probability < 0 || f.Probability > 1 {
		return fmt.Errorf("probability %v is not in [0, 1]", f.Probability)
	}
	return nil
}

// armed is the state of an armed point.
type armed struct {
	fault     Fault
	remaining atomic.Int64 // hits left to fire when fault.Count > 0
	fired     atomic.Int64
}

// Point is a named fault point.
type Point struct {
	name  string
	reg   *Registry
	state atomic.Pointer[armed]
}

// Name is the point's name, e.g. "relay.after_lease".
func (p *Point) Name() string { return p.name }

// Hit runs the point's armed fault, if any. Disarmed, it costs one atomic
// load and returns nil.
func (p *Point) Hit(ctx context.Context) error {
	a := p.state.Load()
	if a == nil {
		return nil
	}
	return p.fire(ctx, a)
}

func (p *Point) fire(ctx context.Context, a *armed) error {
	if pr := a.fault.Probability; pr > 0 && pr < 1 && rand.Float64() >= pr {
		return nil
	}
	if a.fault.Count > 0 {
		left := a.remaining.Add(-1)
		if left < 0 {
			return nil
		}
		if left == 0 {
			p.state.CompareAndSwap(a, nil) // used up
		}
	}
	a.fired.Add(1)
	switch a.fault.Action {
	case Crash:
		p.reg.exit(ExitCode)
		return fmt.Errorf("%w: crash at %s", ErrInjected, p.name) // only when exit is replaced in tests
	case Error:
		return fmt.Errorf("%w at %s", ErrInjected, p.name)
	case Delay:
		t := time.NewTimer(time.Duration(a.fault.Delay))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Registry holds a set of points. Services use the process-wide Default
// through NewPoint; tests make their own.
type Registry struct {
	mu     sync.Mutex
	points map[string]*Point
	exit   func(code int)
}

// NewRegistry returns an empty registry whose crashes call os.Exit.
func NewRegistry() *Registry {
	return &Registry{points: map[string]*Point{}, exit: os.Exit}
}

// Default is the process-wide registry.
var Default = NewRegistry()

// NewPoint returns the Default registry's point called name.
func NewPoint(name string) *Point { return Default.Point(name) }

// Point returns the point called name, creating it on first use.
func (r *Registry) Point(name string) *Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.points[name]; ok {
		return p
	}
	p := &Point{name: name, reg: r}
	r.points[name] = p
	return p
}

// ErrUnknownPoint is returned for a point nobody declared.
var ErrUnknownPoint = errors.New("chaos: unknown fault point")

func (r *Registry) lookup(name string) (*Point, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.points[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownPoint, name)
	}
	return p, nil
}

// Arm arms the point called name with f, replacing any armed fault.
func (r *Registry) Arm(name string, f Fault) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("chaos: arming %s: %w", name, err)
	}
	p, err := r.lookup(name)
	if err != nil {
		return err
	}
	a := &armed{fault: f}
	a.remaining.Store(f.Count)
	p.state.Store(a)
	return nil
}

// Disarm disarms the point called name.
func (r *Registry) Disarm(name string) error {
	p, err := r.lookup(name)
	if err != nil {
		return err
	}
	p.state.Store(nil)
	return nil
}

// DisarmAll disarms every point.
func (r *Registry) DisarmAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.points {
		p.state.Store(nil)
	}
}

// Status is a point's state as the admin API shows it.
type Status struct {
	Point string `json:"point"`
	Armed bool   `json:"armed"`
	Fault *Fault `json:"fault,omitempty"`
	// Remaining is how many more times a counted fault fires.
	Remaining *int64 `json:"remaining,omitempty"`
	// Fired is how many times the armed fault has fired.
	Fired int64 `json:"fired"`
}

// Status returns the state of the point called name.
func (r *Registry) Status(name string) (Status, error) {
	p, err := r.lookup(name)
	if err != nil {
		return Status{}, err
	}
	return p.status(), nil
}

func (p *Point) status() Status {
	s := Status{Point: p.name}
	if a := p.state.Load(); a != nil {
		f := a.fault
		s.Armed, s.Fault, s.Fired = true, &f, a.fired.Load()
		if f.Count > 0 {
			left := max(a.remaining.Load(), 0)
			s.Remaining = &left
		}
	}
	return s
}

// List returns the state of every point, by name.
func (r *Registry) List() []Status {
	r.mu.Lock()
	points := make([]*Point, 0, len(r.points))
	for _, p := range r.points {
		points = append(points, p)
	}
	r.mu.Unlock()
	sort.Slice(points, func(i, j int) bool { return points[i].name < points[j].name })
	out := make([]Status, len(points))
	for i, p := range points {
		out[i] = p.status()
	}
	return out
}

// Duration is a time.Duration written as a Go duration string in JSON.
type Duration time.Duration

// MarshalJSON writes d as e.g. "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// UnmarshalJSON reads a duration string such as "500ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("duration %s is not a string such as \"500ms\"", b)
	}
	v, err := time.ParseDuration(string(b[1 : len(b)-1]))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Points declares the named points on the Default registry (so they can be
// armed before their first hit) and returns a function that hits one by
// name (see Registry.Points).
func Points(names ...string) func(ctx context.Context, point string) error {
	return Default.Points(names...)
}

// Points declares the named points on r and returns a function that hits one
// by name and returns Hit's error, for a step that fails with it: the Error
// action's error (and a Delay cut short by ctx) reaches the caller. A name
// not declared here is a no-op.
func (r *Registry) Points(names ...string) func(ctx context.Context, point string) error {
	points := make(map[string]*Point, len(names))
	for _, n := range names {
		points[n] = r.Point(n)
	}
	return func(ctx context.Context, point string) error {
		if p := points[point]; p != nil {
			return p.Hit(ctx)
		}
		return nil
	}
}
