package deploycheck

import (
	"strconv"
	"testing"
)

// Mailpit keeps every receipt of a long run: its default prunes all but
// the newest 500 messages, after which the receipts sent can no longer be
// checked there.
func TestComposeMailpitKeepsTheReceipts(t *testing.T) {
	t.Parallel()
	mailpit, ok := loadCompose(t).Services["mailpit"]
	if !ok {
		t.Fatal("no mailpit service")
	}
	raw := env(mailpit, "MP_MAX_MESSAGES")
	n, err := strconv.Atoi(raw)
	if err != nil || (n != 0 && n < 100_000) {
		t.Errorf("mailpit: MP_MAX_MESSAGES=%q; want 0 (no limit) or at least 100000 (the default keeps 500)", raw)
	}
}
