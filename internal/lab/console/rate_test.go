package console

import (
	"math"
	"testing"
	"time"
)

func TestRateWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	var w rateWindow
	if w.add(t0, 10); w.rate() != 0 {
		t.Errorf("one reading: rate %v, want 0", w.rate())
	}
	for i := 1; i <= 10; i++ {
		w.add(t0.Add(time.Duration(i)*time.Second), float64(10+20*i))
	}
	if r := w.rate(); math.Abs(r-20) > 1e-9 {
		t.Errorf("20 a second: rate %v", r)
	}
	if n := len(w.samples); n > 7 {
		t.Errorf("the window keeps %d readings; it spans about 5 s", n)
	}
	// A counter that went back (its process restarted) starts over.
	w.add(t0.Add(11*time.Second), 3)
	if r := w.rate(); r != 0 {
		t.Errorf("after a reset: rate %v, want 0", r)
	}
	w.add(t0.Add(13*time.Second), 13)
	if r := w.rate(); math.Abs(r-5) > 1e-9 {
		t.Errorf("after a reset, 5 a second: rate %v", r)
	}
}
