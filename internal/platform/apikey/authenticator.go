package apikey

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/singleflight"

	"github.com/paylab/paylab/internal/platform/apikey/internal/apikeydb"
)

// ErrUnavailable: the key could not be checked because its database could
// not be read; the request may be retried.
var ErrUnavailable = errors.New("API keys cannot be read")

// Principal is who a request acts for: the key that authenticated it and
// the key's merchant.
type Principal struct {
	KeyID      string
	MerchantID string
}

// AuthConfig configures an Authenticator; the zero value is usable.
type AuthConfig struct {
	// TTL is how long a key's row (or its absence) is cached: a revoked
	// key is refused at most TTL after its revocation. Default 10 s.
	TTL time.Duration
	// LookupTimeout bounds one read of the table. Default 2 s.
	LookupTimeout time.Duration
	// MaxEntries bounds the cache; when it is full the cache starts over.
	// Default 100 000.
	MaxEntries int
	// StaleIfError is how long past its TTL a cached row is still used
	// when the table cannot be read (a saturated pool, a failover), so that
	// keys in use keep working through a short outage of their table.
	// Default 1 min.
	StaleIfError time.Duration
}

func (c AuthConfig) withDefaults() AuthConfig {
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.LookupTimeout <= 0 {
		c.LookupTimeout = 2 * time.Second
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = 100_000
	}
	if c.StaleIfError <= 0 {
		c.StaleIfError = time.Minute
	}
	return c
}

// Authenticator checks keys against the api_keys table of one database,
// through a cache.
type Authenticator struct {
	q     *apikeydb.Queries
	cfg   AuthConfig
	group singleflight.Group

	mu    sync.RWMutex
	cache map[string]entry
}

// entry is the cached row of one key id; hash is nil when no active key
// has the id.
type entry struct {
	merchant string
	hash     []byte
	expires  time.Time
}

// NewAuthenticator returns an Authenticator that reads db's api_keys.
func NewAuthenticator(db DB, cfg AuthConfig) *Authenticator {
	return &Authenticator{q: apikeydb.New(db), cfg: cfg.withDefaults(), cache: map[string]entry{}}
}

// Authenticate returns the principal of key: ErrInvalid when key is not an
// active key (malformed, unknown, revoked or a wrong secret), an error
// wrapping ErrUnavailable when the table could not be read.
func (a *Authenticator) Authenticate(ctx context.Context, key string) (Principal, error) {
	id, ok := ParseID(key)
	if !ok {
		return Principal{}, ErrInvalid
	}
	e, err := a.entry(ctx, id)
	if err != nil {
		return Principal{}, err
	}
	got := hash(key)
	if e.hash == nil || subtle.ConstantTimeCompare(got, e.hash) != 1 {
		return Principal{}, ErrInvalid
	}
	return Principal{KeyID: id, MerchantID: e.merchant}, nil
}

// entry returns the cached row of id, reading it when it is missing or
// stale; concurrent readers of one id share one query. When the read fails,
// a stale row not older than StaleIfError past its TTL is used.
func (a *Authenticator) entry(ctx context.Context, id string) (entry, error) {
	now := time.Now()
	a.mu.RLock()
	e, ok := a.cache[id]
	a.mu.RUnlock()
	if ok && now.Before(e.expires) {
		return e, nil
	}
	ch := a.group.DoChan(id, func() (any, error) {
		// Detached from the first caller: the others wait on the same read.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.LookupTimeout)
		defer cancel()
		return a.load(lctx, id)
	})
	select {
	case <-ctx.Done():
		return entry{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			if ok && now.Before(e.expires.Add(a.cfg.StaleIfError)) {
				return e, nil
			}
			return entry{}, r.Err
		}
		return r.Val.(entry), nil
	}
}

func (a *Authenticator) load(ctx context.Context, id string) (entry, error) {
	row, err := a.q.LookupAPIKey(ctx, id)
	e := entry{expires: time.Now().Add(a.cfg.TTL)}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return entry{}, fmt.Errorf("%w: looking up API key %s: %w", ErrUnavailable, id, err)
	case !row.Revoked:
		e.merchant, e.hash = row.MerchantID, row.Hash
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= a.cfg.MaxEntries {
		clear(a.cache)
	}
	a.cache[id] = e
	return e, nil
}
