package shop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
)

// ErrCheckedOut is returned for a cart that was checked out before.
var ErrCheckedOut = errors.New("cart already checked out")

// Carts checks carts out.
type Carts struct {
	pool   *pgxpool.Pool
	events *outbox.Writer
	topic  string
}

// NewCarts returns the cart service over pool, publishing to topic
// (TopicCartEvents unless tests want their own).
func NewCarts(pool *pgxpool.Pool, topic string) (*Carts, error) {
	w, err := outbox.NewWriter(OutboxConfig())
	if err != nil {
		return nil, err
	}
	return &Carts{pool: pool, events: w, topic: topic}, nil
}

// CheckedOut is the payload of a CartCheckedOut event.
type CheckedOut struct {
	CartID     string `json:"cart_id"`
	TotalCents int64  `json:"total_cents"`
}

// Checkout marks cart id checked out (creating it with total cents if it
// does not exist) and enqueues its CartCheckedOut event in the same
// transaction: both commit, or neither does. It returns the event as
// enqueued (with its ID).
func (c *Carts) Checkout(ctx context.Context, id string, totalCents int64) (outbox.Event, error) {
	var ev outbox.Event
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var seq int64
		err := tx.QueryRow(ctx, `
			INSERT INTO carts (id, status, total_cents, event_seq) VALUES ($1, 'checked_out', $2, 1)
			ON CONFLICT (id) DO UPDATE
			SET status = 'checked_out', event_seq = carts.event_seq + 1, updated_at = now()
			WHERE carts.status = 'open'
			RETURNING event_seq`, id, totalCents).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrCheckedOut
		}
		if err != nil {
			return fmt.Errorf("checking out cart %s: %w", id, err)
		}
		payload, err := json.Marshal(CheckedOut{CartID: id, TotalCents: totalCents})
		if err != nil {
			return err
		}
		events := []outbox.Event{{
			AggregateType: "cart",
			AggregateID:   id,
			Type:          TypeCartCheckedOut,
			Sequence:      seq,
			Topic:         c.topic,
			Payload:       payload,
		}}
		if err := c.events.Enqueue(ctx, tx, events...); err != nil { // sets the event's ID
			return err
		}
		ev = events[0]
		return nil
	})
	if err != nil {
		return outbox.Event{}, err
	}
	return ev, nil
}

// Routes serves POST /carts/{id}/checkout?total_cents=N.
func (c *Carts) Routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /carts/{id}/checkout", func(w http.ResponseWriter, r *http.Request) {
		var total int64
		if v := r.URL.Query().Get("total_cents"); v != "" {
			if _, err := fmt.Sscan(v, &total); err != nil || total < 0 {
				http.Error(w, "total_cents must be a non-negative integer", http.StatusBadRequest)
				return
			}
		}
		ev, err := c.Checkout(r.Context(), r.PathValue("id"), total)
		switch {
		case errors.Is(err, ErrCheckedOut):
			http.Error(w, err.Error(), http.StatusConflict)
			return
		case err != nil:
			http.Error(w, "checkout failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"event_id": ev.ID.String()})
	})
	return mux
}
