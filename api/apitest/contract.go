// Package apitest checks paylab's HTTP handlers against the OpenAPI
// document (package api): every request a test sends and every response it
// gets, the routes of a router, and the error codes the handlers emit. It is
// for tests only; it uses kin-openapi's validator (openapi3filter), with JSON
// Schema 2020-12 for the document's OpenAPI 3.1 schemas.
package apitest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/paylab/paylab/api/apidocs"
)

// ServiceExtension names the process that serves a path (a Path Item
// extension of the document).
const ServiceExtension = "x-paylab-service"

// MediaTypeProblem is the media type of error responses (RFC 9457).
const MediaTypeProblem = "application/problem+json"

// Service is one process's share of the document.
type Service struct {
	// Name is the value of x-paylab-service on the service's paths.
	Name string
	// RouteNotFound and MethodNotAllowed name the components.responses that
	// describe the answer to a path the service does not have, and to a
	// method one of its paths does not support.
	RouteNotFound, MethodNotAllowed string
}

// The services the document describes.
var (
	Orders = Service{Name: "orders", RouteNotFound: "RouteNotFound", MethodNotAllowed: "MethodNotAllowed"}
	Ledger = Service{Name: "ledger", RouteNotFound: "LedgerRouteNotFound", MethodNotAllowed: "LedgerMethodNotAllowed"}
)

// Load parses the document and validates it as OpenAPI 3.1, its examples
// against their schemas included. It does so once per test binary: the
// document it returns is shared and must not be modified.
func Load() (*openapi3.T, error) { return load() }

var load = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := apidocs.Load()
	if err != nil {
		return nil, err
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("api/openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validating api/openapi.yaml: %w", err)
	}
	return doc, nil
})

// Contract is the document's contract for one service.
type Contract struct {
	svc    Service
	doc    *openapi3.T // the service's paths only, matched on any host
	router routers.Router
	// unmatched are the responses to a path the service lacks (404) and to a
	// method a path lacks (405).
	unmatched map[int]*openapi3.ResponseRef
}

// New loads the document and returns the contract of svc.
func New(svc Service) (*Contract, error) {
	full, err := Load()
	if err != nil {
		return nil, err
	}
	doc := *full
	doc.Servers = openapi3.Servers{{URL: "/"}}
	doc.Paths = openapi3.NewPaths()
	for path, item := range full.Paths.Map() {
		owner, _ := item.Extensions[ServiceExtension].(string)
		if owner == "" {
			return nil, fmt.Errorf("path %s has no %s", path, ServiceExtension)
		}
		if owner != svc.Name {
			continue
		}
		local := *item
		local.Servers = nil // the path's own server: any host in a test
		doc.Paths.Set(path, &local)
	}
	if doc.Paths.Len() == 0 {
		return nil, fmt.Errorf("no path of the document has %s: %s", ServiceExtension, svc.Name)
	}
	router, err := gorillamux.NewRouter(&doc)
	if err != nil {
		return nil, fmt.Errorf("routing the %s paths: %w", svc.Name, err)
	}
	c := &Contract{svc: svc, doc: &doc, router: router, unmatched: map[int]*openapi3.ResponseRef{}}
	for status, name := range map[int]string{http.StatusNotFound: svc.RouteNotFound, http.StatusMethodNotAllowed: svc.MethodNotAllowed} {
		ref := full.Components.Responses[name]
		if ref == nil || ref.Value == nil {
			return nil, fmt.Errorf("components.responses has no %s", name)
		}
		c.unmatched[status] = ref
	}
	return c, nil
}

