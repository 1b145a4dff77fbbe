package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

const testToken = "s3cret-token"

func newServer(t *testing.T, enabled bool) (*httptest.Server, *Registry, chan int) {
	t.Helper()
	reg, exits := newTestRegistry(t)
	reg.Point("relay.after_lease")
	reg.Point("relay.after_publish_before_mark")
	r := chi.NewRouter()
	if err := Mount(r, reg, enabled, testToken); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, reg, exits
}

func call(t *testing.T, srv *httptest.Server, method, path, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRoutesDoNotExistWhenDisabled(t *testing.T) {
	t.Parallel()
	srv, _, exits := newServer(t, false)
	for _, c := range []struct{ method, path string }{
		{"GET", "/chaos/faults"}, {"PUT", "/chaos/faults/relay.after_lease"}, {"POST", "/chaos/kill"},
	} {
		if code, _ := call(t, srv, c.method, c.path, "Bearer "+testToken, `{"action":"crash"}`); code != http.StatusNotFound {
			t.Errorf("%s %s = %d, want 404", c.method, c.path, code)
		}
	}
	if len(exits) != 0 {
		t.Fatal("process exited")
	}
}

func TestRoutesRefuseMissingOrWrongToken(t *testing.T) {
	t.Parallel()
	srv, reg, exits := newServer(t, true)
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + testToken + "x", testToken, "Basic " + testToken} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/chaos/faults"}, {"PUT", "/chaos/faults/relay.after_lease"},
			{"DELETE", "/chaos/faults"}, {"POST", "/chaos/kill"},
		} {
			if code, _ := call(t, srv, c.method, c.path, auth, `{"action":"crash"}`); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %q = %d, want 401", c.method, c.path, auth, code)
			}
		}
	}
	if s, _ := reg.Status("relay.after_lease"); s.Armed || len(exits) != 0 {
		t.Fatalf("refused calls had effects: %+v, exits %d", s, len(exits))
	}
}

func TestMountRefusesAnEmptyToken(t *testing.T) {
	t.Parallel()
	if err := Mount(chi.NewRouter(), NewRegistry(), true, ""); err == nil {
		t.Fatal("Mount with an empty token succeeded")
	}
}

func TestMountRefusesAPublishedToken(t *testing.T) {
	t.Parallel()
	for _, token := range PublishedTokens {
		if err := Mount(chi.NewRouter(), NewRegistry(), true, token); err == nil || !strings.Contains(err.Error(), "of your own") {
			t.Errorf("Mount accepted the published token %q: %v", token, err)
		}
		if err := Mount(chi.NewRouter(), NewRegistry(), false, token); err != nil {
			t.Errorf("with the controls off the token is not used: %v", err)
		}
	}
}

func TestArmListDisarmOverHTTP(t *testing.T) {
	t.Parallel()
	srv, reg, _ := newServer(t, true)
	auth := "Bearer " + testToken

	code, body := call(t, srv, "PUT", "/chaos/faults/relay.after_lease", auth, `{"action":"error","count":2}`)
	if code != http.StatusOK {
		t.Fatalf("PUT = %d %s", code, body)
	}
	if err := reg.Point("relay.after_lease").Hit(t.Context()); err == nil {
		t.Fatal("armed point did not fire")
	}
	code, body = call(t, srv, "GET", "/chaos/faults/relay.after_lease", auth, "")
	var s Status
	if err := json.Unmarshal([]byte(body), &s); err != nil || code != http.StatusOK {
		t.Fatalf("GET = %d %s (%v)", code, body, err)
	}
	if !s.Armed || s.Fault.Action != Error || s.Remaining == nil || *s.Remaining != 1 || s.Fired != 1 {
		t.Fatalf("status = %+v", s)
	}

	code, body = call(t, srv, "PUT", "/chaos/faults", auth,
		`{"relay.after_publish_before_mark":{"action":"delay","delay":"10ms","probability":0.5}}`)
	if code != http.StatusOK {
		t.Fatalf("PUT many = %d %s", code, body)
	}
	var all []Status
	code, body = call(t, srv, "GET", "/chaos/faults", auth, "")
	if err := json.Unmarshal([]byte(body), &all); err != nil || code != http.StatusOK || len(all) != 2 {
		t.Fatalf("GET all = %d %s (%v)", code, body, err)
	}
	if !all[0].Armed || !all[1].Armed || time_(all[1]) != "10ms" {
		t.Fatalf("list = %s", body)
	}

	if code, _ := call(t, srv, "DELETE", "/chaos/faults/relay.after_lease", auth, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE one = %d", code)
	}
	if code, _ := call(t, srv, "DELETE", "/chaos/faults", auth, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE all = %d", code)
	}
	for _, st := range reg.List() {
		if st.Armed {
			t.Fatalf("still armed after DELETE: %+v", st)
		}
	}
}

// time_ returns the delay of the after_publish_before_mark entry.
func time_(s Status) string {
	if s.Fault == nil {
		return ""
	}
	b, _ := json.Marshal(s.Fault.Delay)
	return strings.Trim(string(b), `"`)
}

func TestArmErrorsOverHTTP(t *testing.T) {
	t.Parallel()
	srv, _, _ := newServer(t, true)
	auth := "Bearer " + testToken
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"unknown point", "PUT", "/chaos/faults/nope", `{"action":"crash"}`, http.StatusNotFound},
		{"unknown point in many", "PUT", "/chaos/faults", `{"nope":{"action":"crash"}}`, http.StatusNotFound},
		{"bad action", "PUT", "/chaos/faults/relay.after_lease", `{"action":"explode"}`, http.StatusUnprocessableEntity},
		{"bad json", "PUT", "/chaos/faults/relay.after_lease", `{"action":`, http.StatusBadRequest},
		{"unknown field", "PUT", "/chaos/faults/relay.after_lease", `{"action":"crash","when":"now"}`, http.StatusBadRequest},
		{"get unknown", "GET", "/chaos/faults/nope", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := call(t, srv, tt.method, tt.path, auth, tt.body); code != tt.want {
				t.Fatalf("= %d %s, want %d", code, body, tt.want)
			}
		})
	}
}

func TestKillExitsAtOnce(t *testing.T) {
	t.Parallel()
	srv, _, exits := newServer(t, true)
	if code, _ := call(t, srv, "POST", "/chaos/kill", "Bearer "+testToken, ""); code != http.StatusAccepted {
		t.Fatalf("kill = %d, want 202", code)
	}
	select {
	case code := <-exits:
		if code != ExitCode {
			t.Fatalf("exit status %d, want %d", code, ExitCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("kill did not exit")
	}
}
