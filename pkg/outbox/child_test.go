package outbox_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
	"time"
)

// child is the running test binary started again as a relay process (see
// TestMain): tests crash it for real and check what survives.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan error
	gone bool // done was received
}

// startChild starts the child named name with env added to this process's
// environment. At cleanup it is killed if still running, and its output is
// logged when the test failed.
func startChild(t testing.TB, name string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	c := &child{name: name, cmd: cmd, out: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if !c.gone {
			_ = cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("%s process output:\n%s", name, c.out.String())
		}
	})
	return c
}

// kill kills the child at once (SIGKILL: no cleanup, a real crash) and
// waits until it is gone.
func (c *child) kill(t testing.TB) {
	t.Helper()
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
		c.gone = true
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s process did not exit within 30s\n%s", c.name, c.out.String())
	}
}
