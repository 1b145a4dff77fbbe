package chaos

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestClientSendsTheBearerToken(t *testing.T) {
	t.Parallel()
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"point":"relay.after_lease","armed":true,"fired":0}`))
	}))
	t.Cleanup(srv.Close)
	c := &Client{BaseURL: srv.URL + "/", Token: testToken}
	if _, err := c.Arm(context.Background(), "relay.after_lease", Fault{Action: Crash}); err != nil {
		t.Fatal(err)
	}
	if a := got.Get("Authorization"); a != "Bearer "+testToken {
		t.Errorf("Authorization = %q, want %q", a, "Bearer "+testToken)
	}
	if ct := got.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestClientArmsStatusAndDisarms(t *testing.T) {
	t.Parallel()
	srv, reg, exits := newServer(t, true)
	c := &Client{BaseURL: srv.URL, Token: testToken}
	ctx := context.Background()

	s, err := c.Arm(ctx, "relay.after_lease", Fault{Action: Error, Count: 2})
	if err != nil || !s.Armed || s.Remaining == nil || *s.Remaining != 2 {
		t.Fatalf("Arm = %+v, %v", s, err)
	}
	if err := reg.Point("relay.after_lease").Hit(ctx); !errors.Is(err, ErrInjected) {
		t.Fatalf("the armed fault did not fire: %v", err)
	}
	if s, err = c.Status(ctx, "relay.after_lease"); err != nil || s.Fired != 1 {
		t.Fatalf("Status = %+v, %v; want fired 1", s, err)
	}
	if err := c.Disarm(ctx, "relay.after_lease"); err != nil {
		t.Fatal(err)
	}
	if s, _ := reg.Status("relay.after_lease"); s.Armed {
		t.Fatal("Disarm left the point armed")
	}
	for _, p := range []string{"relay.after_lease", "relay.after_publish_before_mark"} {
		if _, err := c.Arm(ctx, p, Fault{Action: Delay, Delay: Duration(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DisarmAll(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for _, s := range list {
		if s.Armed {
			t.Errorf("%s still armed after DisarmAll", s.Point)
		}
	}
	if len(exits) != 0 {
		t.Fatal("process exited")
	}
}

func TestClientReportsRefusals(t *testing.T) {
	t.Parallel()
	srv, reg, exits := newServer(t, true)
	disabled, _, _ := newServer(t, false)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		client *Client
		call   func(*Client) error
		want   int
	}{
		{"wrong token", &Client{BaseURL: srv.URL, Token: "wrong"}, func(c *Client) error {
			_, err := c.Arm(ctx, "relay.after_lease", Fault{Action: Crash})
			return err
		}, http.StatusUnauthorized},
		{"no token", &Client{BaseURL: srv.URL}, func(c *Client) error { return c.Kill(ctx) }, http.StatusUnauthorized},
		{"unknown point", &Client{BaseURL: srv.URL, Token: testToken}, func(c *Client) error {
			_, err := c.Arm(ctx, "relay.nowhere", Fault{Action: Crash})
			return err
		}, http.StatusNotFound},
		{"unknown point status", &Client{BaseURL: srv.URL, Token: testToken}, func(c *Client) error {
			_, err := c.Status(ctx, "relay.nowhere")
			return err
		}, http.StatusNotFound},
		{"invalid fault", &Client{BaseURL: srv.URL, Token: testToken}, func(c *Client) error {
			_, err := c.Arm(ctx, "relay.after_lease", Fault{Action: "explode"})
			return err
		}, http.StatusUnprocessableEntity},
		{"chaos disabled", &Client{BaseURL: disabled.URL, Token: testToken}, func(c *Client) error {
			_, err := c.List(ctx)
			return err
		}, http.StatusNotFound},
	} {
		err := c.call(c.client)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != c.want || apiErr.Message == "" {
			t.Errorf("%s: err = %v, want an APIError %d with the server's message", c.name, err, c.want)
		}
	}
	if s, _ := reg.Status("relay.after_lease"); s.Armed || len(exits) != 0 {
		t.Fatalf("refused calls had effects: %+v, exits %d", s, len(exits))
	}
}

func TestClientKill(t *testing.T) {
	t.Parallel()
	srv, _, exits := newServer(t, true)
	if err := (&Client{BaseURL: srv.URL, Token: testToken}).Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exits:
		if code != ExitCode {
			t.Fatalf("exit code %d, want %d", code, ExitCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process did not exit")
	}
}

func TestClientUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	var apiErr *APIError
	if err := (&Client{BaseURL: srv.URL, Token: testToken}).DisarmAll(context.Background()); err == nil || errors.As(err, &apiErr) {
		t.Fatalf("DisarmAll on a closed listener = %v, want a transport error", err)
	}
}
