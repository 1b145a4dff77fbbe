// Package supervise runs paylab's processes locally the way docker compose
// does: it starts them, waits until their admin listener says they are
// ready, restarts them when they exit (a restart policy), and can kill one
// with SIGKILL — a real crash, for the chaos scenarios.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process describes one supervised process.
type Process struct {
	Name     string
	Path     string
	Args     []string
	Env      []string  // added to the parent's environment
	ReadyURL string    // polled until it answers 2xx; empty: ready when started
	Restart  bool      // start it again whenever it exits
	Log      io.Writer // stdout and stderr; nil discards

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	stopping bool
	restarts int
	done     chan struct{} // closed when supervision ends
}

// Start launches the process and, with Restart, keeps it running until Stop.
// It returns once the process is ready or ctx ends.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	p.stopping = false
	p.done = make(chan struct{})
	p.mu.Unlock()
	if err := p.launch(); err != nil {
		return err
	}
	go p.watch()
	return p.WaitReady(ctx)
}

func (p *Process) launch() error {
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	out := p.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return nil
}

// watch restarts the process when it exits, unless it is being stopped.
func (p *Process) watch() {
	defer close(p.done)
	for {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		<-exited
		p.mu.Lock()
		stop := p.stopping || !p.Restart
		if !stop {
			p.restarts++
		}
		p.mu.Unlock()
		if stop {
			return
		}
		time.Sleep(200 * time.Millisecond) // like a restart policy's back-off
		if err := p.launch(); err != nil {
			return
		}
	}
}

// WaitReady polls ReadyURL until it answers 2xx.
func (p *Process) WaitReady(ctx context.Context) error {
	if p.ReadyURL == "" {
		return nil
	}
	return WaitReady(ctx, p.Name, p.ReadyURL)
}

// WaitReady polls url, the readiness endpoint of the process called name,
// until it answers 2xx or ctx ends. An answer may take as long as the
// process's checks do (each up to 2 s, one after another): on a loaded
// machine a shorter timeout gave up on every answer, and the process never
// looked ready.
func WaitReady(ctx context.Context, name, url string) error {
	client := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode/100 == 2 {
				return nil
			}
			err = fmt.Errorf("%s", res.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w", name, url, errors.Join(ctx.Err(), err))
		case <-tick.C:
		}
	}
}

// Kill sends SIGKILL to the running process: no cleanup, no graceful
// shutdown. With Restart, the supervisor starts it again.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Restarts counts how often the process was started again after exiting.
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Pid is the running process's id.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop ends supervision: SIGTERM, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	p.mu.Lock()
	p.stopping = true
	cmd, exited, done := p.cmd, p.exited, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	if done != nil {
		<-done
	}
}
