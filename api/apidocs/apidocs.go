// Package apidocs renders api/openapi.yaml as one HTML page: every
// operation with its parameters, request body, responses, problem codes and
// examples, and every schema with its properties. The page is plain
// server-rendered HTML with no script, so it needs no build step and no
// assets; the orders service serves it on its admin listener at /docs.
package apidocs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/yuin/goldmark"

	"github.com/paylab/paylab/api"
)

// Route is the path of the page on the admin listener.
const Route = "/docs"

// Load parses api/openapi.yaml, resolving its references; it does not
// validate it (package apitest does).
func Load() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("loading api/openapi.yaml: %w", err)
	}
	return doc, nil
}

// Page renders the document. It fails only if api/openapi.yaml does not
// parse, which its tests rule out.
func Page() ([]byte, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	v, err := view(doc)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("rendering api/openapi.yaml: %w", err)
	}
	return buf.Bytes(), nil
}

// Handler serves the page rendered once.
func Handler() (http.HandlerFunc, error) {
	body, err := Page()
	if err != nil {
		return nil, err
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		_, _ = w.Write(body)
	}, nil
}

type docView struct {
	Title, Version string
	Description    template.HTML
	Groups         []groupView
	Schemas        []schemaView
}

type groupView struct {
	Tag         string
	Description template.HTML
	Operations  []operationView
}

type operationView struct {
	ID, Method, Path, Summary, Service, Server string
	Description                                template.HTML
	Parameters                                 []parameterView
	Body                                       []contentView
	Responses                                  []responseView
}

type parameterView struct {
	Name, In    string
	Required    bool
	Type        template.HTML
	Description template.HTML
}

type contentView struct {
	MediaType string
	Type      template.HTML
	Examples  []exampleView
}

type exampleView struct{ Name, JSON string }

type responseView struct {
	Status      string
	Description template.HTML
	Headers     []string
	Codes       []string
	Content     []contentView
}

type schemaView struct {
	Name        string
	Type        template.HTML
	Description template.HTML
	Properties  []propertyView
}

type propertyView struct {
	Name        string
	Required    bool
	Type        template.HTML
	Description template.HTML
}

func view(doc *openapi3.T) (docView, error) {
	v := docView{Title: doc.Info.Title, Version: doc.Info.Version, Description: markdown(doc.Info.Description)}
	group := map[string]int{} // tag → index in v.Groups
	addGroup := func(tag, description string) int {
		group[tag] = len(v.Groups)
		v.Groups = append(v.Groups, groupView{Tag: tag, Description: markdown(description)})
		return group[tag]
	}
	for _, t := range doc.Tags {
		addGroup(t.Name, t.Description)
	}
	for _, path := range slices.Sorted(maps.Keys(doc.Paths.Map())) {
		item := doc.Paths.Value(path)
		for _, method := range methods(item) {
			ov, err := operation(doc, path, item, method)
			if err != nil {
				return docView{}, err
			}
			tag := "other"
			if tags := item.GetOperation(method).Tags; len(tags) > 0 {
				tag = tags[0]
			}
			i, ok := group[tag]
			if !ok {
				i = addGroup(tag, "")
			}
			v.Groups[i].Operations = append(v.Groups[i].Operations, ov)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		s := doc.Components.Schemas[name].Value
		sv := schemaView{Name: name, Type: typeOf(&openapi3.SchemaRef{Value: s}), Description: markdown(s.Description)}
		for _, prop := range slices.Sorted(maps.Keys(s.Properties)) {
			p := s.Properties[prop]
			desc := ""
			if p.Value != nil {
				desc = p.Value.Description
			}
			sv.Properties = append(sv.Properties, propertyView{
				Name: prop, Required: slices.Contains(s.Required, prop), Type: typeOf(p), Description: markdown(desc),
			})
		}
		v.Schemas = append(v.Schemas, sv)
	}
	return v, nil
}

// operation renders the operation of item under method.
func operation(doc *openapi3.T, path string, item *openapi3.PathItem, method string) (operationView, error) {
	op := item.GetOperation(method)
	service, _ := item.Extensions["x-paylab-service"].(string)
	ov := operationView{
		ID: op.OperationID, Method: method, Path: path, Summary: op.Summary,
		Service: service, Description: markdown(op.Description),
	}
	servers := doc.Servers
	if len(item.Servers) > 0 {
		servers = item.Servers
	}
	if len(servers) > 0 {
		ov.Server = servers[0].URL
	}
	for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
		if p.Value == nil {
			continue
		}
		ov.Parameters = append(ov.Parameters, parameterView{
			Name: p.Value.Name, In: p.Value.In, Required: p.Value.Required,
			Type: typeOf(p.Value.Schema), Description: markdown(p.Value.Description),
		})
	}
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		ov.Body = contents(op.RequestBody.Value.Content)
	}
	for _, status := range slices.Sorted(maps.Keys(op.Responses.Map())) {
		r := op.Responses.Value(status).Value
		if r == nil {
			return operationView{}, fmt.Errorf("%s %s: response %s is not resolved", method, path, status)
		}
		rv := responseView{Status: status, Headers: slices.Sorted(maps.Keys(r.Headers)), Content: contents(r.Content)}
		if r.Description != nil {
			rv.Description = markdown(*r.Description)
		}
		for _, mt := range slices.Sorted(maps.Keys(r.Content)) {
			rv.Codes = append(rv.Codes, Codes(r.Content[mt].Schema)...)
		}
		ov.Responses = append(ov.Responses, rv)
	}
	return ov, nil
}

