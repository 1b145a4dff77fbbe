package main

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/ledger/internal/ledgerhttp"
)

func TestSameEventPublishedFiveTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		inboxEnabled bool
		wantEntries  int
		wantDups     int
	}{
		{name: "inbox on: one entry", inboxEnabled: true, wantEntries: 1, wantDups: 4},
		{name: "inbox off: five entries", inboxEnabled: false, wantEntries: 5, wantDups: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 3)
			a, api := f.start(f.config(tc.inboxEnabled))
			e := testenv.OrderCaptured("ord-dup", "cus_1", "mer_1", 1999, "EUR")
			for range 5 {
				f.Publish(e)
			}
			testenv.Eventually(t, 60*time.Second, "five deliveries", func() bool {
				c := a.Runner.Counts()
				return c.Processed+c.Duplicates == 5
			})
			if got := f.Count("SELECT count(*) FROM journal_entries WHERE event_id = $1", e.ID); got != tc.wantEntries {
				t.Errorf("journal entries = %d, want %d", got, tc.wantEntries)
			}
			if got := a.Runner.Counts().Duplicates; got != tc.wantDups {
				t.Errorf("duplicates counted = %d, want %d", got, tc.wantDups)
			}
			var acc ledgerhttp.Account
			if code := getJSON(t, f.key("mer_1"), api+"/v1/accounts/merchant:mer_1", &acc); code != 200 {
				t.Fatalf("GET account: %d", code)
			}
			if want := int64(1999 * tc.wantEntries); len(acc.Balances) != 1 || acc.Balances[0].Balance != want {
				t.Errorf("merchant balances = %+v, want EUR %d", acc.Balances, want)
			}
		})
	}
}

func TestRefundPublishedBeforeItsCaptureIsAppliedAfterIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	a, api := f.start(f.config(true))
	capture := testenv.OrderCaptured("ord-early-refund", "cus_2", "mer_2", 5000, "USD")
	refund := testenv.OrderRefunded("ord-early-refund", 2, 1200, "USD")

	f.Publish(refund)
	testenv.Eventually(t, 60*time.Second, "the refund parked", func() bool { return a.Runner.Counts().Parked == 1 })
	if got := f.Count("SELECT count(*) FROM journal_entries"); got != 0 {
		t.Fatalf("%d entries before the capture arrived", got)
	}
	f.Publish(capture)
	testenv.Eventually(t, 30*time.Second, "both entries", func() bool { return f.Count("SELECT count(*) FROM journal_entries") == 2 })

	key := f.key("mer_2")
	var entries ledgerhttp.Entries
	if code := getJSON(t, key, api+"/v1/orders/ord-early-refund/entries", &entries); code != 200 {
		t.Fatalf("GET entries: %d", code)
	}
	if len(entries.Entries) != 2 || entries.Entries[0].Kind != "capture" || entries.Entries[1].Kind != "refund" {
		t.Fatalf("entries = %+v, want capture then refund", entries.Entries)
	}
	if entries.Entries[0].EventID != capture.ID || entries.Entries[1].EventID != refund.ID {
		t.Errorf("entries carry the wrong event ids")
	}
	var acc ledgerhttp.Account
	if code := getJSON(t, key, api+"/v1/accounts/merchant:mer_2", &acc); code != 200 {
		t.Fatalf("GET merchant:mer_2: %d", code)
	}
	if len(acc.Balances) != 1 || acc.Balances[0].Currency != "USD" || acc.Balances[0].Balance != 3800 {
		t.Errorf("merchant:mer_2 balances = %+v, want USD 3800", acc.Balances)
	}
	if got := f.Count("SELECT balance FROM balances WHERE account_id = 'customer:cus_2'"); got != -3800 {
		t.Errorf("customer:cus_2 balance = %d, want -3800", got)
	}
	var missing ledgerhttp.Account
	for _, other := range []string{"merchant:nobody", "customer:cus_2"} {
		if code := getJSON(t, key, api+"/v1/accounts/"+other, &missing); code != 404 {
			t.Errorf("%s with mer_2's key: %d, want 404", other, code)
		}
	}
}

func TestPoisonMessageIsDeadLetteredAndTheNextOneProcessed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	cfg := f.config(true)
	a, _ := f.start(cfg)

	poison := &sarama.ProducerMessage{Topic: f.Topic, Key: sarama.StringEncoder("ord-poison"), Value: sarama.StringEncoder("{not json")}
	if _, _, err := f.Prod.SendMessage(poison); err != nil {
		t.Fatal(err)
	}
	badCurrency := testenv.OrderCaptured("ord-bad", "cus_3", "mer_3", 100, "eur")
	next := testenv.OrderCaptured("ord-next", "cus_3", "mer_3", 700, "EUR")
	f.Publish(badCurrency, next)

	testenv.Eventually(t, 60*time.Second, "the next message processed", func() bool {
		return f.Count("SELECT count(*) FROM journal_entries WHERE event_id = $1", next.ID) == 1
	})
	dead := readPartition(t, f.DLQ, 2)
	for i, want := range []string{inbox.ReasonUndecodable, inbox.ReasonRejected} {
		if got := header(dead[i], inbox.HeaderDLQReason); got != want {
			t.Errorf("dead letter %d: reason %q, want %q", i, got, want)
		}
		if header(dead[i], inbox.HeaderDLQOriginalTopic) != f.Topic || header(dead[i], inbox.HeaderDLQOriginalPartition) != "0" {
			t.Errorf("dead letter %d lacks its origin: %v", i, dead[i].Headers)
		}
	}
	if got := f.Count("SELECT count(*) FROM inbox WHERE event_id = $1 AND status = 'failed'", badCurrency.ID); got != 1 {
		t.Error("the rejected event is not failed in the inbox")
	}
	if c := a.Runner.Counts(); c.DeadLettered != 2 {
		t.Errorf("dead-lettered = %d, want 2", c.DeadLettered)
	}

	// The operator repairs the payload and re-drives the event.
	if _, err := f.Pool.Exec(context.Background(),
		`UPDATE inbox SET payload = jsonb_set(payload, '{currency}', '"EUR"') WHERE event_id = $1`, badCurrency.ID); err != nil {
		t.Fatal(err)
	}
	if err := redrive(context.Background(), cfg, a.Log, badCurrency.ID.String()); err != nil {
		t.Fatalf("redrive: %v", err)
	}
	if got := f.Count("SELECT count(*) FROM journal_entries WHERE event_id = $1", badCurrency.ID); got != 1 {
		t.Errorf("entries after the re-drive = %d, want 1", got)
	}
}

func readPartition(t *testing.T, topic string, n int) []*sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumer(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case <-timeout:
			t.Fatalf("read %d of %d messages from %s", len(out), n, topic)
		}
	}
	return out
}

func header(m *sarama.ConsumerMessage, key string) string {
	for _, h := range m.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}
