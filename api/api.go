// Package api holds paylab's OpenAPI 3.1 document, api/openapi.yaml: the
// orders API and the ledger's read API. It is embedded, so the orders API
// serves the very bytes its tests check the handlers against (package
// apitest).
package api

import (
	"bytes"
	_ "embed"
)

// ContentType is the media type of the document (RFC 9512).
const ContentType = "application/yaml"

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the document, api/openapi.yaml.
func OpenAPI() []byte { return bytes.Clone(openAPI) }
