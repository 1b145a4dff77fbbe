package apitest

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/paylab/paylab/api/apidocs"
)

// StatusCode is an error status with a problem code.
type StatusCode struct {
	Status int
	Code   string
}

func (s StatusCode) String() string { return fmt.Sprintf("%d %s", s.Status, s.Code) }

// Codes lists every status and problem code the contract documents, sorted:
// those of each operation's problem responses (each lists its codes in an
// enum), and of the answers to an unknown path or method.
func (c *Contract) Codes() ([]StatusCode, error) {
	seen := map[StatusCode]bool{}
	add := func(where string, status int, ref *openapi3.ResponseRef) error {
		mt := ref.Value.Content.Get(MediaTypeProblem)
		if mt == nil {
			return nil
		}
		codes := apidocs.Codes(mt.Schema)
		if len(codes) == 0 {
			return fmt.Errorf("%s %d: a problem response without an enum of its codes", where, status)
		}
		for _, code := range codes {
			seen[StatusCode{status, code}] = true
		}
		return nil
	}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for key, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(key)
				if err != nil {
					return nil, fmt.Errorf("%s %s: response %q is not a status", method, path, key)
				}
				if err := add(method+" "+path, status, ref); err != nil {
					return nil, err
				}
			}
		}
	}
	for status, ref := range c.unmatched {
		if err := add("an unknown path or method", status, ref); err != nil {
			return nil, err
		}
	}
	out := make([]StatusCode, 0, len(seen))
	for sc := range seen {
		out = append(out, sc)
	}
	sortCodes(out)
	return out, nil
}

// Call names a function whose calls emit a problem: the positions of its
// status and code arguments.
type Call struct {
	Func         string
	Status, Code int
}

// Emitted is what a scan of a package's source finds.
type Emitted struct {
	// Codes are the statuses and codes written literally in the calls (a
	// code may be a variable assigned string literals in the same function).
	Codes []StatusCode
	// Dynamic lists the calls whose status or code is not a literal, as
	// "file:line: f(status, code)", for the caller to account for.
	Dynamic []string
}

// ScanSource finds the problems the non-test Go files of dir emit through
// calls, by reading the source: a code added in a new call is found
// without anyone listing it.
func ScanSource(dir string, calls ...Call) (Emitted, error) {
	fset := token.NewFileSet()
	files, err := ParseSource(fset, dir)
	if err != nil {
		return Emitted{}, err
	}
	byName := map[string]Call{}
	for _, c := range calls {
		byName[c.Func] = c
	}
	statuses := statusConstants()
	seen := map[StatusCode]bool{}
	var out Emitted
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				spec, ok := byName[funcName(call.Fun)]
				if !ok || len(call.Args) <= max(spec.Status, spec.Code) {
					return true
				}
				status, statusOK := statusOf(call.Args[spec.Status], statuses)
				codes, codeOK := codesOf(call.Args[spec.Code], fn)
				if !statusOK || !codeOK {
					pos := fset.Position(call.Pos())
					out.Dynamic = append(out.Dynamic, fmt.Sprintf("%s:%d: %s(%s, %s)", filepath.Base(pos.Filename), pos.Line,
						spec.Func, types.ExprString(call.Args[spec.Status]), types.ExprString(call.Args[spec.Code])))
				}
				if statusOK {
					for _, code := range codes {
						seen[StatusCode{status, code}] = true
					}
				}
				return true
			})
		}
	}
	for sc := range seen {
		out.Codes = append(out.Codes, sc)
	}
	sortCodes(out.Codes)
	sort.Strings(out.Dynamic)
	return out, nil
}

// ParseSource parses the non-test Go files of dir.
func ParseSource(fset *token.FileSet, dir string) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		files = append(files, f)
	}
	return files, nil
}

func funcName(e ast.Expr) string {
	switch f := e.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// statusOf evaluates http.StatusXxx or an integer literal.
func statusOf(e ast.Expr, statuses map[string]int) (int, bool) {
	switch v := e.(type) {
	case *ast.SelectorExpr:
		if pkg, ok := v.X.(*ast.Ident); ok && pkg.Name == "http" {
			s, ok := statuses[v.Sel.Name]
			return s, ok
		}
	case *ast.BasicLit:
		if v.Kind == token.INT {
			s, err := strconv.Atoi(v.Value)
			return s, err == nil
		}
	}
	return 0, false
}

// codesOf returns a string literal, or the string literals assigned to a
// variable in fn; ok is false unless e is a literal.
func codesOf(e ast.Expr, fn *ast.FuncDecl) (codes []string, ok bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(v.Value); err == nil && v.Kind == token.STRING {
			return []string{s}, true
		}
	case *ast.Ident:
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			as, isAssign := n.(*ast.AssignStmt)
			if !isAssign || len(as.Lhs) != len(as.Rhs) {
				return true
			}
			for i, lhs := range as.Lhs {
				id, isIdent := lhs.(*ast.Ident)
				lit, isLit := as.Rhs[i].(*ast.BasicLit)
				if isIdent && isLit && id.Name == v.Name && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						codes = append(codes, s)
					}
				}
			}
			return true
		})
	}
	return codes, false
}

// statusConstants maps net/http's status constant names to their values,
// e.g. "StatusUnprocessableEntity" to 422, from the reason phrases they are
// named after.
func statusConstants() map[string]int {
	m := map[string]int{}
	for code := 100; code < 600; code++ {
		text := http.StatusText(code)
		if text == "" {
			continue
		}
		m["Status"+strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)] = code
	}
	return m
}

func sortCodes(s []StatusCode) {
	slices.SortFunc(s, func(a, b StatusCode) int {
		return cmp.Or(cmp.Compare(a.Status, b.Status), strings.Compare(a.Code, b.Code))
	})
}
