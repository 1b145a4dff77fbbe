package apikey

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// LimitConfig is a per-key request rate: a token bucket of Burst requests
// refilled at Rate per second. A Rate of zero or less sets no limit.
type LimitConfig struct {
	Rate  float64
	Burst int
}

// Limiter keeps one token bucket per key.
type Limiter struct {
	limit   rate.Limit
	burst   int
	buckets sync.Map // key id → *rate.Limiter
}

// NewLimiter returns the limiter of cfg; nil when cfg sets no limit.
func NewLimiter(cfg LimitConfig) *Limiter {
	if cfg.Rate <= 0 {
		return nil
	}
	burst := cfg.Burst
	if burst < 1 {
		burst = max(1, int(math.Ceil(cfg.Rate)))
	}
	return &Limiter{limit: rate.Limit(cfg.Rate), burst: burst}
}

// LimitError is a request over its key's rate.
type LimitError struct {
	// RetryAfter is when the key's bucket has a token again.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("request rate limit of the API key exceeded; retry after %s", e.RetryAfter)
}

// Allow takes a token from the bucket of keyID, or returns the wait until
// there is one.
func (l *Limiter) Allow(keyID string) (time.Duration, bool) {
	b, ok := l.buckets.Load(keyID)
	if !ok {
		b, _ = l.buckets.LoadOrStore(keyID, rate.NewLimiter(l.limit, l.burst))
	}
	now := time.Now()
	res := b.(*rate.Limiter).ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

// Middleware refuses a request whose key (the Principal of Authenticate,
// which must run first) is over its rate with a *LimitError, after setting
// Retry-After (whole seconds, at least 1). A nil Limiter passes every
// request on.
func (l *Limiter) Middleware(fail Fail) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, _ := FromContext(r.Context())
			if wait, ok := l.Allow(p.KeyID); !ok {
				secs := max(1, int(math.Ceil(wait.Seconds())))
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				fail(w, r, &LimitError{RetryAfter: wait})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
