package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgconn"
)

// Retries while settling: a failed read is tried again after a pause that
// starts at retryPause and doubles up to maxRetryPause; a read of the
// databases gets at most dbAttemptTimeout, so that one that hangs (a DNS
// query that gets no answer, a connection to an address that drops packets)
// is retried too. (The topic's read takes as long as the topic is big; the
// Kafka client's own network timeouts bound its hangs.)
const (
	retryPause       = 250 * time.Millisecond
	maxRetryPause    = 5 * time.Second
	dbAttemptTimeout = time.Minute
)

// transient reports whether err means a server could not be reached for the
// moment — its name did not resolve, it refused or dropped the connection,
// it is starting or shutting down, a single attempt timed out, a Kafka
// broker answered with an error while it recovers — rather than that it
// refused what was asked (an authentication failure, a database that does
// not exist, a SQL error), which no retry fixes.
func transient(err error) bool {
	var (
		pgErr   *pgconn.PgError
		connErr *pgconn.ConnectError
		dnsErr  *net.DNSError
		opErr   *net.OpError
		netErr  net.Error
		kErr    sarama.KError
	)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &pgErr):
		// The server answered. Class 08: connection exception; 57P01-03:
		// admin shutdown, crash shutdown, cannot connect now (starting up);
		// 53300: too many connections. Anything else it refused for good.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	case errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &dnsErr), // "no such host" too: a container being restarted has no name for a moment
		errors.As(err, &opErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	case errors.As(err, &connErr):
		// Connecting failed without an answer from the server (that would
		// be a PgError, above): the network's doing.
		return true
	case errors.As(err, &kErr),
		errors.Is(err, sarama.ErrOutOfBrokers), errors.Is(err, sarama.ErrNotConnected),
		errors.Is(err, sarama.ErrBrokerNotFound), errors.Is(err, sarama.ErrIncompleteResponse),
		errors.Is(err, sarama.ErrControllerNotAvailable):
		// A broker that just restarted answers with errors (no leader yet,
		// stale metadata) until its cluster has caught up.
		return true
	}
	// pgx knows when a failed statement never reached the server.
	return pgconn.SafeToRetry(err)
}

// retriesError is a read that failed transiently until the deadline.
type retriesError struct {
	failures int
	last     error // the last failure not cut short by the deadline
}

func (e *retriesError) Error() string {
	return fmt.Sprintf("%d attempts failed, the last: %v", e.failures, e.last)
}

func (e *retriesError) Unwrap() error { return e.last }

// retry calls attempt until it succeeds, fails with an error that is not
// transient (returned as it is), or ctx ends; each attempt gets at most
// timeout, unless it is 0. When ctx ends after transient failures, the
// error is a *retriesError with the last of them; when it ends before any,
// it is ctx's error.
func retry(ctx context.Context, timeout time.Duration, attempt func(context.Context) error) error {
	attemptContext := func() (context.Context, context.CancelFunc) {
		if timeout > 0 {
			return context.WithTimeout(ctx, timeout)
		}
		return context.WithCancel(ctx)
	}
	var failed *retriesError
	for {
		actx, cancel := attemptContext()
		err := attempt(actx)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil || expired(ctx):
			// ctx ended, maybe in the middle of the attempt: its error says
			// nothing about the server. A dial bounded by ctx's deadline
			// reports an i/o timeout when the deadline passes, which can be a
			// moment before ctx itself is done.
			<-ctx.Done()
		case !transient(err):
			return err
		default:
			if failed == nil {
				failed = &retriesError{}
			}
			failed.failures++
			failed.last = err
			sleep(ctx, min(retryPause<<min(failed.failures-1, 5), maxRetryPause))
		}
		if ctx.Err() != nil {
			if failed != nil {
				return failed
			}
			return ctx.Err()
		}
	}
}

// expired reports whether ctx's deadline has passed.
func expired(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
