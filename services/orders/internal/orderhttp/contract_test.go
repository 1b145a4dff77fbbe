package orderhttp

import (
	"go/ast"
	"go/token"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/api/apitest"
)

// The router serves exactly the operations api/openapi.yaml documents for
// the orders API.
func TestRoutesAreDocumented(t *testing.T) {
	t.Parallel()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ops, err := apitest.RouterOperations(router(&handlers{}, slog.New(slog.DiscardHandler), m, Security{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) < 6 {
		t.Fatalf("the router has only %v", ops)
	}
	if err := apitest.ContractOf(t, apitest.Orders).CompareOperations(ops); err != nil {
		t.Fatal(err)
	}
}

// Every status and problem code the handlers can emit is documented, and
// every documented one is emitted. The codes are read from the source:
// the calls of newProblem and badRequest, and the request fields whose
// validation errors are coded "<field>_invalid" (order.ValidationError).
func TestErrorCodesAreDocumented(t *testing.T) {
	t.Parallel()
	emitted, err := apitest.ScanSource(".", apitest.Call{Func: "newProblem", Status: 0, Code: 1}, apitest.Call{Func: "badRequest", Status: 0, Code: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The two calls that pass codes on: a requestError's (each written in a
	// badRequest call, scanned above) and a validation error's (the
	// literal "validation_failed", scanned above, or a field's code, added
	// here).
	var dynamic []string
	for _, d := range emitted.Dynamic {
		dynamic = append(dynamic, d[strings.Index(d, ": ")+2:])
	}
	slices.Sort(dynamic)
	if want := []string{"newProblem(http.StatusUnprocessableEntity, code)", "newProblem(reqErr.status, reqErr.code)"}; !slices.Equal(dynamic, want) {
		t.Fatalf("calls with a status or code that is not a literal: %q, want only %q", emitted.Dynamic, want)
	}
	fields := validatedFields(t, ".", "../order")
	for _, want := range []string{"customer_id", "merchant_id", "amount", "currency"} {
		if !slices.Contains(fields, want) {
			t.Fatalf("the scan of validated fields found %v, which lacks %s", fields, want)
		}
	}
	codes := emitted.Codes
	for _, f := range fields {
		codes = append(codes, apitest.StatusCode{Status: 422, Code: f + "_invalid"})
	}

	documented, err := apitest.ContractOf(t, apitest.Orders).Codes()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if !slices.Contains(documented, c) {
			t.Errorf("the handlers emit %v, which api/openapi.yaml does not document", c)
		}
	}
	for _, c := range documented {
		if !slices.Contains(codes, c) {
			t.Errorf("api/openapi.yaml documents %v, which no handler emits", c)
		}
	}
	if len(codes) < 25 {
		t.Fatalf("only %d codes found: %v", len(codes), codes)
	}
}

// validatedFields lists the request fields named literally where
// validation errors are made: order.Invalid, order.Missing,
// ValidationError.invalid, checkPartyID and the decoder's field table.
func validatedFields(t *testing.T, dirs ...string) []string {
	t.Helper()
	var fields []string
	add := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && !slices.Contains(fields, s) {
				fields = append(fields, s)
			}
		}
	}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := apitest.ParseSource(fset, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					}
					switch {
					case (name == "Invalid" || name == "Missing" || name == "invalid") && len(n.Args) > 0:
						add(n.Args[0])
					case name == "checkPartyID" && len(n.Args) > 1:
						add(n.Args[1])
					}
				case *ast.CompositeLit:
					if id, ok := n.Type.(*ast.Ident); ok && id.Name == "field" && len(n.Elts) > 0 {
						add(n.Elts[0])
					}
				}
				return true
			})
		}
	}
	slices.Sort(fields)
	return fields
}
