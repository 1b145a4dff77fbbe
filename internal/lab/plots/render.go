package plots

import (
	"bytes"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// sans is the typeface of every text: Liberation Sans, which gonum/plot
// ships and whose metrics match Arial's, so an SVG viewer without it lays
// the text out the same with its fallback.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// svgFamily is how the SVG names the typeface, and svgFamilies the same
// with fallbacks for viewers that lack it.
const (
	svgFamily   = "font-family:Liberation Sans;"
	svgFamilies = "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"
)

// pngDPI is the PNG's resolution: sharp on a high-density screen.
const pngDPI = 144

// Colours.
var (
	grey   = color.RGBA{R: 0x9e, G: 0x9e, B: 0x9e, A: 0xff}
	blue   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	orange = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	green  = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	red    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	purple = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	teal   = color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}
	dark   = color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
)

// textStyle is a text of size points in c.
func textStyle(size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(sans, size), Handler: plot.DefaultTextHandler}
}

// newPlot is a plot whose texts are all in sans.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	for _, s := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		s.Font.Typeface, s.Font.Variant = sans.Typeface, sans.Variant
	}
	p.Title.TextStyle.Font.Size = 12
	p.X.Label.TextStyle.Font.Size, p.Y.Label.TextStyle.Font.Size = 10, 10
	p.X.Tick.Label.Font.Size, p.Y.Tick.Label.Font.Size = 9, 9
	p.Legend.TextStyle.Font.Size = 9
	return p
}

// newGrid is a grid of vertical and horizontal lines in those colours; a
// nil colour leaves its lines out.
func newGrid(vertical, horizontal color.Color) *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = vertical, horizontal
	return g
}

// render draws a chart of w × h with fn, and writes it as path.svg and
// path.png; it returns the files written.
func render(path string, w, h vg.Length, fn func(draw.Canvas)) ([]string, error) {
	svg := vgsvg.New(w, h)
	fn(draw.New(svg))
	var b bytes.Buffer
	if _, err := svg.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("rendering %s.svg: %w", path, err)
	}
	out := bytes.ReplaceAll(b.Bytes(), []byte(svgFamily), []byte(svgFamilies))
	if err := os.WriteFile(path+".svg", out, 0o644); err != nil {
		return nil, err
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI), vgimg.UseBackgroundColor(color.White))
	fn(draw.New(img))
	b.Reset()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&b); err != nil {
		return nil, fmt.Errorf("rendering %s.png: %w", path, err)
	}
	if err := os.WriteFile(path+".png", b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return []string{path + ".svg", path + ".png"}, nil
}
