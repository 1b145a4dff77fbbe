// Package process is the skeleton every paylab binary runs in: Main gives
// the run function a context cancelled by SIGINT or SIGTERM and turns its
// error into an exit status; a Group serves HTTP listeners and runs
// background tasks until that context ends or one of them fails, then shuts
// the servers down within a deadline.
package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// ErrUsage, returned by a run function (wrapped or not), makes Main print
// the binary's usage to stderr and exit with status 2.
var ErrUsage = errors.New("usage")

// Main runs run with the command-line arguments and a context cancelled by
// SIGINT or SIGTERM, then exits: status 2 with usage on stderr for ErrUsage
// (when usage is not empty), status 1 with "name: error" for any other
// error.
func Main(name, usage string, run func(ctx context.Context, args []string) error) {
	TuneGC()
	ctx, stop := SignalContext()
	err := run(ctx, os.Args[1:])
	stop()
	switch {
	case err == nil:
	case usage != "" && errors.Is(err, ErrUsage):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// DefaultGCPercent is the garbage collector's target (GOGC) of the paylab
// binaries when GOGC is not set. Their live heaps are small (a relay's
// batch, a request's buffers) and they allocate per event, so at Go's
// default of 100 the collector runs often: a fifth of a draining relay's
// CPU. 400 lets the heap grow to five times the live data between cycles,
// tens of megabytes, for a quarter of that collection work.
const DefaultGCPercent = 400

// TuneGC sets the collector's target to DefaultGCPercent unless the GOGC
// environment variable chose one (GOMEMLIMIT, when set, still bounds it).
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
}

// SignalContext is cancelled by SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Group is a process's components: HTTP servers on their listeners and
// tasks that block until their context ends. The zero value is ready to use
// (with a shutdown deadline of 10 s).
type Group struct {
	// ShutdownTimeout bounds the shutdown of all servers together; 0 means
	// 10 s.
	ShutdownTimeout time.Duration

	servers []server
	tasks   []func(context.Context) error
}

type server struct {
	name string
	srv  *http.Server
	ln   net.Listener
}

// Serve adds srv, serving on ln; name ("the API listener") appears in
// errors. Servers shut down in the order they were added: add the public
// ones before the admin listener, which keeps answering probes meanwhile.
func (g *Group) Serve(name string, srv *http.Server, ln net.Listener) {
	g.servers = append(g.servers, server{name: name, srv: srv, ln: ln})
}

// Go adds a task; it must return once its context ends.
func (g *Group) Go(task func(ctx context.Context) error) { g.tasks = append(g.tasks, task) }

// Run runs every server and task until ctx ends or one of them fails, then
// shuts the servers down, one after the other, within ShutdownTimeout, and
// waits for the tasks. It logs the shutdown and the end, and returns the
// first error.
func (g *Group) Run(ctx context.Context, log *slog.Logger) error {
	timeout := g.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	eg, gctx := errgroup.WithContext(ctx)
	for _, s := range g.servers {
		eg.Go(func() error {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving %s: %w", s.name, err)
			}
			return nil
		})
	}
	for _, task := range g.tasks {
		eg.Go(func() error { return task(gctx) })
	}
	eg.Go(func() error {
		<-gctx.Done()
		log.InfoContext(ctx, "shutting down", "deadline", timeout.String())
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		var errs []error
		for _, s := range g.servers {
			if err := s.srv.Shutdown(sctx); err != nil {
				errs = append(errs, fmt.Errorf("shutting down %s: %w", s.name, err))
			}
		}
		return errors.Join(errs...)
	})
	if err := eg.Wait(); err != nil {
		log.ErrorContext(context.WithoutCancel(ctx), "stopped", "error", err)
		return err
	}
	log.InfoContext(context.WithoutCancel(ctx), "stopped")
	return nil
}
