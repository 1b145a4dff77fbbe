// Package logctx carries log attributes in a context — the request id, the
// trace id — and adds them to every record logged with that context, by any
// layer, through a slog.Handler wrapper.
package logctx

import (
	"context"
	"log/slog"
)

type attrsKey struct{}

// With returns a context whose log records carry attrs besides those
// already in ctx.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	all := make([]slog.Attr, 0, len(prev)+len(attrs))
	all = append(append(all, prev...), attrs...)
	return context.WithValue(ctx, attrsKey{}, all)
}

// Value returns the string value of the attribute key carried by ctx.
func Value(ctx context.Context, key string) string {
	attrs, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	for i := len(attrs) - 1; i >= 0; i-- {
		if attrs[i].Key == key {
			return attrs[i].Value.String()
		}
	}
	return ""
}

// Handler wraps h so that records logged with a context carry its
// attributes.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if attrs, ok := ctx.Value(attrsKey{}).([]slog.Attr); ok {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }
