package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// testEnv is a bench environment on the local stack (cfg's AdminURL and
// Brokers set to it), closed when the test ends, with a context bounded by
// timeout.
func testEnv(t *testing.T, cfg Config, timeout time.Duration) (*env, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cfg.AdminURL, cfg.Brokers = testenv.AdminURL(), testenv.Brokers()
	e, err := newEnv(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.close(); err != nil {
			t.Error(err)
		}
	})
	return e, ctx
}

// envInt is the integer in the environment variable name, or def when it is
// unset or not a positive number.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
