package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LatestMarkdown is the file, in the results folder, that WriteMarkdown
// keeps as the table of the latest complete full-size run: the one the
// documentation links to.
const LatestMarkdown = "bench-latest.md"

// Markdown writes the report as a Markdown page: the run's date, machine and
// size, the table `paylab bench` prints, and its notes. source names the
// JSON report it comes from.
func (r Report) Markdown(w io.Writer, source string) {
	fmt.Fprintf(w, "# paylab bench, %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "Written by `paylab bench` from `%s`; do not edit it by hand: `make bench` (or `make bench-peers`) writes it again.\n\n", source)
	fmt.Fprintf(w, "- **machine:** %s\n", mdEscape(r.Machine.String()))
	fmt.Fprintf(w, "- **run:** %s sizes, started %s, %s in all\n", r.Sizes.Name,
		r.Started.UTC().Format(time.RFC3339), (time.Duration(r.Seconds * float64(time.Second))).Round(time.Second))
	passed, missed := r.verdicts()
	fmt.Fprintf(w, "- **targets:** %d pass, %d miss (ratios from this one run)\n\n", passed, missed)
	fmt.Fprintln(w, "| stage | what | figure | p50 | p99 | max | vs | ratio | target | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		cells := []string{row.Stage, strings.TrimSpace(row.What), row.Figure, fmtMillis(row.P50), fmtMillis(row.P99),
			fmtMillis(row.Max), dash(row.Baseline), fmtRatio(row.Ratio), dash(row.Target), dash(row.Verdict)}
		for i, c := range cells {
			cells[i] = mdEscape(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			indent := ""
			if strings.HasPrefix(n, "  ") {
				indent = "  "
			}
			fmt.Fprintf(w, "%s- %s\n", indent, mdEscape(strings.TrimSpace(n)))
		}
	}
}

// WriteMarkdown writes the report's Markdown page next to its JSON report
// (jsonPath with .md for .json) and returns the files written. When latest
// is true (a complete run at full sizes), it also writes the page as
// LatestMarkdown in the same folder.
func WriteMarkdown(jsonPath string, r Report, latest bool) ([]string, error) {
	var b strings.Builder
	r.Markdown(&b, filepath.Base(jsonPath))
	files := []string{strings.TrimSuffix(jsonPath, ".json") + ".md"}
	if latest {
		files = append(files, filepath.Join(filepath.Dir(jsonPath), LatestMarkdown))
	}
	for _, f := range files {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// verdicts counts the rows that pass and miss their targets.
func (r Report) verdicts() (passed, missed int) {
	for _, row := range r.Rows {
		switch row.Verdict {
		case Pass:
			passed++
		case Miss:
			missed++
		}
	}
	return passed, missed
}

// mdEscape keeps a table cell in its cell: pipes escaped, no line breaks.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
