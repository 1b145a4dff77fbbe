package apikey_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// setup returns a key store on fresh orders and ledger databases.
type bundle struct {
	store          *apikey.Store
	orders, ledger apikey.DB
	ordersURL      string
}

func setup(t *testing.T) bundle {
	t.Helper()
	orders, ordersURL := testenv.NewPool(t, "orders")
	ledger, _ := testenv.NewPool(t, "ledger")
	return bundle{store: apikey.NewStore(orders, ledger), orders: orders, ledger: ledger, ordersURL: ordersURL}
}

// A created key has the prefix and shape, is stored only as its hash in
// both databases, authenticates as its merchant there, and is refused
// once revoked.
func TestCreateAuthenticateRevoke(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t)
	key, info, err := b.store.Create(ctx, "mer_7", "test")
	if err != nil {
		t.Fatal(err)
	}
	id, ok := apikey.ParseID(key)
	if !ok || id != info.ID || !strings.HasPrefix(key, apikey.Prefix) || len(key) != apikey.KeyLen || info.MerchantID != "mer_7" {
		t.Fatalf("key %q (id %q, %v), info %+v", key, id, ok, info)
	}
	for name, db := range map[string]apikey.DB{"orders": b.orders, "ledger": b.ledger} {
		var stored int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE id = $1 AND merchant_id = 'mer_7'
			AND hash = sha256($2::text::bytea) AND position($2 in concat_ws(' ', id, merchant_id, name, encode(hash, 'escape'))) = 0`,
			id, key).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != 1 {
			t.Fatalf("%s: %d rows hold the key's hash (and not the key), want 1", name, stored)
		}
		p, err := apikey.NewAuthenticator(db, apikey.AuthConfig{}).Authenticate(ctx, key)
		if err != nil || p.MerchantID != "mer_7" || p.KeyID != id {
			t.Fatalf("%s: Authenticate = %+v, %v", name, p, err)
		}
	}
	// A wrong secret with the right id, an unknown id, a malformed key.
	wrong := key[:len(key)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(key, "a")]
	other, _, err := apikey.NewStore(b.orders).Create(ctx, "mer_8", "")
	if err != nil {
		t.Fatal(err)
	}
	unknown := apikey.Prefix + "0000000000000000" + other[len(apikey.Prefix)+16:]
	auth := apikey.NewAuthenticator(b.orders, apikey.AuthConfig{})
	for _, k := range []string{wrong, unknown, "plk_x", "", key + "a", strings.ToUpper(key)} {
		if _, err := auth.Authenticate(ctx, k); !errors.Is(err, apikey.ErrInvalid) {
			t.Errorf("Authenticate(%q) = %v, want ErrInvalid", k, err)
		}
	}
	if revoked, err := b.store.Revoke(ctx, id); err != nil || !revoked {
		t.Fatalf("Revoke = %v, %v", revoked, err)
	}
	if revoked, err := b.store.Revoke(ctx, id); err != nil || revoked {
		t.Fatalf("second Revoke = %v, %v, want false", revoked, err)
	}
	for name, db := range map[string]apikey.DB{"orders": b.orders, "ledger": b.ledger} {
		if _, err := apikey.NewAuthenticator(db, apikey.AuthConfig{}).Authenticate(ctx, key); !errors.Is(err, apikey.ErrInvalid) {
			t.Errorf("%s: a revoked key: %v, want ErrInvalid", name, err)
		}
	}
	keys, err := b.store.List(ctx, "mer_7")
	if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil || keys[0].Name != "test" {
		t.Fatalf("List = %+v, %v", keys, err)
	}
	if all, err := b.store.List(ctx, ""); err != nil || len(all) != 2 {
		t.Fatalf("List all = %+v, %v", all, err)
	}
}

func TestCreateRefusesABadMerchant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, m := range []string{"", "-x", "mer 7", strings.Repeat("m", 65)} {
		if _, _, err := b.store.Create(testenv.Context(t), m, ""); err == nil {
			t.Errorf("Create(%q) succeeded", m)
		}
	}
}

// The cache reads a key's row once per TTL however many requests use it;
// a revocation takes effect when the TTL runs out.
func TestAuthenticatorCaches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t)
	key, info, err := b.store.Create(ctx, "mer_7", "")
	if err != nil {
		t.Fatal(err)
	}
	pool, stmts := testenv.CountingPool(t, b.ordersURL)
	const ttl = 500 * time.Millisecond
	auth := apikey.NewAuthenticator(pool, apikey.AuthConfig{TTL: ttl})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 200 {
		wg.Go(func() {
			if _, err := auth.Authenticate(ctx, key); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := stmts.Total(); n != 1 {
		t.Fatalf("200 authentications ran %d statements, want 1", n)
	}
	if _, err := b.store.Revoke(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Authenticate(ctx, key); err != nil {
		t.Fatalf("within the TTL the cached key still works: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := auth.Authenticate(ctx, key)
		if errors.Is(err, apikey.ErrInvalid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still authenticates after the TTL: %v", err)
		}
		time.Sleep(ttl / 5)
	}
}

// A database that cannot be read is ErrUnavailable, not ErrInvalid: the
// API answers 503, not 401.
func TestAuthenticatorUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, _, err := b.store.Create(testenv.Context(t), "mer_7", "")
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := testenv.CountingPool(t, b.ordersURL)
	pool.Close()
	_, err = apikey.NewAuthenticator(pool, apikey.AuthConfig{}).Authenticate(testenv.Context(t), key)
	if !errors.Is(err, apikey.ErrUnavailable) || errors.Is(err, apikey.ErrInvalid) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

// A cached key keeps working past its TTL while the table cannot be read,
// for StaleIfError; after that, and for a key never read, ErrUnavailable.
func TestAuthenticatorServesStaleRowsWhileTheTableCannotBeRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, _, err := b.store.Create(testenv.Context(t), "mer_7", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	pool, _ := testenv.CountingPool(t, b.ordersURL)
	const ttl, stale = 50 * time.Millisecond, 2 * time.Second
	auth := apikey.NewAuthenticator(pool, apikey.AuthConfig{TTL: ttl, StaleIfError: stale, LookupTimeout: 200 * time.Millisecond})
	if _, err := auth.Authenticate(ctx, key); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	time.Sleep(2 * ttl)
	if p, err := auth.Authenticate(ctx, key); err != nil || p.MerchantID != "mer_7" {
		t.Fatalf("past the TTL, the table unreadable: %+v, %v; want the cached key", p, err)
	}
	testenv.Eventually(t, 10*time.Second, "the stale row expired", func() bool {
		_, err := auth.Authenticate(ctx, key)
		return errors.Is(err, apikey.ErrUnavailable)
	})
}

// The middleware: the challenges of a missing and a bad key, a key in the
// query refused even with a good header, the principal passed on, and
// the per-key rate limit with Retry-After.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t)
	key, info, err := b.store.Create(ctx, "mer_7", "")
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := b.store.Create(ctx, "mer_8", "")
	if err != nil {
		t.Fatal(err)
	}
	var failed error
	fail := func(w http.ResponseWriter, _ *http.Request, err error) {
		failed = err
		w.WriteHeader(http.StatusTeapot)
	}
	lim := apikey.NewLimiter(apikey.LimitConfig{Rate: 0.5, Burst: 2})
	h := apikey.Authenticate(apikey.NewAuthenticator(b.orders, apikey.AuthConfig{}), fail)(
		lim.Middleware(fail)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, _ := apikey.FromContext(r.Context())
			w.Header().Set("X-Merchant", p.MerchantID)
		})))
	send := func(target string, auth ...string) *httptest.ResponseRecorder {
		failed = nil
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
		for _, a := range auth {
			req.Header.Add("Authorization", a)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct {
		name      string
		target    string
		auth      []string
		want      error
		challenge string
	}{
		{"no header", "/", nil, apikey.ErrMissing, `Bearer realm="paylab"`},
		{"basic", "/", []string{"Basic Zm9vOmJhcg=="}, apikey.ErrInvalid, `Bearer realm="paylab", error="invalid_token"`},
		{"empty bearer", "/", []string{"Bearer "}, apikey.ErrInvalid, `Bearer realm="paylab", error="invalid_token"`},
		{"two headers", "/", []string{"Bearer " + key, "Bearer " + key}, apikey.ErrInvalid, `Bearer realm="paylab", error="invalid_token"`},
		{"unknown key", "/", []string{"Bearer " + key[:len(key)-2] + "zz"}, apikey.ErrInvalid, `Bearer realm="paylab", error="invalid_token"`},
		{"key in query", "/?api_key=" + key, []string{"Bearer " + key}, apikey.ErrInQuery, `Bearer realm="paylab", error="invalid_request"`},
		{"token parameter", "/?access_token=x", []string{"Bearer " + key}, apikey.ErrInQuery, `Bearer realm="paylab", error="invalid_request"`},
		{"key under another name", "/?q=" + key, nil, apikey.ErrInQuery, `Bearer realm="paylab", error="invalid_request"`},
	} {
		rec := send(tc.target, tc.auth...)
		if !errors.Is(failed, tc.want) || rec.Header().Get("WWW-Authenticate") != tc.challenge || rec.Header().Get("X-Merchant") != "" {
			t.Errorf("%s: error %v, challenge %q; want %v, %q", tc.name, failed, rec.Header().Get("WWW-Authenticate"), tc.want, tc.challenge)
		}
	}
	// Burst 2: two pass, the third waits about 2 s; another key has its own bucket.
	for i := range 2 {
		if rec := send("/", "bearer "+key); failed != nil || rec.Header().Get("X-Merchant") != info.MerchantID {
			t.Fatalf("request %d: %v", i, failed)
		}
	}
	rec := send("/", "Bearer "+key)
	var le *apikey.LimitError
	if !errors.As(failed, &le) || le.RetryAfter <= 0 || le.RetryAfter > 2*time.Second || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("third request: %v, Retry-After %q", failed, rec.Header().Get("Retry-After"))
	}
	if rec := send("/", "Bearer "+other); failed != nil || rec.Header().Get("X-Merchant") != "mer_8" {
		t.Fatalf("another key: %v", failed)
	}
}

func TestParseID(t *testing.T) {
	t.Parallel()
	good := apikey.Prefix + "0123456789abcdef_" + strings.Repeat("a2", 26)
	if id, ok := apikey.ParseID(good); !ok || id != "0123456789abcdef" {
		t.Fatalf("ParseID(%q) = %q, %v", good, id, ok)
	}
	for _, bad := range []string{
		"", good[:len(good)-1], "plx_" + good[4:], strings.Replace(good, "_a2", "-a2", 1),
		strings.Replace(good, "0123", "012G", 1), good[:len(good)-1] + "1", good[:len(good)-1] + "A",
	} {
		if _, ok := apikey.ParseID(bad); ok {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
}
