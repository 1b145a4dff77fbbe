package console

import (
	"context"
	"net/http"
)

// Every action that changes something — placing payments, a verification,
// a fault toggle, a kill, the mode switch — needs the deployment's chaos
// token. The console holds none: it asks the processes' admin listeners
// whether they take the Authorization header the page sent, as they do for
// a toggle, and lets the action through only when one does. Reads of the
// state stay open.

// requireToken lets a request through only with a token the processes
// accept; otherwise it answers what they answered (401 for a missing or
// wrong token), 403 when their chaos controls are off, or 502 when none
// answers.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body := s.checkToken(r.Context(), r.Header.Get("Authorization"))
		switch {
		case status/100 == 2:
			next.ServeHTTP(w, r)
		case status == http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="chaos"`)
			writeAnswer(w, status, body)
		case status == http.StatusNotFound:
			writeError(w, http.StatusForbidden, "the deployment runs without chaos controls (CHAOS_ENABLED=false), "+
				"so the console takes no action: set CHAOS_ENABLED=true and a CHAOS_TOKEN of your own")
		case status == 0:
			writeError(w, http.StatusBadGateway, "no process answers to check the chaos token: try again once one is up")
		default:
			writeAnswer(w, status, body)
		}
	})
}

// checkToken asks the processes, in turn until one answers, whether they
// take authorization on GET /chaos/faults; status 0: none answered.
func (s *Server) checkToken(ctx context.Context, authorization string) (int, []byte) {
	for _, p := range s.d.Procs(ctx) {
		status, body, err := s.forward(ctx, p, http.MethodGet, "/chaos/faults", authorization, nil)
		if err != nil {
			s.log.DebugContext(ctx, "console: checking the token with "+p.Name, "error", err)
			continue // crashed or restarting: the next one decides
		}
		return status, body
	}
	return 0, nil
}
