package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/paylab/paylab/internal/platform/chaos"
)

// The chaos controls are the processes' own: the console forwards each
// request to the process's admin listener with the Authorization header the
// page sent — the token its user typed, or none — and hands back the
// process's answer. It adds no token of its own, so what the process
// refuses stays refused.

// toProc forwards the request to the named process's chaos route path.
func (s *Server) toProc(path func(r *http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.proc(r.Context(), chi.URLParam(r, "proc"))
		if !ok {
			writeError(w, http.StatusNotFound, "no process "+chi.URLParam(r, "proc"))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			writeError(w, http.StatusBadRequest, "reading the request: "+err.Error())
			return
		}
		status, answer, err := s.forward(r.Context(), p, r.Method, path(r), r.Header.Get("Authorization"), body)
		if err != nil {
			s.log.WarnContext(r.Context(), "console: forwarding to "+p.Name, "error", err)
			writeError(w, http.StatusBadGateway, p.Name+" does not answer")
			return
		}
		writeAnswer(w, status, answer)
	}
}

// writeAnswer hands back a process's JSON answer as it came.
func writeAnswer(w http.ResponseWriter, status int, answer []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

func faultPath(r *http.Request) string {
	return "/chaos/faults/" + url.PathEscape(chi.URLParam(r, "point"))
}

// forward sends one request to p's admin listener and returns its answer.
func (s *Server) forward(ctx context.Context, p Proc, method, path, authorization string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(p.Admin, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := s.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil && method != http.MethodPost { // a killed process may cut its answer short
		return 0, nil, err
	}
	if len(answer) == 0 {
		answer = []byte("{}")
	}
	return res.StatusCode, answer, nil
}

func (s *Server) proc(ctx context.Context, name string) (Proc, bool) {
	for _, p := range s.d.Procs(ctx) {
		if p.Name == name {
			return p, true
		}
	}
	return Proc{}, false
}

// procFaults is one process's answer to GET /chaos/faults, as the page
// gets it from GET /api/faults: its own points' state, or the refusal.
type procFaults struct {
	Status int            `json:"status"`
	Points []chaos.Status `json:"points,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// faults asks every process for its faults' state with the page's token.
func (s *Server) faults(w http.ResponseWriter, r *http.Request) {
	procs := s.d.Procs(r.Context())
	answers := make([]procFaults, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { answers[i] = s.faultsOf(r.Context(), p, r.Header.Get("Authorization")) })
	}
	wg.Wait()
	out := make(map[string]procFaults, len(procs))
	for i, p := range procs {
		out[p.Name] = answers[i]
	}
	writeJSON(w, http.StatusOK, out)
}

// faultsOf asks p for its own points' state with authorization.
func (s *Server) faultsOf(ctx context.Context, p Proc, authorization string) procFaults {
	status, body, err := s.forward(ctx, p, http.MethodGet, "/chaos/faults", authorization, nil)
	switch {
	case err != nil:
		return procFaults{Status: http.StatusBadGateway, Error: p.Name + " does not answer"}
	case status/100 != 2:
		return procFaults{Status: status, Error: errorText(body)}
	}
	var all []chaos.Status
	if err := json.Unmarshal(body, &all); err != nil {
		return procFaults{Status: http.StatusBadGateway, Error: fmt.Sprintf("%s answered: %v", p.Name, err)}
	}
	f := procFaults{Status: status, Points: []chaos.Status{}}
	for _, st := range all {
		if ownPoint(p.Role, st.Point) {
			f.Points = append(f.Points, st)
		}
	}
	return f
}

// errorText is the "error" of a JSON error answer, or the answer itself.
func errorText(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(body))
}
