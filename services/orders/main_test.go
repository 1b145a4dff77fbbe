package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRunUsage(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out); err != nil || !strings.Contains(out.String(), "relay") {
		t.Fatalf("help: %v %q", err, out.String())
	}
	for _, args := range [][]string{{"bogus"}, {"serve", "extra"}} {
		if err := run(context.Background(), args, &out); !errors.Is(err, errUsage) {
			t.Errorf("%v: err = %v, want usage", args, err)
		}
	}
}

func TestRunRejectsABadLogLevel(t *testing.T) {
	t.Setenv("LOG_LEVEL", "chatty")
	for _, cmd := range []string{"serve", "relay"} {
		err := run(context.Background(), []string{cmd}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
			t.Errorf("%s: err = %v, want a message naming LOG_LEVEL", cmd, err)
		}
	}
}
