package testenv

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// MailpitVersion is the Mailpit release tests run as their SMTP server.
const MailpitVersion = "v1.33.1"

// Mailpit is a private Mailpit process: a real SMTP server whose received
// messages a test reads back over its HTTP API.
type Mailpit struct {
	SMTPAddr string // host:port of the SMTP listener
	APIURL   string // base URL of the HTTP API
}

// MailpitMessage is a message summary from Mailpit's API.
type MailpitMessage struct {
	ID        string
	MessageID string
	Subject   string
	From      MailpitAddress
	To        []MailpitAddress
	Created   time.Time
}

// MailpitAddress is a mail address in Mailpit's API.
type MailpitAddress struct{ Name, Address string }

// StartMailpit starts a Mailpit of the test's own on free loopback ports,
// waits until it answers, and stops it at cleanup. The binary is built on
// first use (see MailpitBinary).
func StartMailpit(t testing.TB) *Mailpit {
	t.Helper()
	bin := MailpitBinary(t)
	dir := t.TempDir()
	m := &Mailpit{
		SMTPAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		APIURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
	}
	cmd := exec.Command(bin, "--smtp", m.SMTPAddr, "--listen", m.APIURL[len("http://"):],
		"--database", filepath.Join(dir, "mailpit.db"), "--max", "0", "--disable-version-check", "--quiet")
	logFile, err := os.Create(filepath.Join(dir, "mailpit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: starting mailpit: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		if m.ready() {
			return m
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("testenv: mailpit exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: mailpit not ready after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *Mailpit) ready() bool {
	resp, err := http.Get(m.APIURL + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", m.SMTPAddr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Messages returns every message Mailpit received, newest first.
func (m *Mailpit) Messages(t testing.TB) []MailpitMessage {
	t.Helper()
	return m.get(t, "/api/v1/messages?limit=10000")
}

// Search returns the messages matching a Mailpit search query, such as
// `message-id:"<…>"` or `subject:"Receipt"`.
func (m *Mailpit) Search(t testing.TB, query string) []MailpitMessage {
	t.Helper()
	return m.get(t, "/api/v1/search?limit=10000&query="+url.QueryEscape(query))
}

func (m *Mailpit) get(t testing.TB, path string) []MailpitMessage {
	t.Helper()
	resp, err := http.Get(m.APIURL + path)
	if err != nil {
		t.Fatalf("testenv: mailpit %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: mailpit %s: %s", path, resp.Status)
	}
	var body struct{ Messages []MailpitMessage }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("testenv: mailpit %s: %v", path, err)
	}
	return body.Messages
}

// MailpitBinary returns the path of the Mailpit binary, building it with
// `go install` from the Go module proxy when it is missing (once per
// machine; about 1.5 minutes on two cores; concurrent test binaries wait for
// one build). The cache folder is PAYLAB_TOOLS, or ~/.cache/paylab/bin as in
// the Makefile.
func MailpitBinary(t testing.TB) string {
	t.Helper()
	tools := os.Getenv("PAYLAB_TOOLS")
	if tools == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		tools = filepath.Join(home, ".cache", "paylab", "bin")
	}
	bin := filepath.Join(tools, "mailpit-"+MailpitVersion)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := os.Stat(bin); err == nil {
		return bin // built while we waited
	}
	t.Logf("testenv: building mailpit %s (once; cached in %s)", MailpitVersion, tools)
	tmp, err := os.MkdirTemp("", "paylab-mailpit-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", "github.com/axllent/mailpit@"+MailpitVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: building mailpit: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "mailpit"), bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
