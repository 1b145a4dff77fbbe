// Package smtptest is an SMTP server for tests: it speaks as much SMTP as
// net/smtp's client needs, records every message it accepts, and ends a
// conversation the ways real servers and networks do — a connection dropped
// instead of answering QUIT, an error to QUIT, DATA refused.
package smtptest

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// Quit is how the server answers QUIT.
type Quit int

const (
	// QuitOK answers 221 and closes the connection.
	QuitOK Quit = iota
	// QuitDrop closes the connection without answering.
	QuitDrop
	// QuitError answers 421 and closes the connection.
	QuitError
)

// Behavior is how the server ends a conversation.
type Behavior struct {
	Quit Quit
	// RejectData answers DATA with 554: no message is taken.
	RejectData bool
	// RejectMessage reads the message and then refuses it with 550.
	RejectMessage bool
}

// Server is a running test SMTP server.
type Server struct {
	// Addr is the host:port it listens on (loopback).
	Addr string

	b  Behavior
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	accepted []string // each accepted message, as the client sent it
	conns    map[net.Conn]bool
	quits    int
}

// Start serves b on a loopback port until the test ends.
func Start(t testing.TB, b Behavior) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), b: b, ln: ln, conns: map[net.Conn]bool{}}
	s.wg.Go(s.accept)
	t.Cleanup(s.close)
	return s
}

// Messages returns every message the server accepted (answered 250 to its
// end), in order.
func (s *Server) Messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.accepted...)
}

// Quits is how many QUIT commands the server received.
func (s *Server) Quits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quits
}

func (s *Server) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			s.converse(c)
		})
	}
}

// converse runs one SMTP conversation on c; it returns when c is to be
// closed.
func (s *Server) converse(c net.Conn) {
	r := bufio.NewReader(c)
	reply := func(line string) bool {
		_, err := c.Write([]byte(line + "\r\n"))
		return err == nil
	}
	if !reply("220 smtptest ESMTP") {
		return
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
		var ok bool
		switch strings.ToUpper(verb) {
		case "EHLO":
			ok = reply("250-smtptest") && reply("250 8BITMIME")
		case "HELO", "MAIL", "RCPT", "RSET", "NOOP":
			ok = reply("250 OK")
		case "DATA":
			ok = s.data(r, reply)
		case "QUIT":
			s.mu.Lock()
			s.quits++
			s.mu.Unlock()
			switch s.b.Quit {
			case QuitOK:
				reply("221 bye")
			case QuitError:
				reply("421 4.3.0 closing the connection")
			}
			return
		default:
			ok = reply("502 5.5.1 not implemented")
		}
		if !ok {
			return
		}
	}
}

// data answers DATA, reads the message up to its lone dot and accepts or
// refuses it.
func (s *Server) data(r *bufio.Reader, reply func(string) bool) bool {
	if s.b.RejectData {
		return reply("554 5.3.0 no messages taken")
	}
	if !reply("354 end with <CRLF>.<CRLF>") {
		return false
	}
	var msg strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if line == ".\r\n" {
			break
		}
		msg.WriteString(strings.TrimPrefix(line, ".")) // undo the dot-stuffing
	}
	if s.b.RejectMessage {
		return reply("550 5.7.1 message refused")
	}
	s.mu.Lock()
	s.accepted = append(s.accepted, msg.String())
	s.mu.Unlock()
	return reply("250 2.0.0 queued")
}
