package apikey

import (
	"context"
	"net/http"
	"strings"
)

// Realm is the realm of the WWW-Authenticate challenges.
const Realm = "paylab"

// HeaderWWWAuthenticate is the challenge header of a refused request.
const HeaderWWWAuthenticate = "WWW-Authenticate"

// Fail writes the answer to a request the middleware refuses: err is
// ErrMissing, ErrInvalid or ErrInQuery (the WWW-Authenticate challenge is
// set already), a *LimitError (Retry-After is set already), or an error
// wrapping ErrUnavailable. Each API writes its own problem document.
type Fail func(w http.ResponseWriter, r *http.Request, err error)

type principalKey struct{}

// FromContext returns the principal Authenticate put in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// NewContext returns ctx carrying p, as Authenticate passes it on.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// queryNames are query parameters that commonly carry credentials.
var queryNames = []string{"api_key", "apikey", "key", "access_token", "token"}

// Authenticate is the middleware that requires an API key in
// "Authorization: Bearer <key>" and passes the request on with its
// Principal (FromContext). A request with a key, or a parameter named like
// one, in its query string is refused whatever its header says: query
// strings end up in logs and browser histories.
func Authenticate(a *Authenticator, fail Fail) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if keyInQuery(r) {
				w.Header().Set(HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="invalid_request"`)
				fail(w, r, ErrInQuery)
				return
			}
			key, err := bearer(r)
			if err != nil {
				challenge := `Bearer realm="` + Realm + `"`
				if err == ErrInvalid {
					challenge += `, error="invalid_token"`
				}
				w.Header().Set(HeaderWWWAuthenticate, challenge)
				fail(w, r, err)
				return
			}
			p, err := a.Authenticate(r.Context(), key)
			if err != nil {
				if err == ErrInvalid {
					w.Header().Set(HeaderWWWAuthenticate, `Bearer realm="`+Realm+`", error="invalid_token"`)
				}
				fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
		})
	}
}

// bearer returns the token of the request's one Authorization header.
func bearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", ErrMissing
	case len(values) > 1:
		return "", ErrInvalid
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrInvalid
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", ErrInvalid
	}
	return token, nil
}

func keyInQuery(r *http.Request) bool {
	raw := r.URL.RawQuery
	if raw == "" {
		return false
	}
	if strings.Contains(raw, Prefix) {
		return true
	}
	for name := range r.URL.Query() {
		for _, n := range queryNames {
			if strings.EqualFold(name, n) {
				return true
			}
		}
	}
	return false
}
