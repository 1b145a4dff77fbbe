package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type child struct {
	cmd   *exec.Cmd
	out   *bytes.Buffer
	admin string
	done  chan error
}

// startChild runs this test binary as a notifications process (see TestMain).
func startChild(t *testing.T, cfg config, crashAt string) *child {
	t.Helper()
	adminAddr := freeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=1", crashAtEnv+"="+crashAt,
		"DATABASE_URL="+cfg.DatabaseURL, "KAFKA_BROKERS="+cfg.KafkaBrokers,
		"ORDERS_TOPIC="+cfg.OrdersTopic, "DEAD_LETTER_TOPIC="+cfg.DeadLetterTopic,
		"CONSUMER_GROUP="+cfg.ConsumerGroup, "ADMIN_ADDR="+adminAddr, "SMTP_ADDR="+cfg.SMTPAddr,
		"INBOX_ENABLED="+strconv.FormatBool(cfg.InboxEnabled))
	c := &child{cmd: cmd, out: &bytes.Buffer{}, admin: "http://" + adminAddr, done: make(chan error, 1)}
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
			t.Logf("notifications process output:\n%s", c.out.String())
		}
	})
	return c
}

// wait returns the exit code of the child.
func (c *child) wait(t *testing.T, d time.Duration) int {
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
		t.Fatalf("the notifications process did not exit within %s\n%s", d, c.out.String())
		return -1
	}
}

// stop shuts the child down gracefully.
func (c *child) stop(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Errorf("the service exited with %d on SIGTERM", code)
	}
}

// metric sums the samples of a counter on the child's /metrics (0 while the
// admin listener is not up yet).
func (c *child) metric(name string) int {
	resp, err := http.Get(c.admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var total float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			total += v
		}
	}
	return int(total)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
