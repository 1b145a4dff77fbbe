package plots

import (
	"errors"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Quantile is the latency at or below which a fraction Q of the samples
// fall; Millis is +Inf where that rank is a sample that never completed.
type Quantile struct {
	Q      float64
	Millis float64
}

// Curve is one latency distribution, as its quantiles.
type Curve struct {
	Name   string
	Color  color.Color
	Dashed bool
	Points []Quantile
}

// The percentile axis: the position of quantile q is its number of nines,
// -log10(1-q), so p50, p90, p99 and p99.9 are evenly apart and the tail
// gets as much room as the body; the maximum (q = 1) is drawn a little
// after p99.9.
const (
	lastNines = 3   // p99.9
	maxAt     = 3.5 // where q = 1 is drawn
)

func nines(q float64) float64 {
	if q >= 1 {
		return maxAt
	}
	return math.Min(-math.Log10(1-q), lastNines)
}

// minMillis is the least latency drawn: a log axis has no zero.
const minMillis = 0.01

// WritePercentiles draws the curves — latency (log axis) against the
// percentile — under title, and writes the chart as path.svg and path.png.
// A curve stops where its quantiles become infinite; a curve with no
// finite quantile is left out, and with none left it is an error.
func WritePercentiles(path, title string, curves []Curve) ([]string, error) {
	p := newPlot(title, "percentile", "latency (ms, log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.X.Tick.Marker = percentileTicks{}
	p.X.Min, p.X.Max = 0, maxAt
	// The curves rise from left to right: the bottom right is free.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -6, 6
	p.Add(newGrid(color.Gray{Y: 0xe0}, color.Gray{Y: 0xe0}))
	drawn := 0
	for _, c := range curves {
		var xys plotter.XYs
		for _, q := range c.Points {
			if math.IsInf(q.Millis, 0) || math.IsNaN(q.Millis) {
				break
			}
			xys = append(xys, plotter.XY{X: nines(q.Q), Y: math.Max(q.Millis, minMillis)})
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = c.Color, vg.Points(1.6)
		if c.Dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		s.Color, s.Shape, s.Radius = c.Color, draw.CircleGlyph{}, vg.Points(1.8)
		p.Add(l, s)
		p.Legend.Add(c.Name, l, s)
		drawn++
	}
	if drawn == 0 {
		return nil, errors.New("no latency to draw")
	}
	return render(path, 8*vg.Inch, 4.5*vg.Inch, func(dc draw.Canvas) { p.Draw(dc) })
}

// percentileTicks label the percentile axis.
type percentileTicks struct{}

// Ticks implements plot.Ticker.
func (percentileTicks) Ticks(_, _ float64) []plot.Tick {
	return []plot.Tick{
		{Value: 0, Label: "min"}, {Value: nines(0.5), Label: "p50"}, {Value: nines(0.8)},
		{Value: 1, Label: "p90"}, {Value: nines(0.95)}, {Value: 2, Label: "p99"},
		{Value: lastNines, Label: "p99.9"}, {Value: maxAt, Label: "max"},
	}
}

// logTicks label 1, 2 and 5 of each decade (plot.LogTicks labels the
// powers of ten alone, too few over the one or two decades a latency
// spans).
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
