package orderhttp_test

import (
	"net/http"
	"testing"

	"github.com/paylab/paylab/api"
)

// The API serves its OpenAPI document, the very bytes its tests check the
// handlers against, without an API key.
func TestServesTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(http.MethodGet, "/openapi.yaml", "", "Authorization", "")
	if res.Status != http.StatusOK || res.Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /openapi.yaml = %d %q", res.Status, res.Header.Get("Content-Type"))
	}
	if res.Body != string(api.OpenAPI()) {
		t.Fatal("the body is not api/openapi.yaml")
	}
	if res := b.do(http.MethodPost, "/openapi.yaml", "{}"); res.Status != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET" {
		t.Fatalf("POST /openapi.yaml = %d, Allow %q", res.Status, res.Header.Get("Allow"))
	}
}
