package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/internal/platform/apikey/internal/apikeydb"
)

// DB is a database handle: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Info describes a stored key; the key itself is never stored.
type Info struct {
	ID         string     `json:"id"`
	MerchantID string     `json:"merchant_id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Store is the api_keys table of the databases that accept the keys (the
// orders database first, then the ledger's): a key is created in each, and
// revoked in each.
type Store struct {
	dbs []DB
}

// NewStore returns the store of dbs; the first is the one listed.
func NewStore(dbs ...DB) *Store { return &Store{dbs: dbs} }

// Create makes a key for merchant, stores its hash in every database and
// returns the key, which nothing can show again.
func (s *Store) Create(ctx context.Context, merchant, name string) (string, Info, error) {
	if !ValidMerchant(merchant) {
		return "", Info{}, fmt.Errorf("merchant %q: a merchant id is 1-64 of [A-Za-z0-9_-], starting with a letter or digit", merchant)
	}
	if len(s.dbs) == 0 {
		return "", Info{}, errors.New("creating an API key: no database")
	}
	key, id, err := generate()
	if err != nil {
		return "", Info{}, err
	}
	h := hash(key)
	row, err := apikeydb.New(s.dbs[0]).CreateAPIKey(ctx, apikeydb.CreateAPIKeyParams{ID: id, MerchantID: merchant, Name: name, Hash: h})
	if err != nil {
		return "", Info{}, fmt.Errorf("storing API key %s: %w", id, err)
	}
	info := Info{ID: row.ID, MerchantID: row.MerchantID, Name: row.Name, CreatedAt: row.CreatedAt.UTC()}
	for _, db := range s.dbs[1:] {
		err := apikeydb.New(db).InsertAPIKey(ctx, apikeydb.InsertAPIKeyParams{
			ID: id, MerchantID: merchant, Name: name, Hash: h, CreatedAt: row.CreatedAt,
		})
		if err != nil {
			// The key is never shown; revoke it where it was stored.
			_, rerr := s.Revoke(context.WithoutCancel(ctx), id)
			return "", Info{}, errors.Join(fmt.Errorf("storing API key %s: %w", id, err), rerr)
		}
	}
	return key, info, nil
}

// List returns the keys of merchant (every key when merchant is empty),
// oldest first, as the first database has them.
func (s *Store) List(ctx context.Context, merchant string) ([]Info, error) {
	if len(s.dbs) == 0 {
		return nil, errors.New("listing API keys: no database")
	}
	rows, err := apikeydb.New(s.dbs[0]).ListAPIKeys(ctx, merchant)
	if err != nil {
		return nil, fmt.Errorf("listing API keys: %w", err)
	}
	out := make([]Info, 0, len(rows))
	for _, r := range rows {
		i := Info{ID: r.ID, MerchantID: r.MerchantID, Name: r.Name, CreatedAt: r.CreatedAt.UTC(), RevokedAt: r.RevokedAt}
		if i.RevokedAt != nil {
			t := i.RevokedAt.UTC()
			i.RevokedAt = &t
		}
		out = append(out, i)
	}
	return out, nil
}

// Revoke revokes the key with id in every database. It reports whether any
// database had the key active; revoking a revoked key changes nothing.
func (s *Store) Revoke(ctx context.Context, id string) (bool, error) {
	var (
		revoked bool
		errs    []error
	)
	for _, db := range s.dbs {
		n, err := apikeydb.New(db).RevokeAPIKey(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("revoking API key %s: %w", id, err))
		}
		revoked = revoked || n > 0
	}
	return revoked, errors.Join(errs...)
}

// Check reports whether key is an active key of the first database (the
// key's shape, its hash and that it is not revoked), and its merchant.
func (s *Store) Check(ctx context.Context, key string) (string, bool, error) {
	if len(s.dbs) == 0 {
		return "", false, errors.New("checking an API key: no database")
	}
	p, err := NewAuthenticator(s.dbs[0], AuthConfig{}).Authenticate(ctx, key)
	switch {
	case errors.Is(err, ErrInvalid):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return p.MerchantID, true, nil
}
