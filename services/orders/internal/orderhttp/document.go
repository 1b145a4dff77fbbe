package orderhttp

import (
	"net/http"

	"github.com/paylab/paylab/api"
)

// routeDocument serves the API's OpenAPI document.
const routeDocument = "/openapi.yaml"

var document = api.OpenAPI()

// serveDocument writes api/openapi.yaml, the description of this API that
// its tests check the handlers against.
func serveDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", api.ContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(document)
}
