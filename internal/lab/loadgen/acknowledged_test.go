package loadgen_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/paylab/paylab/internal/lab/loadgen"
)

// TestAcknowledgedRoundTrip: the orders recorded from many goroutines are
// read back from the file, each once.
func TestAcknowledgedRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	a := loadgen.NewAcknowledged(&buf)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { a.Add(fmt.Sprintf("order-%02d", i)) })
	}
	wg.Wait()
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := loadgen.ReadAcknowledged(&buf)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := a.IDs()
	slices.Sort(want)
	if len(got) != 50 || !slices.Equal(got, want) {
		t.Fatalf("read back %d ids %v, recorded %v", len(got), got, want)
	}
}
