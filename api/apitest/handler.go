package apitest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Handler wraps next so that every exchange through it is checked (Check);
// the violations fail t when it ends. Handlers may be called from any
// goroutine: the violations are collected and reported by t itself.
func (c *Contract) Handler(t testing.TB, next http.Handler) http.Handler {
	return c.handler(t, next, c.Check)
}

// ResponseHandler is Handler with CheckResponse.
func (c *Contract) ResponseHandler(t testing.TB, next http.Handler) http.Handler {
	return c.handler(t, next, c.CheckResponse)
}

func (c *Contract) handler(t testing.TB, next http.Handler, check func(Exchange) error) http.Handler {
	t.Helper()
	var (
		mu         sync.Mutex
		violations []error
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		const shown = 5
		for i, v := range violations {
			if i == shown {
				t.Errorf("contract (api/openapi.yaml): and %d more violations", len(violations)-shown)
				break
			}
			t.Errorf("contract (api/openapi.yaml): %v", v)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "apitest: reading the request body: "+err.Error(), http.StatusInternalServerError)
			return
		}
		sent := r.Clone(r.Context())
		r.Body = newBody(body)

		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for name, values := range rec.Header() {
			w.Header()[name] = values
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())

		err = check(Exchange{Request: sent, RequestBody: body, Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			violations = append(violations, err)
		}
	})
}

func newBody(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

var contracts sync.Map // Service → func() (*Contract, error)

// ContractOf returns the contract of svc, loaded once per test binary; it
// fails t when the document does not load.
func ContractOf(t testing.TB, svc Service) *Contract {
	t.Helper()
	load, _ := contracts.LoadOrStore(svc, sync.OnceValues(func() (*Contract, error) { return New(svc) }))
	c, err := load.(func() (*Contract, error))()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
