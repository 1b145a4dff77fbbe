package orderapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderdb"
)

// PlacePayment creates an order and captures it in one transaction, in one
// statement: one OrderCaptured event.
func (s *Service) PlacePayment(ctx context.Context, n order.NewOrder, opts Options) (Outcome[order.Order], error) {
	if err := n.Validate(); err != nil {
		return Outcome[order.Order]{}, err
	}
	return outcome[order.Order](s.execute(ctx, OpPlacePayment, opts, func(ctx context.Context, q *orderdb.Queries) (any, []outbox.Event, error) {
		row, err := q.PlaceCapturedOrder(ctx, orderdb.PlaceCapturedOrderParams{
			ID: newID(), CustomerID: n.CustomerID, MerchantID: n.MerchantID, Amount: n.Amount, Currency: n.Currency,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("placing payment: %w", err)
		}
		return captured(FromDB(row))
	}))
}

// CreateOrder creates an order whose payment is authorized. It emits no
// event: nothing has happened to money yet.
func (s *Service) CreateOrder(ctx context.Context, n order.NewOrder, opts Options) (Outcome[order.Order], error) {
	if err := n.Validate(); err != nil {
		return Outcome[order.Order]{}, err
	}
	return outcome[order.Order](s.execute(ctx, OpCreateOrder, opts, func(ctx context.Context, q *orderdb.Queries) (any, []outbox.Event, error) {
		o, err := createOrder(ctx, q, n)
		return o, nil, err
	}))
}

// Capture captures an authorized order of merchant in full: OrderCaptured.
// Of concurrent captures of one order exactly one succeeds; the others get
// order.ErrNotCapturable. Another merchant's order is order.ErrNotFound.
func (s *Service) Capture(ctx context.Context, merchant string, id uuid.UUID, opts Options) (Outcome[order.Order], error) {
	return outcome[order.Order](s.execute(ctx, OpCapture, opts, func(ctx context.Context, q *orderdb.Queries) (any, []outbox.Event, error) {
		return capture(ctx, q, merchant, id)
	}))
}

// Refund refunds part or all of a captured order of merchant:
// OrderRefunded. The refunds of an order never exceed its captured amount.
// Another merchant's order is order.ErrNotFound.
func (s *Service) Refund(ctx context.Context, merchant string, id uuid.UUID, n order.NewRefund, opts Options) (Outcome[order.Refund], error) {
	if err := n.Validate(); err != nil {
		return Outcome[order.Refund]{}, err
	}
	return outcome[order.Refund](s.execute(ctx, OpRefund, opts, func(ctx context.Context, q *orderdb.Queries) (any, []outbox.Event, error) {
		row, err := q.RefundOrder(ctx, orderdb.RefundOrderParams{ID: id, MerchantID: merchant, Amount: n.Amount})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, whyNotRefundable(ctx, q, merchant, id, n.Amount)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("refunding order %s: %w", id, err)
		}
		o := FromDB(row)
		r, err := q.CreateRefund(ctx, orderdb.CreateRefundParams{ID: newID(), OrderID: id, Amount: n.Amount, Currency: o.Currency})
		if err != nil {
			return nil, nil, fmt.Errorf("recording refund of order %s: %w", id, err)
		}
		refund := order.Refund{ID: r.ID, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency, CreatedAt: r.CreatedAt.UTC()}
		ev, err := NewEvent(o, order.EventOrderRefunded, order.RefundedEvent(o, refund), refund.CreatedAt)
		return refund, []outbox.Event{ev}, err
	}))
}

// Get returns an order of merchant; another merchant's order is
// order.ErrNotFound.
func (s *Service) Get(ctx context.Context, merchant string, id uuid.UUID) (order.Order, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return order.Order{}, fmt.Errorf("reading order %s: %w", id, err)
	}
	defer conn.Release()
	row, err := orderdb.New(conn).GetOrder(ctx, orderdb.GetOrderParams{ID: id, MerchantID: merchant})
	if errors.Is(err, pgx.ErrNoRows) {
		return order.Order{}, fmt.Errorf("order %s: %w", id, order.ErrNotFound)
	}
	if err != nil {
		return order.Order{}, fmt.Errorf("reading order %s: %w", id, translate(err))
	}
	return FromDB(row), nil
}

func createOrder(ctx context.Context, q *orderdb.Queries, n order.NewOrder) (order.Order, error) {
	row, err := q.CreateOrder(ctx, orderdb.CreateOrderParams{
		ID: newID(), CustomerID: n.CustomerID, MerchantID: n.MerchantID, Amount: n.Amount, Currency: n.Currency,
	})
	if err != nil {
		return order.Order{}, fmt.Errorf("creating order: %w", err)
	}
	return FromDB(row), nil
}

func capture(ctx context.Context, q *orderdb.Queries, merchant string, id uuid.UUID) (any, []outbox.Event, error) {
	row, err := q.CaptureOrder(ctx, orderdb.CaptureOrderParams{ID: id, MerchantID: merchant})
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := q.GetOrder(ctx, orderdb.GetOrderParams{ID: id, MerchantID: merchant})
		if errors.Is(gerr, pgx.ErrNoRows) {
			return nil, nil, fmt.Errorf("capturing order %s: %w", id, order.ErrNotFound)
		}
		if gerr != nil {
			return nil, nil, fmt.Errorf("capturing order %s: %w", id, gerr)
		}
		return nil, nil, fmt.Errorf("capturing order %s (%s): %w", id, cur.Status, order.ErrNotCapturable)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("capturing order %s: %w", id, err)
	}
	return captured(FromDB(row))
}

// captured is a captured order and its OrderCaptured event.
func captured(o order.Order) (any, []outbox.Event, error) {
	ev, err := NewEvent(o, order.EventOrderCaptured, order.CapturedEvent(o), o.UpdatedAt)
	return o, []outbox.Event{ev}, err
}

func whyNotRefundable(ctx context.Context, q *orderdb.Queries, merchant string, id uuid.UUID, amount int64) error {
	cur, err := q.GetOrder(ctx, orderdb.GetOrderParams{ID: id, MerchantID: merchant})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("refunding order %s: %w", id, order.ErrNotFound)
	case err != nil:
		return fmt.Errorf("refunding order %s: %w", id, err)
	case order.Status(cur.Status) == order.StatusAuthorized:
		return fmt.Errorf("refunding order %s: %w", id, order.ErrNotRefundable)
	default:
		return fmt.Errorf("refunding %d of order %s with %d of %d left: %w",
			amount, id, cur.CapturedAmount-cur.RefundedAmount, cur.CapturedAmount, order.ErrRefundTooLarge)
	}
}

// NewEvent builds the event announcing a change of o; o.EventSeq is its
// sequence number.
func NewEvent(o order.Order, typ string, payload any, at time.Time) (outbox.Event, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return outbox.Event{}, fmt.Errorf("encoding %s of order %s: %w", typ, o.ID, err)
	}
	return outbox.Event{
		AggregateType: order.AggregateType,
		AggregateID:   o.ID.String(),
		Type:          typ,
		SchemaVersion: order.SchemaVersion,
		Sequence:      o.EventSeq,
		Payload:       data,
		OccurredAt:    at,
	}, nil
}

func outcome[T any](res txResult, err error) (Outcome[T], error) {
	if err != nil {
		return Outcome[T]{}, err
	}
	out := Outcome[T]{Response: res.stored, Replayed: res.replayed}
	if !res.replayed {
		out.Value = res.value.(T)
	}
	return out, nil
}
