package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/lab/reconcile"
)

// Limits of one "place payments".
const (
	maxPayments = 100_000
	maxRate     = 2_000
)

// verifyQuiet is how long the pipeline must stay unchanged to count as
// settled; verifyTimeout bounds the wait.
const (
	verifyQuiet   = 2 * time.Second
	verifyTimeout = 3 * time.Minute
)

// epoch is what the reconciliation counts from: a settled report taken when
// the console started or the mode last switched (the zero report on a fresh
// deployment), so that a run in outbox mode is not blamed for what an
// earlier naive run lost.
type epoch struct {
	since string
	ready chan struct{} // closed once base is known
	base  reconcile.Report
	err   error
}

func newEpoch(since string, base reconcile.Report) *epoch {
	e := &epoch{since: since, ready: make(chan struct{}), base: base}
	close(e.ready)
	return e
}

// settleEpoch takes a settled report of src as the base of a new epoch, in
// the background.
func settleEpoch(ctx context.Context, since string, src reconcile.Sources) *epoch {
	e := &epoch{since: since, ready: make(chan struct{})}
	go func() {
		defer close(e.ready)
		e.base, e.err = reconcile.Settle(ctx, src, verifyTimeout, verifyQuiet)
	}()
	return e
}

// placeLoad: POST /api/load {"count": 200, "rate": 50}, behind requireToken.
func (s *Server) placeLoad(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Count int `json:"count"`
		Rate  int `json:"rate"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Count < 1 || req.Count > maxPayments || req.Rate < 1 || req.Rate > maxRate {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("count must be 1 to %d and rate 1 to %d per second", maxPayments, maxRate))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.load.Running {
		writeError(w, http.StatusConflict, "payments are being placed: wait until they are")
		return
	}
	if s.switching != "" {
		writeError(w, http.StatusConflict, "the mode is being switched")
		return
	}
	s.seed++
	s.load = LoadView{Running: true, Count: req.Count, Rate: req.Rate}
	s.created.Store(0)
	cfg := loadgen.Config{BaseURL: s.d.APIURL(), Rate: req.Rate, Count: req.Count, Seed: s.seed, Timeout: 30 * time.Second,
		OnCreated: func(string) { s.created.Add(1) }}
	go func() {
		keys, err := s.keys.get(s.bg, s.d.Sources().OrdersURL)
		var rep loadgen.Report
		if err == nil {
			cfg.Keys = keys
			rep, err = loadgen.Run(s.bg, cfg)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.load.Running, s.load.StatusCode = false, rep.StatusCode
		if err != nil {
			s.load.Error = s.failed("placing payments", err)
		}
	}()
	writeJSON(w, http.StatusAccepted, map[string]any{"count": req.Count, "rate": req.Rate})
}

// runVerify: POST /api/verify, behind requireToken. The reconciliation
// waits for the pipeline to settle, so it runs in the background and the
// state shows its outcome.
func (s *Server) runVerify(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.verify.Running {
		writeError(w, http.StatusConflict, "a verification is running")
		return
	}
	ep := s.epoch
	s.verify = VerifyView{Running: true, Since: ep.since, Report: s.verify.Report}
	go func() {
		c, err := s.check(ep)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.verify.Running = false
		if err != nil {
			s.verify.Error = s.failed("the reconciliation", err)
			return
		}
		s.verify.Report = c
	}()
	writeJSON(w, http.StatusAccepted, map[string]string{"since": ep.since})
}

// check settles the pipeline and reconciles it since ep's base.
func (s *Server) check(ep *epoch) (*Check, error) {
	select {
	case <-ep.ready:
	case <-s.bg.Done():
		return nil, s.bg.Err()
	}
	if ep.err != nil {
		return nil, fmt.Errorf("settling the baseline: %w", ep.err)
	}
	rep, err := reconcile.Settle(s.bg, s.d.Sources(), verifyTimeout, verifyQuiet)
	if err != nil {
		return nil, fmt.Errorf("reconciling: %w", err)
	}
	since := rep.Since(ep.base)
	c := &Check{At: time.Now(), Captures: since.Captures, Refunds: since.Refunds, Ledger: since.Ledger,
		Notifications: since.Notifications, InboxAbsorbed: since.InboxAbsorbed, Violations: since.Violations()}
	if since.Wire != nil {
		c.WireDuplicate = since.Wire.Duplicates
	}
	if c.Violations == nil {
		c.Violations = []string{}
	}
	if len(ep.base.Violations()) > 0 {
		c.Before = rep.Violations()
	}
	return c, nil
}

// switchMode: POST /api/mode {"mode": "naive"}. Behind requireToken, as
// every action: only a token the processes take may restart anything.
func (s *Server) switchMode(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Mode string `json:"mode"`
	}
	if !decode(w, r, &req) {
		return
	}
	if reason := s.d.FixedMode(); reason != "" {
		writeError(w, http.StatusConflict, reason)
		return
	}
	if !slices.Contains(Modes, req.Mode) {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("mode %q is not one of %v", req.Mode, Modes))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.load.Running:
		writeError(w, http.StatusConflict, "payments are being placed: switch once they are")
		return
	case s.switching != "":
		writeError(w, http.StatusConflict, "the mode is being switched to "+s.switching)
		return
	}
	s.switching, s.switchErr = req.Mode, ""
	go func() {
		err := s.restartIn(req.Mode)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.switching = ""
		if err != nil {
			s.switchErr = s.failed("the switch to "+req.Mode, err)
		}
	}()
	writeJSON(w, http.StatusAccepted, map[string]string{"mode": req.Mode})
}

// restartIn settles the pipeline — the new epoch's base — then restarts
// the orders API in mode.
func (s *Server) restartIn(mode string) error {
	base, err := reconcile.Settle(s.bg, s.d.Sources(), verifyTimeout, verifyQuiet)
	if err != nil {
		return fmt.Errorf("settling before the switch: %w", err)
	}
	if err := s.d.SwitchMode(s.bg, mode); err != nil {
		return err
	}
	s.mu.Lock()
	s.epoch = newEpoch(fmt.Sprintf("the switch to %s at %s", mode, time.Now().Format("15:04:05")), base)
	if !s.verify.Running {
		s.verify = VerifyView{Since: s.epoch.since}
	}
	s.mu.Unlock()
	return nil
}

// failed logs err, which may name a database's host or an admin address,
// and returns what the page shows instead.
func (s *Server) failed(what string, err error) string {
	s.log.Warn("console: "+what+" failed", "error", err)
	if errors.Is(err, context.Canceled) {
		return what + " was stopped"
	}
	return what + " failed: a database, Kafka or a process did not answer in time (the console's log has the detail)"
}

// decode reads a small JSON body into v, or answers 400.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
