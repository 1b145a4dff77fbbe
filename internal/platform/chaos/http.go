package chaos

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"
)

// Mount adds the chaos routes to an admin router when enabled is true; when
// it is false the routes do not exist (404). token is the bearer token every
// call must carry; Mount refuses an empty one and a published one
// (PublishedTokens).
//
//	GET    /chaos/faults          every point and its armed fault
//	PUT    /chaos/faults          arm several: {"relay.after_lease": {"action": "crash", "count": 1}}
//	DELETE /chaos/faults          disarm every point
//	GET    /chaos/faults/{point}  one point
//	PUT    /chaos/faults/{point}  arm one: {"action": "delay", "delay": "2s", "probability": 0.1}
//	DELETE /chaos/faults/{point}  disarm one
//	POST   /chaos/kill            exit the process at once (status 137)
func Mount(r chi.Router, reg *Registry, enabled bool, token string) error {
	if !enabled {
		return nil
	}
	if token == "" {
		return errors.New("chaos: CHAOS_TOKEN is empty; it is required when CHAOS_ENABLED=true")
	}
	if slices.Contains(PublishedTokens, token) {
		return fmt.Errorf("chaos: CHAOS_TOKEN is %q, a token published in paylab's files that anyone may know: set one of your own (openssl rand -hex 24)", token)
	}
	r.Route("/chaos", func(r chi.Router) {
		r.Use(requireToken(token))
		h := handlers{reg: reg}
		r.Get("/faults", h.list)
		r.Put("/faults", h.armMany)
		r.Delete("/faults", h.disarmAll)
		r.Get("/faults/{point}", h.get)
		r.Put("/faults/{point}", h.arm)
		r.Delete("/faults/{point}", h.disarm)
		r.Post("/kill", h.kill)
	})
	return nil
}

// PublishedTokens are chaos tokens that paylab's own files have shown as
// examples or defaults: Mount refuses them.
var PublishedTokens = []string{"change-me-chaos-token"}

// requireToken refuses requests without "Authorization: Bearer <token>",
// comparing in constant time.
func requireToken(token string) func(http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got := []byte(r.Header.Get("Authorization"))
			if subtle.ConstantTimeCompare(got, want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="chaos"`)
				writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

type handlers struct{ reg *Registry }

func (h handlers) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.reg.List())
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) {
	s, err := h.reg.Status(chi.URLParam(r, "point"))
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (h handlers) arm(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if !decode(w, r, &f) {
		return
	}
	name := chi.URLParam(r, "point")
	if err := h.reg.Arm(name, f); err != nil {
		writeArmError(w, err)
		return
	}
	s, _ := h.reg.Status(name)
	writeJSON(w, http.StatusOK, s)
}

// armMany checks every fault before arming any of them.
func (h handlers) armMany(w http.ResponseWriter, r *http.Request) {
	var faults map[string]Fault
	if !decode(w, r, &faults) {
		return
	}
	for name, f := range faults {
		if _, err := h.reg.lookup(name); err != nil {
			writeError(w, http.StatusNotFound, err.Error())
			return
		}
		if err := f.Validate(); err != nil {
			writeError(w, http.StatusUnprocessableEntity, name+": "+err.Error())
			return
		}
	}
	for name, f := range faults {
		if err := h.reg.Arm(name, f); err != nil {
			writeArmError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, h.reg.List())
}

func (h handlers) disarm(w http.ResponseWriter, r *http.Request) {
	if err := h.reg.Disarm(chi.URLParam(r, "point")); err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h handlers) disarmAll(w http.ResponseWriter, _ *http.Request) {
	h.reg.DisarmAll()
	w.WriteHeader(http.StatusNoContent)
}

// kill answers 202, flushes the answer, then exits without any cleanup.
func (h handlers) kill(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "killing"})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	h.reg.exit(ExitCode)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func writeArmError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrUnknownPoint) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeError(w, http.StatusUnprocessableEntity, err.Error())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
