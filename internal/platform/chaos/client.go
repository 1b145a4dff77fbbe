package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client drives one process's chaos controls (the routes Mount adds) over
// its admin listener, with the bearer token on every call.
type Client struct {
	BaseURL string       // the admin listener, e.g. http://localhost:9080
	Token   string       // CHAOS_TOKEN of the process
	HTTP    *http.Client // nil: a client with a 5 s timeout
}

// APIError is an answer other than 2xx: 401 for a missing or wrong token,
// 404 for an unknown point or when the process runs with CHAOS_ENABLED=false.
type APIError struct {
	Op         string // e.g. "PUT http://localhost:9080/chaos/faults/relay.after_lease"
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("chaos: %s: %d %s: %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Arm arms point with f and returns the point's state.
func (c *Client) Arm(ctx context.Context, point string, f Fault) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodPut, "/chaos/faults/"+url.PathEscape(point), f, &s)
}

// Disarm disarms point.
func (c *Client) Disarm(ctx context.Context, point string) error {
	return c.do(ctx, http.MethodDelete, "/chaos/faults/"+url.PathEscape(point), nil, nil)
}

// DisarmAll disarms every point of the process.
func (c *Client) DisarmAll(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/chaos/faults", nil, nil)
}

// Status returns point's state: whether it is armed and how often it fired.
func (c *Client) Status(ctx context.Context, point string) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodGet, "/chaos/faults/"+url.PathEscape(point), nil, &s)
}

// List returns the state of every point of the process.
func (c *Client) List(ctx context.Context) ([]Status, error) {
	var s []Status
	return s, c.do(ctx, http.MethodGet, "/chaos/faults", nil, &s)
}

// Kill makes the process exit at once (status 137, no cleanup). It returns
// once the process has accepted; whether it comes back is up to whatever
// supervises it (a container's restart policy).
func (c *Client) Kill(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/chaos/kill", nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	target := strings.TrimSuffix(c.BaseURL, "/") + path
	op := method + " " + target
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("chaos: %s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("chaos: %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := c.HTTP
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("chaos: %s: %w", op, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &msg) != nil || msg.Error == "" {
			msg.Error = strings.TrimSpace(string(b))
		}
		return &APIError{Op: op, StatusCode: res.StatusCode, Message: msg.Error}
	}
	if out == nil {
		return nil // a killed process may cut its answer's body short
	}
	if err != nil {
		return fmt.Errorf("chaos: %s: reading the answer: %w", op, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("chaos: %s: decoding the answer: %w", op, err)
	}
	return nil
}
