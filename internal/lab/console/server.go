package console

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/paylab/paylab/internal/lab/reconcile"
)

//go:embed web
var web embed.FS

var page = template.Must(template.ParseFS(web, "web/index.html"))

// Server is the console: the page, the state it polls, and the actions.
type Server struct {
	d    Deployment
	log  *slog.Logger
	col  *collector
	http *http.Client // to the admin listeners
	bg   context.Context

	mu        sync.Mutex
	state     State // the last collected
	load      LoadView
	created   atomic.Uint64 // payments created by the running or last load
	seed      uint64
	verify    VerifyView
	epoch     *epoch
	switching string
	switchErr string
	keys      apiKeys // the load's API keys
}

// New returns the console of d. Work the page starts (payments, a
// reconciliation, a mode switch) ends with ctx.
func New(ctx context.Context, d Deployment, log *slog.Logger) (*Server, error) {
	col, err := newCollector(d, log)
	if err != nil {
		return nil, err
	}
	s := &Server{d: d, log: log, col: col, http: &http.Client{Timeout: 10 * time.Second}, bg: ctx}
	if d.Target() == "local" {
		s.epoch = newEpoch("the console started", reconcile.Report{})
	} else {
		s.epoch = settleEpoch(ctx, "the console started", d.Sources())
	}
	s.verify.Since = s.epoch.since
	return s, nil
}

// Run collects the counters every second until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	defer s.col.close()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		st := s.col.collect(ctx)
		s.mu.Lock()
		s.state = st
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Handler serves the page and its API to the hosts on the allow-list
// (any other Host header is refused with 403: DNS rebinding). Reads of the
// state are open; every action needs a chaos token the processes take
// (requireToken). Requests that change something are also refused from
// other origins (a page elsewhere cannot drive the console through its
// user's browser).
func (s *Server) Handler(hosts Hosts) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(func(next http.Handler) http.Handler { return checkHost(hosts, next) })
	r.Use(http.NewCrossOriginProtection().Handler)
	static, _ := fs.Sub(web, "web")
	r.Get("/", s.index)
	r.Handle("/static/*", http.StripPrefix("/static/", http.FileServerFS(static)))
	r.Get("/api/state", s.current)
	r.Get("/api/faults", s.faults)
	r.Group(func(r chi.Router) {
		r.Use(s.requireToken)
		r.Put("/api/procs/{proc}/faults/{point}", s.toProc(faultPath))
		r.Delete("/api/procs/{proc}/faults/{point}", s.toProc(faultPath))
		r.Delete("/api/procs/{proc}/faults", s.toProc(func(*http.Request) string { return "/chaos/faults" }))
		r.Post("/api/procs/{proc}/kill", s.toProc(func(*http.Request) string { return "/chaos/kill" }))
		r.Post("/api/mode", s.switchMode)
		r.Post("/api/load", s.placeLoad)
		r.Post("/api/verify", s.runVerify)
	})
	return r
}

// snapshot is the last collected state with the deployment's settings and
// the actions' progress.
func (s *Server) snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.Target, st.Settings, st.FixedMode = s.d.Target(), s.d.Settings(), s.d.FixedMode()
	st.Load = s.load
	st.Load.Created = s.created.Load()
	st.Verify = s.verify
	st.Switching = s.switching
	if s.switchErr != "" {
		st.Problems = append(append([]string(nil), st.Problems...), s.switchErr)
	}
	return st
}

func (s *Server) current(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.snapshot())
}

// pageData is what the template renders: the processes and their fault
// points, the modes; the counters arrive by the state endpoint.
type pageData struct {
	State State
	Modes []string
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	st := s.snapshot()
	if st.Procs == nil { // before the first collection
		for _, p := range s.d.Procs(r.Context()) {
			st.Procs = append(st.Procs, ProcView{Name: p.Name, Role: p.Role, Points: PointsIn(p.Role, st.Settings.RelayMode)})
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := page.Execute(w, pageData{State: st, Modes: Modes}); err != nil {
		s.log.ErrorContext(r.Context(), "console: rendering the page", "error", err)
	}
}