// methods lists the methods of a path item in a fixed order.
func methods(item *openapi3.PathItem) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if item.GetOperation(m) != nil {
			out = append(out, m)
		}
	}
	return out
}

func contents(c openapi3.Content) []contentView {
	var out []contentView
	for _, mt := range slices.Sorted(maps.Keys(c)) {
		m := c[mt]
		cv := contentView{MediaType: mt, Type: typeOf(m.Schema)}
		if m.Example != nil {
			cv.Examples = append(cv.Examples, exampleView{Name: "example", JSON: pretty(m.Example)})
		}
		for _, name := range slices.Sorted(maps.Keys(m.Examples)) {
			if ex := m.Examples[name]; ex.Value != nil {
				cv.Examples = append(cv.Examples, exampleView{Name: name, JSON: pretty(ex.Value.Value)})
			}
		}
		out = append(out, cv)
	}
	return out
}

// Codes returns the problem codes a response schema names: the enum of its
// code property, in the schema or its allOf.
func Codes(ref *openapi3.SchemaRef) []string {
	if ref == nil || ref.Value == nil {
		return nil
	}
	var codes []string
	if p := ref.Value.Properties["code"]; p != nil && p.Value != nil {
		for _, v := range p.Value.Enum {
			if s, ok := v.(string); ok {
				codes = append(codes, s)
			}
		}
	}
	for _, sub := range ref.Value.AllOf {
		codes = append(codes, Codes(sub)...)
	}
	return codes
}

// typeOf renders a schema in a few words: a named schema links to its
// entry on the page.
func typeOf(ref *openapi3.SchemaRef) template.HTML {
	if ref == nil {
		return ""
	}
	if name, ok := strings.CutPrefix(ref.Ref, "#/components/schemas/"); ok {
		return template.HTML(fmt.Sprintf(`<a href="#schema-%s">%s</a>`, template.HTMLEscapeString(name), template.HTMLEscapeString(name)))
	}
	s := ref.Value
	if s == nil {
		return ""
	}
	join := func(sep string, refs openapi3.SchemaRefs) template.HTML {
		var parts []string
		for _, r := range refs {
			if r.Ref == "" && r.Value != nil && r.Value.Type.IsEmpty() && len(r.Value.AllOf)+len(r.Value.OneOf)+len(r.Value.AnyOf) == 0 {
				continue // an inline refinement (a const status, the codes' enum): shown beside
			}
			if t := typeOf(r); t != "" {
				parts = append(parts, string(t))
			}
		}
		return template.HTML(strings.Join(parts, sep))
	}
	switch {
	case len(s.AllOf) > 0:
		return join(" + ", s.AllOf)
	case len(s.OneOf) > 0:
		return "one of " + join(" | ", s.OneOf)
	case len(s.AnyOf) > 0:
		return "any of " + join(" | ", s.AnyOf)
	case s.Const != nil:
		return template.HTML("<code>" + template.HTMLEscapeString(pretty(s.Const)) + "</code>")
	}
	var b strings.Builder
	types := "any"
	if s.Type != nil && !s.Type.IsEmpty() {
		types = strings.Join(s.Type.Slice(), " or ")
	}
	if s.Type.Includes("array") && s.Items != nil {
		b.WriteString("array of " + string(typeOf(s.Items)))
	} else {
		b.WriteString(template.HTMLEscapeString(types))
	}
	if s.Format != "" {
		b.WriteString(" (" + template.HTMLEscapeString(s.Format) + ")")
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = "<code>" + template.HTMLEscapeString(pretty(e)) + "</code>"
		}
		b.WriteString(": " + strings.Join(vals, ", "))
	}
	if s.Pattern != "" {
		b.WriteString(" matching <code>" + template.HTMLEscapeString(s.Pattern) + "</code>")
	}
	return template.HTML(b.String())
}

