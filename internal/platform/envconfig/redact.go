package envconfig

import (
	"net/url"
	"strings"
)

// RedactURL is the URL s with its password masked ("xxxxx"), for logs and
// messages; "(unparseable)" when s is not a URL.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}

// RedactIn masks, in msg, the password of the URL secret: for errors that
// quote a connection string back.
func RedactIn(msg, secret string) string {
	if u, err := url.Parse(secret); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}
