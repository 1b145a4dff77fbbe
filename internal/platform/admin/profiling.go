package admin

import (
	"net/http/pprof"

	"github.com/go-chi/chi/v5"
)

// MountProfiling serves Go's profiles (net/http/pprof) under /debug/pprof/
// on the admin router when enabled. They show the process's memory and
// goroutines, so they are off unless ADMIN_PPROF=true, and the admin
// listener is never public.
func MountProfiling(r chi.Router, enabled bool) {
	if !enabled {
		return
	}
	r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	r.HandleFunc("/debug/pprof/profile", pprof.Profile)
	r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	r.HandleFunc("/debug/pprof/*", pprof.Index) // the index, and heap, goroutine, allocs… by name
}
