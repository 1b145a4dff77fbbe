// Package envconfig reads a binary's configuration — one struct, its fields
// tagged with their environment variables and documented defaults — and
// logs it with the secrets masked. Errors name the variable, never the Go
// field.
package envconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/caarlos0/env/v11"
)

// Load reads a T from environ (as os.Environ gives it, parsed to a map; nil
// reads the process's environment), starting from base: a field whose
// variable is unset and has no envDefault keeps base's value. Then validate,
// when not nil, checks the result. Parse errors read "configuration: VAR:
// invalid TYPE value: …".
func Load[T any](environ map[string]string, base T, validate func(T) error) (T, error) {
	cfg := base
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: environ}); err != nil {
		return cfg, nameVariables[T](err)
	}
	if validate != nil {
		return cfg, validate(cfg)
	}
	return cfg, nil
}

// nameVariables rewrites env's parse errors, which name the Go field, to
// name the environment variable instead.
func nameVariables[T any](err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("configuration: %w", err)
	}
	t := reflect.TypeFor[T]()
	errs := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				errs = append(errs, fmt.Errorf("configuration: %s: invalid %s value: %w", f.Tag.Get("env"), pe.Type, pe.Err))
				continue
			}
		}
		errs = append(errs, fmt.Errorf("configuration: %w", e))
	}
	return errors.Join(errs...)
}

// LogValue is cfg (a struct, or a pointer to one) as a log group keyed by
// environment variable, embedded structs included. A field tagged
// `redact:"password"` is a URL logged with its password masked; one tagged
// `redact:"value"` is logged as "***" when set, "" when not.
func LogValue(cfg any) slog.Value {
	v := reflect.Indirect(reflect.ValueOf(cfg))
	if v.Kind() != reflect.Struct {
		return slog.AnyValue(cfg)
	}
	return slog.GroupValue(attrs(v)...)
}

func attrs(v reflect.Value) []slog.Attr {
	var out []slog.Attr
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && fv.Kind() == reflect.Struct {
			out = append(out, attrs(fv)...)
			continue
		}
		name := f.Tag.Get("env")
		if name == "" {
			continue
		}
		switch f.Tag.Get("redact") {
		case "password":
			out = append(out, slog.String(name, RedactURL(fmt.Sprint(fv.Interface()))))
		case "value":
			masked := ""
			if !fv.IsZero() {
				masked = "***"
			}
			out = append(out, slog.String(name, masked))
		default:
			switch x := fv.Interface().(type) {
			case time.Duration:
				out = append(out, slog.String(name, x.String()))
			case fmt.Stringer:
				out = append(out, slog.String(name, x.String()))
			default:
				out = append(out, slog.Any(name, x))
			}
		}
	}
	return out
}
