package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// newTestRegistry returns a registry whose crashes are recorded, not real.
func newTestRegistry(t *testing.T) (*Registry, chan int) {
	t.Helper()
	r := NewRegistry()
	exits := make(chan int, 100)
	r.exit = func(code int) { exits <- code }
	return r, exits
}

func TestDisarmedPointIsANoOp(t *testing.T) {
	t.Parallel()
	r, exits := newTestRegistry(t)
	p := r.Point("svc.step")
	for range 1000 {
		if err := p.Hit(context.Background()); err != nil {
			t.Fatalf("disarmed Hit = %v", err)
		}
	}
	// Armed, then disarmed again: back to a no-op.
	if err := r.Arm("svc.step", Fault{Action: Crash}); err != nil {
		t.Fatal(err)
	}
	if err := r.Disarm("svc.step"); err != nil {
		t.Fatal(err)
	}
	if err := p.Hit(context.Background()); err != nil || len(exits) != 0 {
		t.Fatalf("Hit after disarm = %v, exits %d", err, len(exits))
	}
}

func TestCountedFaultFiresNTimesThenDisarms(t *testing.T) {
	t.Parallel()
	r, _ := newTestRegistry(t)
	p := r.Point("svc.step")
	if err := r.Arm("svc.step", Fault{Action: Error, Count: 3}); err != nil {
		t.Fatal(err)
	}
	var fired int
	for range 10 {
		if err := p.Hit(context.Background()); err != nil {
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("err = %v, want ErrInjected", err)
			}
			fired++
		}
	}
	if fired != 3 {
		t.Fatalf("fired %d times, want 3", fired)
	}
	if s, _ := r.Status("svc.step"); s.Armed {
		t.Fatalf("status after the count was used up = %+v, want disarmed", s)
	}
}

func TestProbabilityFiresAboutThatOften(t *testing.T) {
	t.Parallel()
	r, _ := newTestRegistry(t)
	p := r.Point("svc.step")
	if err := r.Arm("svc.step", Fault{Action: Error, Probability: 0.25}); err != nil {
		t.Fatal(err)
	}
	const hits = 20000
	var fired int
	for range hits {
		if p.Hit(context.Background()) != nil {
			fired++
		}
	}
	// Binomial(20000, 0.25): sd ≈ 61; ±8 sd never fails by chance.
	if fired < 4500 || fired > 5500 {
		t.Fatalf("fired %d of %d hits, want about 5000", fired, hits)
	}
}

func TestCrashCallsExitWith137(t *testing.T) {
	t.Parallel()
	r, exits := newTestRegistry(t)
	p := r.Point("svc.step")
	if err := r.Arm("svc.step", Fault{Action: Crash, Count: 1}); err != nil {
		t.Fatal(err)
	}
	_ = p.Hit(context.Background())
	_ = p.Hit(context.Background())
	if len(exits) != 1 || <-exits != ExitCode {
		t.Fatalf("want exactly one exit with status %d", ExitCode)
	}
}

func TestDelayWaitsOrStopsWithTheContext(t *testing.T) {
	t.Parallel()
	r, _ := newTestRegistry(t)
	p := r.Point("svc.step")
	if err := r.Arm("svc.step", Fault{Action: Delay, Delay: Duration(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.Hit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("delay lasted %v, want ≥ 50ms", d)
	}
	if err := r.Arm("svc.step", Fault{Action: Delay, Delay: Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Hit(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Hit with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestArmRejectsBadFaultsAndUnknownPoints(t *testing.T) {
	t.Parallel()
	r, _ := newTestRegistry(t)
	r.Point("svc.step")
	tests := []struct {
		name  string
		point string
		fault Fault
	}{
		{"unknown action", "svc.step", Fault{Action: "explode"}},
		{"delay without duration", "svc.step", Fault{Action: Delay}},
		{"negative count", "svc.step", Fault{Action: Error, Count: -1}},
		{"probability above 1", "svc.step", Fault{Action: Error, Probability: 1.5}},
		{"unknown point", "svc.nope", Fault{Action: Error}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := r.Arm(tt.point, tt.fault); err == nil {
				t.Fatal("Arm succeeded, want an error")
			}
		})
	}
}

// A crash is a real one: the process exits with 137 and deferred functions
// do not run. The test binary re-executes itself to crash.
func TestCrashExitsTheProcessWithoutCleanup(t *testing.T) {
	t.Parallel()
	if os.Getenv("CHAOS_TEST_CRASH") == "1" {
		p := NewPoint("test.crash")
		_ = Default.Arm("test.crash", Fault{Action: Crash})
		defer fmt.Println("deferred cleanup ran")
		_ = p.Hit(context.Background())
		fmt.Println("survived the crash")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashExitsTheProcessWithoutCleanup$")
	cmd.Env = append(os.Environ(), "CHAOS_TEST_CRASH=1")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != ExitCode {
		t.Fatalf("child: err %v, want exit status %d; output:\n%s", err, ExitCode, out)
	}
	for _, s := range []string{"deferred cleanup ran", "survived the crash"} {
		if strings.Contains(string(out), s) {
			t.Fatalf("child printed %q: the crash was not immediate", s)
		}
	}
}

func BenchmarkDisarmedHit(b *testing.B) {
	p := NewRegistry().Point("bench.step")
	ctx := context.Background()
	for b.Loop() {
		_ = p.Hit(ctx)
	}
}

func TestPointsReturnTheInjectedError(t *testing.T) {
	t.Parallel()
	r, _ := newTestRegistry(t)
	hit := r.Points("svc.a", "svc.b")
	if err := r.Arm("svc.a", Fault{Action: Error, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := hit(context.Background(), "svc.b"); err != nil {
		t.Fatalf("a disarmed point failed: %v", err)
	}
	if err := hit(context.Background(), "svc.a"); !errors.Is(err, ErrInjected) {
		t.Fatalf("armed point: err = %v, want ErrInjected", err)
	}
	if err := hit(context.Background(), "svc.a"); err != nil {
		t.Fatalf("after its count: err = %v, want nil", err)
	}
	if err := hit(context.Background(), "svc.undeclared"); err != nil {
		t.Fatalf("an undeclared point failed: %v", err)
	}
}
