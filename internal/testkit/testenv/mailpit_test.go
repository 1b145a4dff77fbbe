package testenv

import (
	"net/smtp"
	"testing"
)

func TestMailpitReceivesAndFindsAMessage(t *testing.T) {
	t.Parallel()
	m := StartMailpit(t)
	msg := "From: a@paylab.local\r\nTo: b@paylab.local\r\nSubject: hello\r\nMessage-ID: <t-1@paylab.local>\r\n\r\nbody\r\n"
	if err := smtp.SendMail(m.SMTPAddr, nil, "a@paylab.local", []string{"b@paylab.local"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	all := m.Messages(t)
	if len(all) != 1 || all[0].Subject != "hello" || all[0].MessageID != "t-1@paylab.local" || all[0].To[0].Address != "b@paylab.local" {
		t.Fatalf("messages = %+v", all)
	}
	if got := m.Search(t, "message-id:t-1@paylab.local"); len(got) != 1 {
		t.Errorf("search found %d messages, want 1", len(got))
	}
	if got := m.Search(t, "message-id:other@paylab.local"); len(got) != 0 {
		t.Errorf("search for another id found %d messages", len(got))
	}
}
