package reconcile_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// flakyProxy forwards TCP connections to a server, except the first few,
// which it resets as a server going away does.
type flakyProxy struct {
	addr             string
	reset, forwarded atomic.Int32
}

func startFlakyProxy(t *testing.T, target string, resets int32) *flakyProxy {
	t.Helper()
	ln := testenv.Listen(t)
	p := &flakyProxy{addr: ln.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.reset.Load() < resets {
				p.reset.Add(1)
				_ = c.(*net.TCPConn).SetLinger(0)
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.forwarded.Add(1)
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	return p
}

func TestSettleReadsOnceTheDatabaseAnswersAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	u, err := url.Parse(f.src.OrdersURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startFlakyProxy(t, u.Host, 3)
	u.Host = proxy.addr
	src := f.src
	src.OrdersURL = u.String()
	rep, err := reconcile.Settle(testenv.Context(t), src, time.Minute, 0)
	if err != nil {
		t.Fatalf("Settle through a server that resets its first connections: %v", err)
	}
	if !rep.Settled || rep.Captures != 1 || rep.Ledger.Applied != 1 || rep.Notifications.Applied != 1 {
		t.Fatalf("report %+v; want the fixture's capture, applied once everywhere", rep)
	}
	if reset, forwarded := proxy.reset.Load(), proxy.forwarded.Load(); reset != 3 || forwarded == 0 {
		t.Fatalf("the orders database saw %d connections reset and %d forwarded; want 3 and some", reset, forwarded)
	}
}
