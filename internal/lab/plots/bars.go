package plots

import (
	"errors"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Kind says what a bar stands for, and so its colour.
type Kind int

// The kinds of bar.
const (
	Baseline Kind = iota // the stage's raw baseline: the same work with nothing of paylab's around it
	Paylab               // paylab's stage
	Peer                 // another implementation of the same stage
)

func (k Kind) color() color.Color {
	switch k {
	case Paylab:
		return blue
	case Peer:
		return orange
	}
	return grey
}

func (k Kind) String() string {
	switch k {
	case Paylab:
		return "paylab"
	case Peer:
		return "peer"
	}
	return "raw baseline"
}

// Bar is one horizontal bar: its label above it, its figure after its end.
type Bar struct {
	Label  string
	Value  float64
	Figure string
	Kind   Kind
}

// BarPanel is a group of bars on one linear axis, from zero.
type BarPanel struct {
	Title string
	Unit  string // the axis's label
	Bars  []Bar
}

// The bar charts' geometry.
const (
	barsWidth   = 8 * vg.Inch
	barsHeader  = 40  // points: the chart's title and the legend of kinds
	panelFrame  = 72  // points: a panel's title, axis and padding
	panelGap    = 14  // points: above a panel's title
	barSlot     = 25  // points: one bar and its label
	barHeight   = 9   // points
	figureSpace = 0.5 // of the largest value, after it, for the figures
)

// WriteBars draws panels of bars one above the other under title, and
// writes the chart as path.svg and path.png. Panels without bars are left
// out; with none left there is nothing to draw and it is an error.
func WriteBars(path, title string, panels []BarPanel) ([]string, error) {
	var plots []*plot.Plot
	var heights []vg.Length
	for _, pn := range panels {
		if len(pn.Bars) == 0 {
			continue
		}
		p := newPlot(pn.Title, pn.Unit, "")
		p.Title.TextStyle.Font.Size = 11
		p.HideY()
		p.X.Tick.Marker = plainTicks{}
		p.Add(newGrid(color.Gray{Y: 0xe0}, nil), hbars(pn.Bars))
		plots = append(plots, p)
		heights = append(heights, vg.Length(panelFrame+barSlot*len(pn.Bars)))
	}
	if len(plots) == 0 {
		return nil, errors.New("no bars to draw")
	}
	total := vg.Length(barsHeader)
	for _, h := range heights {
		total += h
	}
	kinds := map[Kind]bool{}
	for _, pn := range panels {
		for _, b := range pn.Bars {
			kinds[b.Kind] = true
		}
	}
	return render(path, barsWidth, total, func(dc draw.Canvas) {
		drawHeader(dc, title, kinds)
		top := dc.Max.Y - barsHeader
		for i, p := range plots {
			bottom := top - heights[i]
			p.Draw(draw.Crop(dc, 4, -8, bottom-dc.Min.Y, top-panelGap-dc.Max.Y))
			top = bottom
		}
	})
}

// drawHeader writes the title and, under it, what each bar colour drawn
// means.
func drawHeader(dc draw.Canvas, title string, kinds map[Kind]bool) {
	t := textStyle(13, color.Black)
	t.XAlign, t.YAlign = draw.XCenter, draw.YTop
	dc.FillText(t, vg.Point{X: dc.Center().X, Y: dc.Max.Y - 4}, title)
	l := textStyle(9, dark)
	l.YAlign = text.YCenter
	y := dc.Max.Y - 28
	x := dc.Center().X - 120
	for _, k := range []Kind{Baseline, Paylab, Peer} {
		if !kinds[k] {
			continue
		}
		dc.FillPolygon(k.color(), rect(x, y-4, x+14, y+4))
		dc.FillText(l, vg.Point{X: x + 18, Y: y}, k.String())
		x += 18 + l.Width(k.String()) + 24
	}
}

func rect(x0, y0, x1, y1 vg.Length) []vg.Point {
	return []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
}

// hbars draws bars top down: bar i at y = n-1-i, its label above it and its
// figure after its end.
type hbars []Bar

// DataRange leaves room after the largest bar for its figure.
func (h hbars) DataRange() (xmin, xmax, ymin, ymax float64) {
	for _, b := range h {
		xmax = math.Max(xmax, b.Value)
	}
	if xmax == 0 {
		xmax = 1
	}
	return 0, xmax * (1 + figureSpace), -0.7, float64(len(h)) - 0.3
}

// Plot implements plot.Plotter.
func (h hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	label := textStyle(9, dark)
	label.YAlign = text.YBottom
	figure := textStyle(9, color.Black)
	figure.YAlign = text.YCenter
	for i, b := range h {
		y := trY(float64(len(h)-1-i)) - 4
		x0, x1 := trX(0), trX(math.Max(b.Value, 0))
		c.FillPolygon(b.Kind.color(), c.ClipPolygonXY(rect(x0, y-barHeight/2, x1, y+barHeight/2)))
		c.FillText(label, vg.Point{X: x0, Y: y + barHeight/2 + 1.5}, b.Label)
		c.FillText(figure, vg.Point{X: x1 + 4, Y: y}, b.Figure)
	}
}

// plainTicks are plot.DefaultTicks with whole numbers written out, their
// thousands apart (1 000 000, never 1e+06).
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" && t.Value == math.Trunc(t.Value) {
			ticks[i].Label = thousands(t.Value)
		}
	}
	return ticks
}

// thousands writes v rounded to a whole number, its thousands apart.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return sign + s
}
