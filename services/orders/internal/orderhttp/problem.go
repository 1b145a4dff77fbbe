package orderhttp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/services/orders/internal/logctx"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// ContentTypeProblem is the media type of error responses (RFC 9457).
const ContentTypeProblem = "application/problem+json"

// retryAfterUnavailable is the Retry-After (seconds) of every 503.
const retryAfterUnavailable = "1"

// Problem is an RFC 9457 problem details object with paylab's extensions: a
// stable machine-readable code, the invalid fields, and the request id.
type Problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	Instance  string       `json:"instance,omitempty"`
	Code      string       `json:"code"`
	Errors    []FieldIssue `json:"errors,omitempty"`
	RequestID string       `json:"request_id,omitempty"`
}

// FieldIssue is one invalid field.
type FieldIssue struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// requestError is a request the HTTP layer rejects before the application
// sees it.
type requestError struct {
	status int
	code   string
	detail string
	fields []FieldIssue
}

func (e *requestError) Error() string { return e.code + ": " + e.detail }

func badRequest(status int, code, detail string, fields ...FieldIssue) error {
	return &requestError{status: status, code: code, detail: detail, fields: fields}
}

// problemFor maps every error the API can meet to its status and code. It is
// the only place that does.
func problemFor(err error) Problem {
	var (
		reqErr   *requestError
		valErr   *order.ValidationError
		stepErr  *orderapp.StepError
		limitErr *apikey.LimitError
	)
	switch {
	case errors.Is(err, apikey.ErrMissing):
		return newProblem(http.StatusUnauthorized, "unauthenticated",
			"This API needs a merchant's API key: Authorization: Bearer <key>.")
	case errors.Is(err, apikey.ErrInvalid):
		return newProblem(http.StatusUnauthorized, "api_key_invalid",
			"The API key is not valid: malformed, unknown or revoked.")
	case errors.Is(err, apikey.ErrInQuery):
		return newProblem(http.StatusBadRequest, "api_key_in_query",
			"API keys go in the Authorization header, never in the query string (which logs keep): revoke a key sent there.")
	case errors.As(err, &limitErr):
		return newProblem(http.StatusTooManyRequests, "rate_limited",
			"The API key has sent more requests than its rate allows; retry after Retry-After seconds.")
	case errors.As(err, &reqErr):
		return newProblem(reqErr.status, reqErr.code, reqErr.detail, reqErr.fields...)
	case errors.As(err, &valErr):
		fields := make([]FieldIssue, len(valErr.Fields))
		for i, f := range valErr.Fields {
			fields[i] = FieldIssue{Field: f.Field, Message: f.Message}
		}
		code := "validation_failed"
		if len(valErr.Fields) == 1 {
			code = valErr.Fields[0].Code
		}
		return newProblem(http.StatusUnprocessableEntity, code, valErr.Error(), fields...)
	case errors.Is(err, order.ErrNotFound):
		return newProblem(http.StatusNotFound, "order_not_found", "No order has this id.")
	case errors.Is(err, order.ErrNotCapturable):
		return newProblem(http.StatusConflict, "order_not_capturable", "Only an authorized order can be captured; this one is not (any more).")
	case errors.Is(err, order.ErrNotRefundable):
		return newProblem(http.StatusConflict, "order_not_refundable", "Only a captured order can be refunded.")
	case errors.Is(err, order.ErrRefundTooLarge):
		return newProblem(http.StatusUnprocessableEntity, "refund_exceeds_captured",
			"The refunds of an order cannot exceed its captured amount.",
			FieldIssue{Field: "amount", Message: "exceeds the captured amount not yet refunded"})
	case errors.Is(err, order.ErrIdempotencyKeyInFlight):
		return newProblem(http.StatusConflict, "idempotency_key_in_flight",
			"A request with this Idempotency-Key is still being processed; retry later.")
	case errors.Is(err, order.ErrIdempotencyKeyReused):
		return newProblem(http.StatusUnprocessableEntity, "idempotency_key_reused",
			"This Idempotency-Key was used for a different request.")
	case errors.Is(err, order.ErrPublish):
		return newProblem(http.StatusServiceUnavailable, "broker_unavailable",
			"The event could not be published, so the change was not committed.")
	case errors.Is(err, order.ErrUnavailable), errors.Is(err, apikey.ErrUnavailable):
		return newProblem(http.StatusServiceUnavailable, "database_unavailable",
			"The database is unavailable (restarting, or failing over to another member). Retry after Retry-After seconds with the same Idempotency-Key: a request whose commit the failover cut short is then answered with its stored response, never made twice.")
	case errors.As(err, &stepErr):
		return newProblem(http.StatusServiceUnavailable, "fault_injected",
			"A fault armed over the chaos controls failed this request at "+string(stepErr.Step)+".")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return newProblem(http.StatusServiceUnavailable, "unavailable", "The request was cancelled or timed out.")
	default:
		return newProblem(http.StatusInternalServerError, "internal", "An internal error occurred.")
	}
}

func newProblem(status int, code, detail string, fields ...FieldIssue) Problem {
	return Problem{
		Type:   "urn:paylab:problem:" + code,
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
		Errors: fields,
	}
}

// fail writes the problem for err, logging server-side failures.
func fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	p := problemFor(err)
	if p.Status >= 500 {
		log.ErrorContext(r.Context(), "request failed", "code", p.Code, "error", err)
	} else {
		log.DebugContext(r.Context(), "request rejected", "code", p.Code, "error", err)
	}
	writeProblem(w, r, p)
}

func writeProblem(w http.ResponseWriter, r *http.Request, p Problem) {
	p.Instance = r.URL.Path
	p.RequestID = logctx.Value(r.Context(), "request_id")
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"type":"urn:paylab:problem:internal","title":"Internal Server Error","status":500,"code":"internal"}`)
		p.Status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", ContentTypeProblem)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if p.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// A database failover or restart takes seconds: a client that
		// retries with the same Idempotency-Key after this many finds a
		// leader or another 503, never a second payment.
		w.Header().Set("Retry-After", retryAfterUnavailable)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