// Exchange is one request and the response it got.
type Exchange struct {
	Request     *http.Request // its Body is not read; RequestBody is
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

func (e Exchange) String() string {
	return fmt.Sprintf("%s %s → %d", e.Request.Method, e.Request.URL.RequestURI(), e.Status)
}

// Check checks one exchange against the contract:
//
//   - the response must be one the operation documents: its status, its
//     headers, its media type and its body, problem documents and their
//     codes included (the schemas forbid members they do not list);
//   - a request the document rejects must be rejected (4xx): a handler
//     that accepts it is laxer than the document says;
//   - a request to a path the service lacks must get the RouteNotFound
//     response, and a method a path lacks the MethodNotAllowed one.
//
// A request the document accepts may still be refused for what a schema
// does not say (an order's state, a member given twice); its response is
// then checked like any other.
func (c *Contract) Check(e Exchange) error {
	return c.check(e, true)
}

// CheckResponse is Check without the rule on requests the document
// rejects: for inputs from a fuzzer, which reach corners (a body of white
// space without a Content-Type) that the document cannot describe.
func (c *Contract) CheckResponse(e Exchange) error {
	return c.check(e, false)
}

func (c *Contract) check(e Exchange, requests bool) error {
	ctx := context.Background()
	req := e.Request.Clone(ctx)
	req.Body = newBody(e.RequestBody)
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, AuthenticationFunc: authenticate}
	opts.WithCustomSchemaErrorFunc(schemaError)

	route, params, err := c.router.FindRoute(req)
	unmatched := 0 // the status of the router's own answer, if it gives one
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		unmatched = http.StatusNotFound
	case errors.Is(err, routers.ErrMethodNotAllowed):
		unmatched = http.StatusMethodNotAllowed
	case err != nil:
		return fmt.Errorf("%s: routing: %w", e, err)
	}
	if unmatched != 0 {
		// An operation whose one response is the router's answer.
		route = &routers.Route{Spec: c.doc, Path: req.URL.Path, Method: req.Method,
			Operation: &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(unmatched, c.unmatched[unmatched]))}}
	}

	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	var reqErr error
	if requests && unmatched == 0 {
		reqErr = openapi3filter.ValidateRequest(ctx, in)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: e.Status, Header: e.Header, Options: opts}
	out.SetBodyBytes(e.Body)

	var errs []error
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		what := "the response is not one the document describes"
		if unmatched != 0 {
			what = "the answer to an unknown path or method is not the document's"
		}
		errs = append(errs, fmt.Errorf("%s: %w\n%s", what, err, clip(e.Body)))
	}
	if requests && reqErr != nil && e.Status < 400 {
		errs = append(errs, fmt.Errorf("the document rejects the request, the handler accepted it: %w", reqErr))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", e, errors.Join(errs...))
	}
	return nil
}

// authenticate checks a request against the document's security scheme
// as far as a document can: an http bearer scheme needs one Authorization
// header with a Bearer token. Whether the key is valid only the service
// knows (its 401 is documented).
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme := in.SecurityScheme
	if scheme == nil || scheme.Type != "http" || !strings.EqualFold(scheme.Scheme, "bearer") {
		return fmt.Errorf("security scheme %s is not http bearer", in.SecuritySchemeName)
	}
	values := in.RequestValidationInput.Request.Header.Values("Authorization")
	if len(values) != 1 {
		return fmt.Errorf("%d Authorization headers, want one", len(values))
	}
	name, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || !strings.EqualFold(name, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New("the Authorization header is not Bearer <token>")
	}
	return nil
}

// Operations lists the service's documented operations, "GET /v1/orders/{id}",
// sorted.
func (c *Contract) Operations() []string {
	var ops []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	return ops
}

// schemaError is a schema violation without the schema and the value,
// which the message of a failing check shows.
func schemaError(err *openapi3.SchemaError) string {
	reason := err.Reason
	if reason == "" {
		reason = "does not match " + err.SchemaField
	}
	if ptr := err.JSONPointer(); len(ptr) > 0 && !strings.Contains(reason, "/"+strings.Join(ptr, "/")) {
		return fmt.Sprintf("at /%s: %s", strings.Join(ptr, "/"), reason)
	}
	return reason
}

func clip(b []byte) string {
	const max = 600
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
