package console

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Hosts is the console's Host header allow-list. A page on another site
// whose name is made to resolve to the console's address (DNS rebinding)
// reaches it as a same-origin page, past the cross-origin protection, but
// its requests still carry that site's name in Host: the console answers
// only the names it is reached by on purpose.
type Hosts struct {
	allowed map[string]bool // host:port, lower case
}

// AllowHosts returns the allow-list of a console listening on addr (its
// listener's address, host:port): localhost, 127.0.0.1 and [::1] with
// addr's port; addr itself when it is a specific IP address; and each of
// extra, a name or IP address with addr's port, or host:port (as a browser
// sends it, e.g. console.internal or 127.0.0.1:18090 for a port published
// elsewhere). Blank entries are ignored.
func AllowHosts(addr string, extra ...string) (Hosts, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Hosts{}, fmt.Errorf("console: listen address %q: %w", addr, err)
	}
	h := Hosts{allowed: map[string]bool{}}
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		h.allowed[net.JoinHostPort(name, port)] = true
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		h.allowed[net.JoinHostPort(ip.String(), port)] = true
	}
	for _, e := range extra {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		name, p := e, port
		if ip := net.ParseIP(strings.Trim(e, "[]")); ip != nil {
			name = ip.String()
		} else if strings.Contains(e, ":") {
			if name, p, err = net.SplitHostPort(e); err != nil {
				return Hosts{}, fmt.Errorf("console: allowed host %q: %w", e, err)
			}
		}
		name = strings.TrimSuffix(name, ".")
		if n, err := strconv.Atoi(p); name == "" || strings.ContainsAny(name, "/@ ") || err != nil || n < 1 || n > 65535 {
			return Hosts{}, fmt.Errorf("console: allowed host %q is not a host name or host:port", e)
		}
		h.allowed[net.JoinHostPort(name, p)] = true
	}
	return h, nil
}

// Allows tells whether a request's Host header is on the list. A Host
// without a port is taken on port 80, where a browser leaves it out.
func (h Hosts) Allows(hostHeader string) bool {
	host, port, err := net.SplitHostPort(hostHeader)
	if err != nil {
		host, port = strings.Trim(hostHeader, "[]"), "80"
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	return h.allowed[net.JoinHostPort(host, port)]
}

// List is the allowed host:port pairs, sorted.
func (h Hosts) List() []string {
	out := make([]string, 0, len(h.allowed))
	for hp := range h.allowed {
		out = append(out, hp)
	}
	slices.Sort(out)
	return out
}

// checkHost refuses (403) a request whose Host header is not on hosts.
func checkHost(hosts Hosts, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.Allows(r.Host) {
			writeError(w, http.StatusForbidden, "this console answers only the host names it is reached by on purpose "+
				"(localhost, 127.0.0.1, [::1] and CONSOLE_ALLOWED_HOSTS)")
			return
		}
		next.ServeHTTP(w, r)
	})
}
