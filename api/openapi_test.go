package api_test

import (
	"bytes"
	"testing"

	"github.com/paylab/paylab/api"
	"github.com/paylab/paylab/api/apitest"
)

// The document is valid OpenAPI 3.1, examples included, and every path
// names the process that serves it.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	t.Parallel()
	if !bytes.HasPrefix(api.OpenAPI(), []byte("openapi: 3.1.0\n")) {
		t.Fatal("api/openapi.yaml does not start with openapi: 3.1.0")
	}
	doc, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		switch item.Extensions[apitest.ServiceExtension] {
		case apitest.Orders.Name, apitest.Ledger.Name:
		default:
			t.Errorf("%s: %s is %v, want orders or ledger", path, apitest.ServiceExtension, item.Extensions[apitest.ServiceExtension])
		}
		for method, op := range item.Operations() {
			if op.OperationID == "" || ids[op.OperationID] || len(op.Tags) == 0 || op.Summary == "" {
				t.Errorf("%s %s: operationId %q (unique), tags and summary are required", method, path, op.OperationID)
			}
			ids[op.OperationID] = true
		}
	}
	for _, svc := range []apitest.Service{apitest.Orders, apitest.Ledger} {
		if _, err := apitest.New(svc); err != nil {
			t.Errorf("%s: %v", svc.Name, err)
		}
	}
}
