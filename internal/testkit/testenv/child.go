package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/admin"
)

// Child is the running test binary started again as a service process: the
// test's TestMain sees a variable in env and runs the service instead of the
// tests. Tests crash it for real (a fault point exits the process) and start
// it again, to check what survives.
type Child struct {
	name  string
	cmd   *exec.Cmd
	out   *bytes.Buffer
	Admin string // base URL of the child's admin listener
	done  chan error
}

// StartChild starts the child named name with env added to this process's
// environment and ADMIN_ADDR set to a free port. At cleanup it is killed if
// still running, and its output is logged when the test failed.
func StartChild(t testing.TB, name string, env ...string) *Child {
	t.Helper()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), "ADMIN_ADDR="+adminAddr)
	c := &Child{name: name, cmd: cmd, out: &bytes.Buffer{}, Admin: "http://" + adminAddr, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("%s process output:\n%s", name, c.out.String())
		}
	})
	return c
}

// Wait returns the child's exit code, failing the test after d.
func (c *Child) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case err := <-c.done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("the %s process did not exit within %s\n%s", c.name, d, c.out.String())
		return -1
	}
}

// Stop shuts the child down gracefully and expects exit code 0.
func (c *Child) Stop(t testing.TB) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("the %s process exited with %d on SIGTERM", c.name, code)
	}
}

// Kill kills the child at once (SIGKILL: no cleanup, a real crash) and
// waits until it is gone.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	_ = c.cmd.Process.Kill()
	c.Wait(t, 30*time.Second)
}

// Metric sums the samples of a metric on the child's /metrics (0 while the
// admin listener is not up yet).
func (c *Child) Metric(name string) int {
	resp, err := http.Get(c.Admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum, _ := admin.SumSamples(resp.Body, name)
	return int(sum)
}

// Output is what the child printed so far.
func (c *Child) Output() string { return c.out.String() }
