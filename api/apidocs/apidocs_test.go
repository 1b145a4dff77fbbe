package apidocs_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/paylab/paylab/api/apidocs"
)

// node is a parsed element with the text beneath it.
type node struct {
	tag  string
	text string
}

// parse reads the page as HTML and returns its elements by id, its
// in-page links and the tags it holds.
func parse(t *testing.T, page []byte) (byID map[string]node, links []string, tags map[string]int) {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("the page is not HTML: %v", err)
	}
	byID, tags = map[string]node{}, map[string]int{}
	var text func(*html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			tags[n.Data]++
			for _, a := range n.Attr {
				switch {
				case a.Key == "id":
					if _, dup := byID[a.Val]; dup {
						t.Errorf("two elements have id %q", a.Val)
					}
					byID[a.Val] = node{tag: n.Data, text: strings.Join(strings.Fields(text(n)), " ")}
				case a.Key == "href" && strings.HasPrefix(a.Val, "#"):
					links = append(links, a.Val[1:])
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return byID, links, tags
}

// The page shows every operation of the document with each of its
// responses and problem codes, and every schema; every in-page link lands.
func TestThePageShowsEveryOperationResponseCodeAndSchema(t *testing.T) {
	page, err := apidocs.Page()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := apidocs.Load()
	if err != nil {
		t.Fatal(err)
	}
	byID, links, tags := parse(t, page)
	if tags["script"] != 0 {
		t.Errorf("the page has %d scripts, want none", tags["script"])
	}
	ops := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops++
			sec, ok := byID[op.OperationID]
			if !ok {
				t.Errorf("%s %s (%s) is not on the page", method, path, op.OperationID)
				continue
			}
			if !strings.Contains(sec.text, method+" "+path) {
				t.Errorf("the section of %s does not name %s %s: %q", op.OperationID, method, path, sec.text)
			}
			for status, ref := range op.Responses.Map() {
				row, ok := byID[op.OperationID+"-"+status]
				if !ok || !strings.HasPrefix(row.text, status) {
					t.Errorf("%s: response %s is not shown", op.OperationID, status)
				}
				for _, mt := range ref.Value.Content {
					for _, code := range apidocs.Codes(mt.Schema) {
						if !strings.Contains(row.text, code) {
							t.Errorf("%s: response %s's code %s is not shown", op.OperationID, status, code)
						}
					}
				}
			}
			for _, p := range op.Parameters {
				if !strings.Contains(sec.text, p.Value.Name) {
					t.Errorf("%s: parameter %s is not shown", op.OperationID, p.Value.Name)
				}
			}
		}
	}
	if ops < 8 {
		t.Errorf("the document has %d operations, want at least 8", ops)
	}
	for name, s := range doc.Components.Schemas {
		sec, ok := byID["schema-"+name]
		if !ok {
			t.Errorf("schema %s is not on the page", name)
			continue
		}
		for prop := range s.Value.Properties {
			if !strings.Contains(sec.text, prop) {
				t.Errorf("schema %s: property %s is not shown", name, prop)
			}
		}
	}
	for _, l := range links {
		if _, ok := byID[l]; !ok {
			t.Errorf("a link to #%s lands nowhere", l)
		}
	}
	// The descriptions are Markdown, rendered.
	if !bytes.Contains(page, []byte("<strong>Idempotency</strong>")) {
		t.Error("the document's description is not rendered as Markdown")
	}
}

// The handler serves the page as HTML that may run no script.
func TestHandlerServesHTMLWithoutScripts(t *testing.T) {
	h, err := apidocs.Handler()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest(http.MethodGet, apidocs.Route, nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s = %d %s", apidocs.Route, rec.Code, rec.Header().Get("Content-Type"))
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	if !strings.Contains(rec.Body.String(), `id="placePayment"`) {
		t.Error("the page lacks placePayment")
	}
}
