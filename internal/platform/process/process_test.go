package process_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/process"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// The group serves until its context ends, then shuts its servers down and
// waits for its tasks; a failing task stops the others.
func TestGroup(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Run("context ends", func(t *testing.T) {
		t.Parallel()
		ln := listen(t)
		ctx, cancel := context.WithCancel(t.Context())
		g := process.Group{ShutdownTimeout: 5 * time.Second}
		g.Serve("the test listener", &http.Server{Handler: http.NotFoundHandler()}, ln)
		taskDone := make(chan struct{})
		g.Go(func(ctx context.Context) error { <-ctx.Done(); close(taskDone); return nil })
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx, log) }()
		res, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		<-taskDone
	})

	t.Run("a task fails", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		g := process.Group{}
		g.Serve("the test listener", &http.Server{Handler: http.NotFoundHandler()}, listen(t))
		g.Go(func(context.Context) error { return boom })
		if err := g.Run(t.Context(), log); !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want the task's error", err)
		}
	})
}

func TestTuneGCKeepsAnExplicitGOGC(t *testing.T) {
	prev := debug.SetGCPercent(123)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	t.Setenv("GOGC", "123")
	process.TuneGC()
	if got := debug.SetGCPercent(123); got != 123 {
		t.Errorf("with GOGC set, the target became %d", got)
	}
	os.Unsetenv("GOGC")
	process.TuneGC()
	if got := debug.SetGCPercent(prev); got != process.DefaultGCPercent {
		t.Errorf("without GOGC, the target is %d, want %d", got, process.DefaultGCPercent)
	}
}
