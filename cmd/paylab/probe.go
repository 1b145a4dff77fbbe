package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runProbe: paylab probe URL — exits 0 when GET URL answers 2xx within 3 s.
// Container health checks use it: the runtime image has no shell or curl.
func runProbe(ctx context.Context, args []string, out io.Writer) error {
	if len(args) != 1 {
		return errUsage
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("probe: %s answered %s", args[0], res.Status)
	}
	fmt.Fprintf(out, "%s: %s\n", args[0], res.Status)
	return nil
}
