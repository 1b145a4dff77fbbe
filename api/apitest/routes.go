package apitest

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
)

// RouterOperations lists the operations a chi router serves, "GET /v1/orders/{id}",
// sorted.
func RouterOperations(r chi.Routes) ([]string, error) {
	var ops []string
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		ops = append(ops, method+" "+route)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walking the router: %w", err)
	}
	sort.Strings(ops)
	return slices.Compact(ops), nil
}

// CompareOperations reports the operations the router serves that the
// contract does not document, and those documented that the router does not
// serve.
func (c *Contract) CompareOperations(router []string) error {
	documented := c.Operations()
	var msgs []string
	for _, op := range router {
		if !slices.Contains(documented, op) {
			msgs = append(msgs, "the router serves "+op+", which api/openapi.yaml does not document")
		}
	}
	for _, op := range documented {
		if !slices.Contains(router, op) {
			msgs = append(msgs, "api/openapi.yaml documents "+op+", which the router does not serve")
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%s operations:\n%s", c.svc.Name, strings.Join(msgs, "\n"))
	}
	return nil
}
