package supervise_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/lab/supervise"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// TestMain doubles as the supervised program: with SUPERVISE_TEST_ADDR set it
// serves /readyz there until killed.
func TestMain(m *testing.M) {
	if addr := os.Getenv("SUPERVISE_TEST_ADDR"); addr != "" {
		http.HandleFunc("/readyz", func(http.ResponseWriter, *http.Request) {})
		_ = http.ListenAndServe(addr, nil)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func TestKillAndRestart(t *testing.T) {
	t.Parallel()
	addr := testenv.ClosedAddr(t)
	p := &supervise.Process{
		Name: "child", Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env:      []string{"SUPERVISE_TEST_ADDR=" + addr},
		ReadyURL: fmt.Sprintf("http://%s/readyz", addr),
		Restart:  true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(5 * time.Second)
	first := p.Pid()

	p.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for p.Restarts() == 0 || p.Pid() == first {
		if time.Now().After(deadline) {
			t.Fatal("not restarted after SIGKILL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("not ready after restart: %v", err)
	}
	if p.Restarts() != 1 {
		t.Fatalf("restarts = %d, want 1", p.Restarts())
	}
}

// A process whose readiness checks take longer than a second to answer is
// still found ready: the poll waits for the answer instead of giving up on
// every one of them. And the poll ends with its context, whatever the
// process does.
func TestWaitReadyWaitsForASlowAnswerAndNoLongerThanItsContext(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(1500 * time.Millisecond): // longer than one answer was allowed before
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := supervise.WaitReady(ctx, "slow", slow.URL); err != nil {
		t.Fatalf("a process answering ready after 1.5 s: %v", err)
	}

	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hung.Close()
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	done := make(chan error, 1)
	go func() { done <- supervise.WaitReady(short, "hung", hung.URL) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a process that never answers was found ready")
		}
	case <-time.After(8 * time.Second): // under the poll's 10 s per answer
		t.Fatal("the poll outlived its context")
	}
}
