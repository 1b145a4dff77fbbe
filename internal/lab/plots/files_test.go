package plots

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A chart with nothing to draw is an error.
func TestNothingToDrawIsAnError(t *testing.T) {
	t.Parallel()
	for name, write := range map[string]func(path string) ([]string, error){
		"bars without bars": func(path string) ([]string, error) {
			return WriteBars(path, "none", []BarPanel{{Title: "empty"}})
		},
		"percentiles without a finite latency": func(path string) ([]string, error) {
			return WritePercentiles(path, "none", []Curve{{Name: "lost", Points: []Quantile{{0.5, math.Inf(1)}}}})
		},
		"timeline without samples": func(path string) ([]string, error) {
			return WriteTimeline(path, "none",
				[]SeriesPanel{{YLabel: "rows", Series: []Series{{Name: "gap", Points: []Point{{T: 0, V: math.NaN()}}}}}}, nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if files, err := write(filepath.Join(t.TempDir(), "chart")); err == nil {
				t.Errorf("no error; wrote %v", files)
			}
		})
	}
}

// checkChart checks that path.svg is well-formed SVG holding every one of
// texts, and path.png a PNG of the same proportions.
func checkChart(t *testing.T, path string, texts ...string) {
	t.Helper()
	b, err := os.ReadFile(path + ".svg")
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var root string
	var chars strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s.svg is not well-formed: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			chars.Write(tok)
		}
	}
	if root != "svg" {
		t.Fatalf("%s.svg: root element %q", path, root)
	}
	for _, want := range texts {
		if !strings.Contains(chars.String(), want) {
			t.Errorf("%s.svg has no text %q", path, want)
		}
	}
	if !bytes.Contains(b, []byte(svgFamilies)) {
		t.Errorf("%s.svg names its typeface without fallbacks", path)
	}
	f, err := os.Open(path + ".png")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s.png: %v", path, err)
	}
	if r := img.Bounds(); r.Dx() < 400 || r.Dy() < 200 {
		t.Errorf("%s.png is %v", path, r)
	}
}
