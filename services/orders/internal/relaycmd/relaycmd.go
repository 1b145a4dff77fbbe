// Package relaycmd runs the outbox relay as its own process: `orders relay`.
package relaycmd

import (
	"context"
	"errors"
	"log/slog"
)

// Run runs one relay until ctx ends.
func Run(ctx context.Context, log *slog.Logger) error {
	return errors.New("relay: not built yet")
}
