package orderhttp

import (
	"net/http"
	"regexp"
)

// W3C Trace Context headers (https://www.w3.org/TR/trace-context/).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

var traceparentRE = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

// maxTracestate is the length the W3C recommends a vendor keeps (512).
const maxTracestate = 512

// traceContext returns the well-formed trace context of r, to be stored with
// the events the request causes; nil when there is none. A malformed
// traceparent is ignored, as the W3C recommends, and so is a tracestate
// without a valid traceparent.
func traceContext(r *http.Request) (headers map[string]string, traceID string) {
	tp := r.Header.Values(HeaderTraceparent)
	if len(tp) != 1 {
		return nil, ""
	}
	m := traceparentRE.FindStringSubmatch(tp[0])
	if m == nil || m[1] == "ff" || m[2] == "00000000000000000000000000000000" || m[3] == "0000000000000000" {
		return nil, ""
	}
	headers = map[string]string{HeaderTraceparent: tp[0]}
	if ts := r.Header.Values(HeaderTracestate); len(ts) == 1 && validTracestate(ts[0]) {
		headers[HeaderTracestate] = ts[0]
	}
	return headers, m[2]
}

func validTracestate(s string) bool {
	if s == "" || len(s) > maxTracestate {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
