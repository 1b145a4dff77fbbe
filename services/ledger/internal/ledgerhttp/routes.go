// Package ledgerhttp is the ledger's read API: account balances and the
// journal entries of an order.
package ledgerhttp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/services/ledger/internal/ledgerdb"
)

// Security is how the read API admits requests: a merchant's API key
// (Keys), within its rate (Limiter, nil: no limit), a deadline per
// request (RequestTimeout, 0: none) and the longest wait for a pooled
// connection (AcquireTimeout, 0: DefaultAcquireTimeout).
type Security struct {
	Keys           *apikey.Authenticator
	Limiter        *apikey.Limiter
	RequestTimeout time.Duration
	AcquireTimeout time.Duration
}

// DefaultAcquireTimeout is Security.AcquireTimeout's default, the orders
// API's DATABASE_ACQUIRE_TIMEOUT.
const DefaultAcquireTimeout = 2 * time.Second

// errUnavailable: no pooled connection was free within the acquire timeout.
var errUnavailable = errors.New("the ledger's database is unavailable")

// Routes returns the read API:
//
//	GET /v1/accounts/{id}          balance per currency
//	GET /v1/orders/{id}/entries    journal entries with their postings
//
// as api/openapi.yaml documents them, for the merchant of the request's API
// key: its own account and orders, and nothing else (404, as for an
// unknown id). Errors, an unknown path or method included, are RFC 9457
// problem documents with a stable code.
func Routes(pool *pgxpool.Pool, log *slog.Logger, sec Security) http.Handler {
	a := &api{pool: pool, acquireTimeout: cmp.Or(sec.AcquireTimeout, DefaultAcquireTimeout), log: log}
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		problem(w, r, http.StatusNotFound, "route_not_found", "the ledger's read API has no such path")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodGet)
		problem(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "the ledger's read API only answers GET")
	})
	r.Group(func(r chi.Router) {
		r.Use(deadline(sec.RequestTimeout), apikey.Authenticate(sec.Keys, a.refuse), sec.Limiter.Middleware(a.refuse))
		r.Get("/v1/accounts/{id}", a.withConn(a.account))
		r.Get("/v1/orders/{id}/entries", a.withConn(a.entries))
	})
	return r
}

// deadline gives every request at most d (nothing when d is 0).
func deadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// refuse answers a request the key check or the rate limit refused.
func (a *api) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var limitErr *apikey.LimitError
	switch {
	case errors.Is(err, apikey.ErrMissing):
		problem(w, r, http.StatusUnauthorized, "unauthenticated", "the ledger's read API needs a merchant's API key: Authorization: Bearer <key>")
	case errors.Is(err, apikey.ErrInvalid):
		problem(w, r, http.StatusUnauthorized, "api_key_invalid", "the API key is not valid: malformed, unknown or revoked")
	case errors.Is(err, apikey.ErrInQuery):
		problem(w, r, http.StatusBadRequest, "api_key_in_query", "API keys go in the Authorization header, never in the query string: revoke a key sent there")
	case errors.As(err, &limitErr):
		problem(w, r, http.StatusTooManyRequests, "rate_limited", "the API key is over its request rate; retry after Retry-After seconds")
	default:
		a.log.ErrorContext(r.Context(), "ledger read: checking the API key", "path", r.URL.Path, "error", err)
		problem(w, r, http.StatusServiceUnavailable, "database_unavailable", "the ledger's database could not be read in time; retry")
	}
}

// merchantAccount is the account of the request key's merchant.
func merchantAccount(r *http.Request) string {
	p, _ := apikey.FromContext(r.Context())
	return "merchant:" + p.MerchantID
}

type api struct {
	pool           *pgxpool.Pool
	acquireTimeout time.Duration
	log            *slog.Logger
}

// withConn runs h on one pooled connection, released when h returns. It
// waits at most the acquire timeout for one: when a stuck database holds
// every pooled connection (the consumer's included), reads fail fast with
// 503 instead of piling up until their deadline.
func (a *api) withConn(h func(http.ResponseWriter, *http.Request, *ledgerdb.Queries)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, err := a.acquire(r.Context())
		if err != nil {
			a.fail(w, r, err)
			return
		}
		defer conn.Release()
		h(w, r, ledgerdb.New(conn))
	}
}

