package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/lab/console"
	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// chaosListener serves a process's admin listener with role's fault points
// and the chaos controls behind token.
func chaosListener(t *testing.T, role, token string) string {
	t.Helper()
	reg := chaos.NewRegistry()
	reg.Points(console.Points(role)...)
	r := admin.Handler(prometheus.NewRegistry(), nil)
	if err := chaos.Mount(r, reg, true, token); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

// paylab console --target compose reads the deployment's settings from the
// environment over .env — its mode, fixed there — holds no token of its
// own, and forwards the page's toggles to the processes, which decide.
func TestConsoleComposeTarget(t *testing.T) {
	const token = "token-of-the-deployment"
	admins := map[string]string{}
	for _, role := range []string{"orders", "ledger", "notifications"} {
		admins[role] = chaosListener(t, role, token)
		t.Setenv("CHAOS_"+strings.ToUpper(role)+"_ADMIN_URL", admins[role])
		t.Setenv(strings.ToUpper(role)+"_DATABASE_URL", testenv.NewDatabase(t, role))
	}
	t.Setenv("KAFKA_BROKERS", strings.Join(testenv.Brokers(), ","))
	t.Setenv("ORDERS_TOPIC", testenv.NewTopic(t, 2))
	dotEnv := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(dotEnv, []byte("OUTBOX_MODE=naive\nCHAOS_TOKEN="+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"console", "--target", "compose", "--env-file", dotEnv, "--addr", fmt.Sprintf("127.0.0.1:%d", port)}, &out)
	}()
	call := func(method, path, authorization, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	var st console.State
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("paylab console ended: %v\n%s", err, out.String())
		default:
		}
		if status, body := call(http.MethodGet, "/api/state", "", ""); status == http.StatusOK {
			_ = json.Unmarshal([]byte(body), &st)
			if len(st.Procs) == 3 && st.Procs[0].Up && st.Procs[1].Up && st.Procs[2].Up {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console did not show the deployment up: %+v", st)
		}
	}
	if st.Target != "compose" || st.Settings.Mode != "naive" || !strings.Contains(st.FixedMode, ".env") {
		t.Errorf("target %q, mode %q (from .env), fixed %q", st.Target, st.Settings.Mode, st.FixedMode)
	}
	const point = "/api/procs/orders/faults/orders.after_commit_before_publish"
	if status, body := call(http.MethodPut, point, "", `{"action":"crash","count":1}`); status != http.StatusUnauthorized {
		t.Errorf("a toggle without the token: %d %s", status, body)
	}
	orders := &chaos.Client{BaseURL: admins["orders"], Token: token}
	if s, err := orders.Status(ctx, "orders.after_commit_before_publish"); err != nil || s.Armed {
		t.Fatalf("armed without the token: %+v %v", s, err)
	}
	if status, body := call(http.MethodPut, point, "Bearer "+token, `{"action":"error","count":3}`); status != http.StatusOK {
		t.Errorf("a toggle with the token: %d %s", status, body)
	}
	if s, err := orders.Status(ctx, "orders.after_commit_before_publish"); err != nil || !s.Armed {
		t.Errorf("not armed with the token: %+v %v", s, err)
	}
	if status, body := call(http.MethodPost, "/api/mode", "Bearer "+token, `{"mode":"outbox"}`); status != http.StatusConflict || !strings.Contains(body, "OUTBOX_MODE=naive") {
		t.Errorf("the mode switch on compose: %d %s", status, body)
	}
	_, page := call(http.MethodGet, "/", "", "")
	_, state := call(http.MethodGet, "/api/state", "", "")
	for _, secret := range []string{token, "postgres://", strings.TrimPrefix(admins["orders"], "http://")} {
		if strings.Contains(page, secret) || strings.Contains(state, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("paylab console after Ctrl-C: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("paylab console did not stop")
	}
	if !strings.Contains(out.String(), "compose deployment, OUTBOX_MODE=naive") || strings.Contains(out.String(), token) {
		t.Errorf("output:\n%s", out.String())
	}

	for _, args := range [][]string{{"--target", "compose", "--mode", "naive"}, {"--target", "kubernetes"}} {
		if err := run(context.Background(), append([]string{"console"}, args...), &bytes.Buffer{}); err == nil {
			t.Errorf("paylab console %v: no error", args)
		}
	}
	if err := run(context.Background(), []string{"console", "stray"}, &bytes.Buffer{}); err != errUsage {
		t.Errorf("a stray argument: %v", err)
	}
}

// The compose settings are the environment over .env, as docker compose
// reads them: a variable set in both is the environment's, and a .env that
// is not there is no error unless it was asked for.
func TestConsoleEnvironmentWinsOverDotEnv(t *testing.T) {
	dotEnv := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(dotEnv, []byte("PAYLAB_CONSOLE_BOTH=file\nPAYLAB_CONSOLE_FILE=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PAYLAB_CONSOLE_BOTH", "environment")
	environ, err := readEnviron(dotEnv, true)
	if err != nil || environ["PAYLAB_CONSOLE_BOTH"] != "environment" || environ["PAYLAB_CONSOLE_FILE"] != "file" {
		t.Errorf("both %q, file only %q, error %v", environ["PAYLAB_CONSOLE_BOTH"], environ["PAYLAB_CONSOLE_FILE"], err)
	}
	missing := filepath.Join(t.TempDir(), ".env")
	if environ, err := readEnviron(missing, false); err != nil || environ["PAYLAB_CONSOLE_BOTH"] != "environment" {
		t.Errorf("no .env, not asked for: %v", err)
	}
	if _, err := readEnviron(missing, true); err == nil {
		t.Error("no .env, asked for: no error")
	}
}
