package orderhttp

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// Security is how the API admits requests: every operation but GET
// /openapi.yaml needs a merchant's API key (Keys) and acts for its
// merchant, within the key's request rate (Limiter, nil: no limit) and a
// deadline per request (RequestTimeout, 0: none).
type Security struct {
	Keys           *apikey.Authenticator
	Limiter        *apikey.Limiter
	RequestTimeout time.Duration
}

// Routes returns the public API's handler. Every request runs in an
// OpenTelemetry server span that continues the caller's W3C trace context
// (traced); the process installs the propagator and tracer provider
// (internal/platform/telemetry). The routes are those of api/openapi.yaml,
// which GET /openapi.yaml serves.
func Routes(app *orderapp.Service, log *slog.Logger, m *Metrics, sec Security) http.Handler {
	return traced(router(&handlers{app: app, log: log}, log, m, sec))
}

// router is the API's chi router, without the trace span.
func router(h *handlers, log *slog.Logger, m *Metrics, sec Security) *chi.Mux {
	r := chi.NewRouter()
	r.Use(requestID, observe(log, m), recoverer(log))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, newProblem(http.StatusNotFound, "route_not_found", "No such resource."))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			if r.Match(chi.NewRouteContext(), m, req.URL.Path) {
				w.Header().Add("Allow", m)
			}
		}
		writeProblem(w, req, newProblem(http.StatusMethodNotAllowed, "method_not_allowed", "This resource does not support the method."))
	})
	refuse := func(w http.ResponseWriter, r *http.Request, err error) { fail(w, r, log, err) }
	r.Group(func(r chi.Router) {
		r.Use(deadline(sec.RequestTimeout), apikey.Authenticate(sec.Keys, refuse), sec.Limiter.Middleware(refuse))
		r.Post(routePayments, h.placePayment)
		r.Post(routeOrders, h.createOrder)
		r.Get(routeOrder, h.getOrder)
		r.Post(routeCapture, h.capture)
		r.Post(routeRefunds, h.refund)
	})
	r.Get(routeDocument, serveDocument)
	return r
}
