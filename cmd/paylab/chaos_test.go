package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// The compose target reads the deployment's token from .env unless the
// environment sets it, checks it against the chaos controls before any
// scenario, and runs nothing the deployment cannot give.
func TestChaosRunComposeReadsDotEnv(t *testing.T) {
	listener := testenv.AdminListener(t, true, "token-of-the-deployment")
	for _, k := range []string{"CHAOS_ORDERS_ADMIN_URL", "CHAOS_LEDGER_ADMIN_URL", "CHAOS_NOTIFICATIONS_ADMIN_URL"} {
		t.Setenv(k, listener)
	}
	dir := t.TempDir()
	dotEnv := filepath.Join(dir, ".env")
	if err := os.WriteFile(dotEnv, []byte("# compose settings\nCHAOS_TOKEN=token-of-the-deployment\nOUTBOX_MODE=outbox\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chaosRun := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.MinWait)
		defer cancel()
		var out bytes.Buffer
		err := run(ctx, append([]string{"chaos", "run", "--target", "compose", "--env-file", dotEnv, "--out", dir}, args...), &out)
		return out.String(), err
	}

	out, err := chaosRun("kafka-down")
	if err == nil || !strings.Contains(err.Error(), "no scenario could run") || !strings.Contains(out, "SKIP kafka-down: stops Kafka") {
		t.Errorf("with the token from .env: %v\n%s", err, out)
	}
	t.Setenv("CHAOS_TOKEN", "the-environment-wins")
	if _, err := chaosRun("kafka-down"); err == nil || !strings.Contains(err.Error(), "refuses CHAOS_TOKEN") {
		t.Errorf("the environment's token did not win over .env: %v", err)
	}
	if err := run(context.Background(), []string{"chaos", "run", "--target", "compose", "--env-file", filepath.Join(dir, "missing"), "all"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Error("a missing --env-file given explicitly was ignored")
	}
	if err := run(context.Background(), []string{"chaos", "run", "--target", "kubernetes", "all"}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "not local or compose") {
		t.Errorf("--target kubernetes: %v", err)
	}
}
