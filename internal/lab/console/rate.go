package console

import "time"

// rateSpan is how far back a rate looks.
const rateSpan = 5 * time.Second

// rateWindow turns the successive readings of a growing count into a rate
// per second over the last rateSpan. A reading below the last one (a
// counter of a process that restarted) starts the window again.
type rateWindow struct {
	samples []sample
}

type sample struct {
	at time.Time
	v  float64
}

func (w *rateWindow) add(at time.Time, v float64) {
	if n := len(w.samples); n > 0 && v < w.samples[n-1].v {
		w.samples = w.samples[:0]
	}
	w.samples = append(w.samples, sample{at, v})
	for len(w.samples) > 2 && at.Sub(w.samples[1].at) >= rateSpan {
		w.samples = w.samples[1:]
	}
}

// rate is the growth per second between the oldest and newest readings.
func (w *rateWindow) rate() float64 {
	if len(w.samples) < 2 {
		return 0
	}
	first, last := w.samples[0], w.samples[len(w.samples)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return (last.v - first.v) / dt
}

// rates holds one window per named count.
type rates map[string]*rateWindow

// observe adds a reading of the count called name and returns its rate.
func (r rates) observe(name string, at time.Time, v float64) float64 {
	w := r[name]
	if w == nil {
		w = &rateWindow{}
		r[name] = w
	}
	w.add(at, v)
	return w.rate()
}
