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

	"github.com/paylab/paylab/services/ledger/internal/ledger"
)

// TestCrashAfterApplyBeforeOffsetCommit kills a real ledger process after
// its transaction committed and before the offset was committed. Kafka
// re-delivers the event to the restarted process: with the inbox it is
// skipped (one entry), without it it is applied again (two entries).
func TestCrashAfterApplyBeforeOffsetCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		inboxEnabled bool
		wantEntries  int
	}{
		{name: "inbox on: redelivery skipped", inboxEnabled: true, wantEntries: 1},
		{name: "inbox off: redelivery applied again", inboxEnabled: false, wantEntries: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 3)
			cfg := f.config(tc.inboxEnabled)
			e := captured("ord-crash", "cus_9", "mer_9", 4200, "EUR")
			f.publish(e)

			first := startChild(t, cfg, ledger.FaultAfterApplyBeforeOffsetCommit)
			if code := first.wait(t, 60*time.Second); code != crashCode {
				t.Fatalf("the ledger exited with %d, want the crash code %d\n%s", code, crashCode, first.out.String())
			}
			if got := f.count("SELECT count(*) FROM journal_entries WHERE event_id = $1", e.ID); got != 1 {
				t.Fatalf("entries at the crash = %d, want 1 (the transaction committed)", got)
			}

			second := startChild(t, cfg, "")
			eventually(t, 60*time.Second, "the redelivery", func() bool {
				return second.metric("paylab_inbox_processed_total")+second.metric("paylab_inbox_duplicates_total") >= 1
			})
			if got := f.count("SELECT count(*) FROM journal_entries WHERE event_id = $1", e.ID); got != tc.wantEntries {
				t.Errorf("entries after the restart = %d, want %d", got, tc.wantEntries)
			}
			wantDups := 0
			if tc.inboxEnabled {
				wantDups = 1
			}
			if got := second.metric("paylab_inbox_duplicates_total"); got != wantDups {
				t.Errorf("duplicates counted = %d, want %d", got, wantDups)
			}
			second.stop(t)
		})
	}
}

type child struct {
	cmd   *exec.Cmd
	out   *bytes.Buffer
	admin string
	done  chan error
}

// startChild runs this test binary as a ledger process (see TestMain).
func startChild(t *testing.T, cfg config, crashAt string) *child {
	t.Helper()
	adminAddr := freeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=1", crashAtEnv+"="+crashAt,
		"DATABASE_URL="+cfg.DatabaseURL, "KAFKA_BROKERS="+cfg.KafkaBrokers,
		"ORDERS_TOPIC="+cfg.OrdersTopic, "DEAD_LETTER_TOPIC="+cfg.DeadLetterTopic,
		"CONSUMER_GROUP="+cfg.ConsumerGroup, "HTTP_ADDR=127.0.0.1:0", "ADMIN_ADDR="+adminAddr,
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
			t.Logf("ledger process output:\n%s", c.out.String())
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
		t.Fatalf("the ledger process did not exit within %s\n%s", d, c.out.String())
		return -1
	}
}

// stop shuts the child down gracefully.
func (c *child) stop(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Errorf("the ledger exited with %d on SIGTERM", code)
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
