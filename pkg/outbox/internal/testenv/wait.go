package testenv

import (
	"testing"
	"time"
)

// MinWait is the shortest deadline Eventually gives a condition. Deadlines
// are there to end a test that would otherwise hang, not to time the system:
// on a machine loaded by other jobs a condition may take many times what it
// takes on an idle one, and a test must still pass.
const MinWait = time.Minute

// Eventually polls cond until it holds, failing the test when d (at least
// MinWait) passes first. It returns as soon as cond holds.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = max(d, MinWait)
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