// acquire takes a connection from the pool within the acquire timeout; a
// timeout is errUnavailable.
func (a *api) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := dbpool.Acquire(ctx, a.pool, a.acquireTimeout)
	switch {
	case err == nil:
		return conn, nil
	case errors.Is(err, dbpool.ErrNoConnection):
		return nil, errors.Join(errUnavailable, err)
	default:
		return nil, fmt.Errorf("acquiring a database connection: %w", err)
	}
}

// Balance is an account's balance in one currency, in minor units.
type Balance struct {
	Currency string `json:"currency"`
	Balance  int64  `json:"balance"`
}

// Account is the body of GET /v1/accounts/{id}.
type Account struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Balances []Balance `json:"balances"`
}

// Posting is one line of an entry: credit positive, debit negative.
type Posting struct {
	AccountID string `json:"account_id"`
	Currency  string `json:"currency"`
	Amount    int64  `json:"amount"`
}

// Entry is a journal entry.
type Entry struct {
	ID        int64     `json:"id"`
	EventID   uuid.UUID `json:"event_id"`
	Kind      string    `json:"kind"`
	RefundID  *string   `json:"refund_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Postings  []Posting `json:"postings"`
}

// Entries is the body of GET /v1/orders/{id}/entries.
type Entries struct {
	OrderID string  `json:"order_id"`
	Entries []Entry `json:"entries"`
}

func (a *api) account(w http.ResponseWriter, r *http.Request, q *ledgerdb.Queries) {
	id := chi.URLParam(r, "id")
	if id != merchantAccount(r) {
		problem(w, r, http.StatusNotFound, "account_not_found", "no account "+id)
		return
	}
	acc, err := q.Account(r.Context(), id)
	if errors.Is(err, pgx.ErrNoRows) {
		problem(w, r, http.StatusNotFound, "account_not_found", "no account "+id)
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rows, err := q.AccountBalances(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := Account{ID: acc.ID, Kind: acc.Kind, Balances: make([]Balance, 0, len(rows))}
	for _, b := range rows {
		out.Balances = append(out.Balances, Balance{Currency: b.Currency, Balance: b.Balance})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) entries(w http.ResponseWriter, r *http.Request, q *ledgerdb.Queries) {
	id := chi.URLParam(r, "id")
	owner, err := q.OrderMerchant(r.Context(), id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		a.fail(w, r, err)
		return
	}
	var entries []ledgerdb.JournalEntry
	if err == nil && owner == merchantAccount(r) {
		if entries, err = q.OrderEntries(r.Context(), id); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	if len(entries) == 0 {
		problem(w, r, http.StatusNotFound, "order_not_found", "no journal entries for order "+id)
		return
	}
	postings, err := q.OrderPostings(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	byEntry := make(map[int64][]Posting, len(entries))
	for _, p := range postings {
		byEntry[p.EntryID] = append(byEntry[p.EntryID], Posting{AccountID: p.AccountID, Currency: p.Currency, Amount: p.Amount})
	}
	out := Entries{OrderID: id, Entries: make([]Entry, 0, len(entries))}
	for _, e := range entries {
		lines := byEntry[e.ID]
		if lines == nil {
			lines = []Posting{}
		}
		out.Entries = append(out.Entries, Entry{ID: e.ID, EventID: e.EventID, Kind: e.Kind, RefundID: e.RefundID,
			CreatedAt: e.CreatedAt.UTC(), Postings: lines})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	a.log.ErrorContext(r.Context(), "ledger read", "path", r.URL.Path, "error", err)
	if errors.Is(err, errUnavailable) {
		problem(w, r, http.StatusServiceUnavailable, "database_unavailable", "no connection to the ledger's database was free in time; retry")
		return
	}
	problem(w, r, http.StatusInternalServerError, "internal", "the ledger could not be read")
}

// Problem is the RFC 9457 problem document of an error, with a stable
// code (the orders API's shape, without a request id).
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
	Code     string `json:"code"`
}

// problem writes an RFC 9457 problem+json body.
func problem(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{
		Type: "urn:paylab:problem:" + code, Title: http.StatusText(status), Status: status, Detail: detail,
		Instance: r.URL.Path, Code: code,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
