package apikey_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// BenchmarkMiddlewareCachedKey is what every request pays for its key once
// the key is cached: the header parsed, the hash computed and compared, the
// key's token bucket taken from. A payment costs a database transaction of
// about a millisecond; this is a few microseconds at most.
func BenchmarkMiddlewareCachedKey(b *testing.B) {
	pool, _ := testenv.NewPool(b, "orders")
	key, _, err := apikey.NewStore(pool).Create(context.Background(), "mer_7", "bench")
	if err != nil {
		b.Fatal(err)
	}
	fail := func(_ http.ResponseWriter, _ *http.Request, err error) { b.Fatal(err) }
	lim := apikey.NewLimiter(apikey.LimitConfig{Rate: 1e12, Burst: 1 << 30})
	h := apikey.Authenticate(apikey.NewAuthenticator(pool, apikey.AuthConfig{}), fail)(
		lim.Middleware(fail)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/payments", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	h.ServeHTTP(httptest.NewRecorder(), req) // caches the key
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := httptest.NewRecorder()
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}
