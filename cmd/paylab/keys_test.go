package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// paylab keys create prints a key once, which both APIs' databases accept;
// list shows it without the key; revoke refuses it in both. Not parallel:
// it sets the environment.
func TestKeysCreateListRevoke(t *testing.T) {
	orders, ordersURL := testenv.NewPool(t, "orders")
	ledger, ledgerURL := testenv.NewPool(t, "ledger")
	t.Setenv("ORDERS_DATABASE_URL", ordersURL)
	t.Setenv("LEDGER_DATABASE_URL", ledgerURL)
	ctx := testenv.Context(t)

	var out bytes.Buffer
	if err := run(ctx, []string{"keys", "create", "--merchant", "mer_7", "--name", "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	key, _, _ := strings.Cut(out.String(), "\n")
	id, ok := apikey.ParseID(key)
	if !ok {
		t.Fatalf("create printed %q, want the key first", out.String())
	}
	for name, db := range map[string]apikey.DB{"orders": orders, "ledger": ledger} {
		if p, err := apikey.NewAuthenticator(db, apikey.AuthConfig{}).Authenticate(ctx, key); err != nil || p.MerchantID != "mer_7" {
			t.Fatalf("%s: the new key: %+v, %v", name, p, err)
		}
	}
	out.Reset()
	if err := run(ctx, []string{"keys", "list", "--merchant", "mer_7"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), id) || !strings.Contains(out.String(), "shop") || strings.Contains(out.String(), key) {
		t.Fatalf("list = %q, want the id and name and never the key", out.String())
	}
	if err := run(ctx, []string{"keys", "revoke", id}, &out); err != nil {
		t.Fatal(err)
	}
	for name, db := range map[string]apikey.DB{"orders": orders, "ledger": ledger} {
		if _, err := apikey.NewAuthenticator(db, apikey.AuthConfig{}).Authenticate(ctx, key); err != apikey.ErrInvalid {
			t.Fatalf("%s: the revoked key: %v", name, err)
		}
	}
	if err := run(ctx, []string{"keys", "revoke", id}, &out); err == nil {
		t.Fatal("revoking a revoked key succeeded")
	}
	for _, args := range [][]string{{"keys"}, {"keys", "create"}, {"keys", "revoke"}, {"keys", "nope"}} {
		if err := run(ctx, args, &out); err != errUsage {
			t.Errorf("run(%q) = %v, want the usage", args, err)
		}
	}
	if err := run(ctx, []string{"keys", "create", "--merchant", "mer 7"}, &out); err == nil {
		t.Error("a key for an invalid merchant id")
	}
}

// init's demo key: created and written to its file once, printed again by
// the next runs while it is active, made anew once it is revoked.
func TestEnsureDemoKey(t *testing.T) {
	t.Parallel()
	orders, _ := testenv.NewPool(t, "orders")
	ledger, _ := testenv.NewPool(t, "ledger")
	store := apikey.NewStore(orders, ledger)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "keys", "demo-api-key")
	demo := func() string {
		t.Helper()
		var out bytes.Buffer
		if err := ensureDemoKey(ctx, store, "mer_7", file, &out); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if key, ok := strings.CutPrefix(line, demoKeyLine); ok {
				return key
			}
		}
		t.Fatalf("no %s line in %q", demoKeyLine, out.String())
		return ""
	}
	first := demo()
	if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != first {
		t.Fatalf("the file holds %q (%v), want the key", b, err)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the file's mode: %v %v", info, err)
	}
	if again := demo(); again != first {
		t.Fatalf("the second run made another key")
	}
	id, _ := apikey.ParseID(first)
	if _, err := store.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	if third := demo(); third == first {
		t.Fatal("a revoked demo key was printed again")
	} else if m, ok, err := store.Check(ctx, third); err != nil || !ok || m != "mer_7" {
		t.Fatalf("the new demo key: %q %v %v", m, ok, err)
	}
	// "-": no file, a new key each run.
	var out bytes.Buffer
	if err := ensureDemoKey(ctx, store, "mer_7", noDemoKeyFile, &out); err != nil || !strings.Contains(out.String(), demoKeyLine+apikey.Prefix) {
		t.Fatalf("without a file: %v %q", err, out.String())
	}
}
