package plots

import (
	"errors"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Point is one sample of a series: V at T seconds. A NaN V is a sample
// that could not be taken (a gap in the line).
type Point struct{ T, V float64 }

// Series is one line.
type Series struct {
	Name   string
	Color  color.Color
	Points []Point
}

// SeriesPanel is the lines drawn on one y axis.
type SeriesPanel struct {
	YLabel string
	Series []Series
}

// Mark is a moment drawn as a vertical line across every panel, labelled
// in the top one: a fault starts (red) or ends (End, green).
type Mark struct {
	T     float64
	Label string
	End   bool
}

func (m Mark) style() draw.LineStyle {
	c := color.Color(red)
	if m.End {
		c = green
	}
	return draw.LineStyle{Color: c, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}
}

// The time series' geometry.
const (
	seriesWidth  = 8 * vg.Inch
	panelHeight  = 2.1 * vg.Inch
	labelRows    = 4  // the marks' labels are staggered over as many rows
	labelHeight  = 11 // points: one row of them
	legendHeight = 14 // points: the legend's row
)

// WriteTimeline draws panels of series one above the other on one time
// axis (seconds) with marks across them, under title, and writes the chart
// as path.svg and path.png. Series without a sample are left out, and
// panels without a series; with none left it is an error.
func WriteTimeline(path, title string, panels []SeriesPanel, marks []Mark) ([]string, error) {
	end := 0.0
	for _, pn := range panels {
		for _, s := range pn.Series {
			for _, pt := range s.Points {
				end = math.Max(end, pt.T)
			}
		}
	}
	for _, m := range marks {
		end = math.Max(end, m.T)
	}
	var rows [][]*plot.Plot
	var legend []legendItem // the top panel's
	for _, pn := range panels {
		p := newPlot("", "", pn.YLabel)
		p.X.Min, p.X.Max = 0, math.Max(end, 1)
		p.Y.Min = 0
		p.Y.Tick.Marker = plainTicks{}
		p.Add(newGrid(color.Gray{Y: 0xe8}, color.Gray{Y: 0xe8}))
		var items []legendItem
		for _, s := range pn.Series {
			style, n, err := addSeries(p, s)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				items = append(items, legendItem{s.Name, style})
			}
		}
		if len(items) == 0 {
			continue
		}
		top := len(rows) == 0
		switch {
		case top:
			legend = items
		case len(items) > 1:
			p.Legend.Top, p.Legend.Left, p.Legend.XOffs = true, true, 6
			for _, it := range items {
				p.Legend.Add(it.name, thumb(it.style))
			}
		}
		p.Add(&markLines{marks: marks, labels: top})
		rows = append(rows, []*plot.Plot{p})
	}
	if len(rows) == 0 {
		return nil, errors.New("no samples to draw")
	}
	if slices.ContainsFunc(marks, func(m Mark) bool { return !m.End }) {
		legend = append(legend, legendItem{"fault starts", Mark{}.style()})
	}
	if slices.ContainsFunc(marks, func(m Mark) bool { return m.End }) {
		legend = append(legend, legendItem{"fault ends", Mark{End: true}.style()})
	}
	top := rows[0][0]
	top.Title.Text = title
	top.Add(legendRow(legend))
	// Above the top panel's data: its legend, then the marks' labels.
	top.Title.Padding = vg.Points(legendHeight + labelHeight*labelRows + 6)
	rows[len(rows)-1][0].X.Label.Text = "seconds since the load started"
	height := panelHeight*vg.Length(len(rows)) + vg.Points(legendHeight+labelHeight*labelRows)
	return render(path, seriesWidth, height, func(dc draw.Canvas) {
		tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: 4, PadY: 8, PadTop: 4, PadBottom: 4, PadLeft: 4, PadRight: 10}
		canvases := plot.Align(rows, tiles, dc)
		for i, r := range rows {
			r[0].Draw(canvases[i][0])
		}
	})
}

// addSeries adds s to p as lines broken at its gaps, and returns their
// style and how many samples it drew.
func addSeries(p *plot.Plot, s Series) (draw.LineStyle, int, error) {
	style := draw.LineStyle{Color: s.Color, Width: vg.Points(1.5)}
	var segments []plotter.XYs
	var cur plotter.XYs
	n := 0
	for _, pt := range s.Points {
		if math.IsNaN(pt.V) || math.IsInf(pt.V, 0) {
			if len(cur) > 0 {
				segments, cur = append(segments, cur), nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: pt.T, Y: pt.V})
		n++
	}
	if len(cur) > 0 {
		segments = append(segments, cur)
	}
	for _, seg := range segments {
		if len(seg) == 1 {
			sc, err := plotter.NewScatter(seg)
			if err != nil {
				return style, 0, err
			}
			sc.Color, sc.Shape, sc.Radius = s.Color, draw.CircleGlyph{}, vg.Points(1.5)
			p.Add(sc)
			continue
		}
		l, err := plotter.NewLine(seg)
		if err != nil {
			return style, 0, err
		}
		l.LineStyle = style
		p.Add(l)
	}
	return style, n, nil
}

// legendItem is a line's sample and name.
type legendItem struct {
	name  string
	style draw.LineStyle
}

// legendRow draws its items side by side above the marks' labels, outside
// the data, where they hide no line.
type legendRow []legendItem

// Plot implements plot.Plotter.
func (l legendRow) Plot(c draw.Canvas, _ *plot.Plot) {
	st := textStyle(9, dark)
	st.YAlign = text.YCenter
	x := c.Min.X
	y := c.Max.Y + labelHeight*labelRows + 4 + legendHeight/2
	for _, it := range l {
		c.StrokeLine2(it.style, x, y, x+18, y)
		c.FillText(st, vg.Point{X: x + 22, Y: y}, it.name)
		x += 22 + st.Width(it.name) + 16
	}
}

// thumb is a legend's line sample.
type thumb draw.LineStyle

// Thumbnail implements plot.Thumbnailer.
func (t thumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle(t), c.Min.X, y, c.Max.X, y)
}

// markLines draws the marks as vertical lines across the data; with labels,
// their labels above it, each in the first of labelRows rows where it does
// not overlap another (a label that fits nowhere is left out: the marks
// that crowd together are mostly the same moment repeated).
type markLines struct {
	marks  []Mark
	labels bool
}

// Plot implements plot.Plotter.
func (ml *markLines) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, m := range ml.marks {
		x := trX(m.T)
		c.StrokeLine2(m.style(), x, c.Min.Y, x, c.Max.Y)
	}
	if !ml.labels {
		return
	}
	type span struct{ from, to vg.Length }
	taken := make([][]span, labelRows)
	for _, m := range ml.marks {
		x := trX(m.T)
		st := textStyle(8, m.style().Color)
		st.XAlign, st.YAlign = text.XLeft, text.YBottom
		w := st.Width(m.Label)
		from := x + 2
		if from+w > c.Max.X {
			from, st.XAlign = x-2, text.XRight // near the right edge: before the line
		}
		lo, hi := from, from+w
		if st.XAlign == text.XRight {
			lo, hi = from-w, from
		}
		for row := range labelRows {
			if slices.ContainsFunc(taken[row], func(s span) bool { return lo < s.to+4 && s.from < hi+4 }) {
				continue
			}
			taken[row] = append(taken[row], span{lo, hi})
			y := c.Max.Y + 3 + vg.Length(row)*labelHeight
			c.StrokeLine2(draw.LineStyle{Color: m.style().Color, Width: vg.Points(0.5)}, x, c.Max.Y, x, y+8)
			c.FillText(st, vg.Point{X: from, Y: y}, m.Label)
			break
		}
	}
}
