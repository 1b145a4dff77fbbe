package orderhttp

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

type handlers struct {
	app *orderapp.Service
	log *slog.Logger
}

// Route patterns; they are also the idempotency scopes and metric labels.
const (
	routePayments = "/v1/payments"
	routeOrders   = "/v1/orders"
	routeOrder    = "/v1/orders/{id}"
	routeCapture  = "/v1/orders/{id}/capture"
	routeRefunds  = "/v1/orders/{id}/refunds"
)

func (h *handlers) placePayment(w http.ResponseWriter, r *http.Request) {
	h.newOrder(w, r, "POST "+routePayments, h.app.PlacePayment)
}

func (h *handlers) createOrder(w http.ResponseWriter, r *http.Request) {
	h.newOrder(w, r, "POST "+routeOrders, h.app.CreateOrder)
}

type newOrderFunc = func(ctx context.Context, n order.NewOrder, opts orderapp.Options) (orderapp.Outcome[order.Order], error)

func (h *handlers) newOrder(w http.ResponseWriter, r *http.Request, scope string, do newOrderFunc) {
	data, err := readBody(w, r, false)
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	merchant := merchantOf(r)
	n, err := parseNewOrder(data, merchant)
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	opts, err := options(r, merchant, scope, n, http.StatusCreated, renderOrder)
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	out, err := do(r.Context(), n, opts)
	h.respond(w, r, out.Response, out.Replayed, http.StatusCreated, func() any { return renderOrder(out.Value) }, err)
}

func (h *handlers) capture(w http.ResponseWriter, r *http.Request) {
	id, err := parseOrderID(chi.URLParam(r, "id"))
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	data, err := readBody(w, r, true)
	if err == nil {
		err = parseCapture(data)
	}
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	merchant := merchantOf(r)
	opts, err := options(r, merchant, "POST "+routeCapture, struct {
		OrderID uuid.UUID `json:"order_id"`
	}{id}, http.StatusOK, renderOrder)
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	out, err := h.app.Capture(r.Context(), merchant, id, opts)
	h.respond(w, r, out.Response, out.Replayed, http.StatusOK, func() any { return renderOrder(out.Value) }, err)
}

func (h *handlers) refund(w http.ResponseWriter, r *http.Request) {
	id, err := parseOrderID(chi.URLParam(r, "id"))
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	data, err := readBody(w, r, false)
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	n, err := parseNewRefund(data)
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	merchant := merchantOf(r)
	opts, err := options(r, merchant, "POST "+routeRefunds, struct {
		OrderID uuid.UUID       `json:"order_id"`
		Refund  order.NewRefund `json:"refund"`
	}{id, n}, http.StatusCreated, renderRefund)
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	out, err := h.app.Refund(r.Context(), merchant, id, n, opts)
	h.respond(w, r, out.Response, out.Replayed, http.StatusCreated, func() any { return renderRefund(out.Value) }, err)
}

func (h *handlers) getOrder(w http.ResponseWriter, r *http.Request) {
	id, err := parseOrderID(chi.URLParam(r, "id"))
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	o, err := h.app.Get(r.Context(), merchantOf(r), id)
	h.respond(w, r, nil, false, http.StatusOK, func() any { return renderOrder(o) }, err)
}

// merchantOf is the merchant of the request's API key.
func merchantOf(r *http.Request) string {
	p, _ := apikey.FromContext(r.Context())
	return p.MerchantID
}

// options collects the per-call options of a state change from the request.
func options(r *http.Request, merchant, scope string, canonical any, status int, render func(any) any) (orderapp.Options, error) {
	idem, err := idempotency(r, merchant, scope, canonical, status, render)
	if err != nil {
		return orderapp.Options{}, err
	}
	return orderapp.Options{Idempotency: idem}, nil
}

// respond writes the stored response when there is one (it is exactly what
// was stored with the idempotency key), else renders the result.
func (h *handlers) respond(w http.ResponseWriter, r *http.Request, stored *orderapp.Response, replayed bool, status int, render func() any, err error) {
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	if stored != nil {
		writeBody(w, stored.Status, stored.Body, replayed)
		return
	}
	body, err := encodeBody(render())
	if err != nil {
		fail(w, r, h.log, err)
		return
	}
	writeBody(w, status, body, false)
}