func pretty(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// markdown renders CommonMark; raw HTML in the source is dropped.
func markdown(src string) template.HTML {
	var buf bytes.Buffer
	if err := goldmark.Convert([]byte(src), &buf); err != nil {
		return template.HTML(template.HTMLEscapeString(src))
	}
	return template.HTML(buf.String())
}

var page = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} {{.Version}}</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 70rem; padding: 1rem 2rem; color: #1d232a; }
code, pre { font: 13px/1.4 ui-monospace, monospace; }
pre { background: #f4f6f8; padding: .6rem; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { border-bottom: 1px solid #dde2e6; padding: .3rem .5rem; text-align: left; vertical-align: top; }
section.op { border: 1px solid #dde2e6; border-radius: 6px; padding: 0 1rem .5rem; margin: 1rem 0; }
.method { font-weight: 700; padding: 0 .4rem; border-radius: 3px; color: #fff; background: #2f6f4f; }
.method.POST { background: #1f5fa0; }
.muted { color: #5b6670; }
nav li { list-style: none; }
</style>
</head>
<body>
<h1>{{.Title}} <span class="muted">{{.Version}}</span></h1>
<p class="muted">Rendered from <code>api/openapi.yaml</code>; the orders API serves the document itself at <code>GET /openapi.yaml</code>.</p>
{{.Description}}
<nav><h2>Operations</h2><ul>
{{range .Groups}}{{range .Operations}}<li><a href="#{{.ID}}"><code>{{.Method}} {{.Path}}</code></a> {{.Summary}}</li>
{{end}}{{end}}</ul></nav>
{{range .Groups}}{{if .Operations}}
<h2 id="tag-{{.Tag}}">{{.Tag}}</h2>
{{.Description}}
{{range .Operations}}
<section class="op" id="{{.ID}}">
<h3><span class="method {{.Method}}">{{.Method}}</span> <code>{{.Path}}</code> {{.Summary}}</h3>
<p class="muted">operation <code>{{.ID}}</code>{{if .Service}}, served by <b>{{.Service}}</b>{{end}}{{if .Server}} at <code>{{.Server}}</code>{{end}}</p>
{{.Description}}
{{if .Parameters}}<h4>Parameters</h4>
<table><tr><th>name</th><th>in</th><th>schema</th><th>description</th></tr>
{{range .Parameters}}<tr><td><code>{{.Name}}</code>{{if .Required}} <b>required</b>{{end}}</td><td>{{.In}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>
{{end}}</table>{{end}}
{{if .Body}}<h4>Request body</h4>{{range .Body}}{{template "content" .}}{{end}}{{end}}
<h4>Responses</h4>
<table><tr><th>status</th><th>description</th><th>body</th></tr>
{{$op := .ID}}{{range .Responses}}<tr id="{{$op}}-{{.Status}}"><td><b>{{.Status}}</b></td><td>{{.Description}}{{if .Headers}}<p class="muted">headers: {{range $i, $h := .Headers}}{{if $i}}, {{end}}<code>{{$h}}</code>{{end}}</p>{{end}}{{if .Codes}}<p>codes: {{range $i, $c := .Codes}}{{if $i}}, {{end}}<code>{{$c}}</code>{{end}}</p>{{end}}</td><td>{{range .Content}}{{template "content" .}}{{end}}</td></tr>
{{end}}</table>
</section>
{{end}}{{end}}{{end}}
<h2>Schemas</h2>
{{range .Schemas}}
<section class="op" id="schema-{{.Name}}">
<h3>{{.Name}} <span class="muted">{{.Type}}</span></h3>
{{.Description}}
{{if .Properties}}<table><tr><th>property</th><th>schema</th><th>description</th></tr>
{{range .Properties}}<tr><td><code>{{.Name}}</code>{{if .Required}} <b>required</b>{{end}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>
{{end}}</table>{{end}}
</section>
{{end}}
</body>
</html>
{{define "content"}}<p><code>{{.MediaType}}</code> {{.Type}}</p>{{range .Examples}}<details><summary>{{.Name}}</summary><pre>{{.JSON}}</pre></details>{{end}}{{end}}
`))
