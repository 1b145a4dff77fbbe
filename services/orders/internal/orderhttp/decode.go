package orderhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/paylab/paylab/services/orders/internal/order"
)

// MaxBodyBytes is the largest request body accepted (413 beyond).
const MaxBodyBytes = 8 << 10

// readBody reads the body, at most MaxBodyBytes, and checks its content
// type: a body must be application/json (UTF-8). An empty body is returned
// as nil when bodyOptional, else rejected.
func readBody(w http.ResponseWriter, r *http.Request, bodyOptional bool) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, badRequest(http.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("The request body must not exceed %d bytes.", MaxBodyBytes))
	case err != nil:
		return nil, badRequest(http.StatusBadRequest, "body_unreadable", "The request body could not be read.")
	}
	cts := r.Header.Values("Content-Type")
	empty := len(bytes.TrimSpace(data)) == 0
	switch {
	case len(cts) > 1 || (len(cts) == 1 && !jsonContentType(cts[0])) || (len(cts) == 0 && !empty):
		return nil, badRequest(http.StatusUnsupportedMediaType, "content_type_unsupported",
			"The request body must be sent as Content-Type: application/json.")
	case empty && bodyOptional:
		return nil, nil
	case empty:
		return nil, badRequest(http.StatusBadRequest, "body_required", "The request needs a JSON object body.")
	}
	return data, nil
}

func jsonContentType(ct string) bool {
	media, params, err := mime.ParseMediaType(ct)
	if err != nil || media != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// field binds one member of a JSON object to a Go value.
type field struct {
	name string
	dst  any // a pointer to a pointer, so that absent and null stay nil
	kind string
}

// decodeObject decodes data, which must be exactly one JSON object whose
// members are among fields (matched exactly, each at most once), followed
// by nothing but white space. Type errors are reported per field.
func decodeObject(data []byte, fields ...field) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return malformed(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return badRequest(http.StatusBadRequest, "body_invalid", "The request body must be a JSON object.")
	}
	raw := make(map[string]json.RawMessage, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed(err)
		}
		name, _ := tok.(string) // object keys are always strings
		if !known(fields, name) {
			return badRequest(http.StatusBadRequest, "field_unknown",
				"The request body has a member that is not part of the API.",
				FieldIssue{Field: clip(name), Message: "is not a known field"})
		}
		if _, dup := raw[name]; dup {
			return badRequest(http.StatusBadRequest, "field_duplicate",
				"The request body has a member more than once.",
				FieldIssue{Field: name, Message: "appears more than once"})
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return malformed(err)
		}
		raw[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return malformed(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest(http.StatusBadRequest, "body_trailing_data",
			"The request body must hold one JSON object and nothing after it.")
	}
	var errs []error
	for _, f := range fields {
		v, ok := raw[f.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			errs = append(errs, order.Invalid(f.name, "must be "+f.kind))
		}
	}
	return order.Join(errs...)
}

func known(fields []field, name string) bool {
	for _, f := range fields {
		if f.name == name {
			return true
		}
	}
	return false
}

func malformed(err error) error {
	var syn *json.SyntaxError
	detail := "The request body is not valid JSON."
	if errors.As(err, &syn) {
		detail = fmt.Sprintf("The request body is not valid JSON (at byte %d).", syn.Offset)
	}
	return badRequest(http.StatusBadRequest, "body_malformed", detail)
}

// clip bounds a client-supplied string echoed back in a problem.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
