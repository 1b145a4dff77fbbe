package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRunUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"nope"}, {"probe"}, {"load", "--rate=x"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want usage error", args, err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out); err != nil || !strings.Contains(out.String(), "migrate") {
		t.Errorf("help: %v %q", err, out.String())
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	if err := run(context.Background(), []string{"probe", ok.URL}, &bytes.Buffer{}); err != nil {
		t.Errorf("probe of a healthy server: %v", err)
	}
	if err := run(context.Background(), []string{"probe", down.URL}, &bytes.Buffer{}); err == nil {
		t.Error("probe of a 503 server succeeded")
	}
}
