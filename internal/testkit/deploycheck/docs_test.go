package deploycheck

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The documentation a reader follows: the README, the chapters, the
// libraries' own pages and the services' and example's READMEs.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "pkg/*/*.md", "services/*/README.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, filepath.ToSlash(rel))
		}
	}
	return files
}

// The README is a front door: short enough to read to the end.
func TestReadmeIsShort(t *testing.T) {
	t.Parallel()
	const limit = 250
	if n := strings.Count(readFile(t, "README.md"), "\n"); n > limit {
		t.Errorf("README.md has %d lines; keep it to %d and move the rest into docs/", n, limit)
	}
}

// Every relative link of the documentation leads somewhere: its file
// exists, and its #anchor names a heading of that file (GitHub's anchors).
// Links to other sites are not fetched.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	files := docFiles(t)
	anchors := map[string]map[string]bool{} // file → its anchors
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[file] = a
		return a
	}
	checked := 0
	for _, file := range files {
		for _, l := range markdownLinks(readFile(t, file)) {
			target := l.target
			if strings.HasPrefix(target, "<") && strings.HasSuffix(target, ">") {
				target = target[1 : len(target)-1]
			}
			if u, err := url.Parse(target); err == nil && u.Scheme != "" {
				continue // http(s), mailto: not fetched
			}
			path, anchor, _ := strings.Cut(target, "#")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			dest := file
			if path != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d: %s leads out of the repository", file, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s:%d: %s: no such file %s", file, l.line, l.target, dest)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue // an anchor into source code is a line, not a heading
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s", file, l.line, l.target, dest, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked in %v: is the parser still finding them?", checked, files)
	}
}

// The parser knows GitHub's anchors, fenced code and inline code.
func TestDocLinkParser(t *testing.T) {
	t.Parallel()
	md := "# paylab\n\n## Watch the hole open and close\n\n### What `make test` needs\n\n" +
		"## The five questions, answered\n\n## The API\n\n## The API\n\n" +
		"```sh\n# not a heading [nor](a-link.md)\n```\n\n" +
		"See [this](docs/chaos.md#a-runs-table \"title\"), ![a picture](img/x.svg), `[code](not-a-link.md)`,\n" +
		"[outside](https://example.com/x) and [here](#the-api).\n\n[ref]: docs/api.md\n"
	a := headingAnchors(md)
	for _, want := range []string{"paylab", "watch-the-hole-open-and-close", "what-make-test-needs", "the-five-questions-answered", "the-api", "the-api-1"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading-nor"] {
		t.Error("a comment in a code block counted as a heading")
	}
	var got []string
	for _, l := range markdownLinks(md) {
		got = append(got, l.target)
	}
	want := []string{"docs/chaos.md#a-runs-table", "img/x.svg", "https://example.com/x", "#the-api", "docs/api.md"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links %q, want %q", got, want)
	}
	if s := slug("A highly available PostgreSQL"); s != "a-highly-available-postgresql" {
		t.Errorf("slug = %q", s)
	}
	if s := slug("`relay-paused-past-lease` — the zombie, (v2)"); s != "relay-paused-past-lease--the-zombie-v2" {
		t.Errorf("slug = %q", s)
	}
}

type mdLink struct {
	target string
	line   int
}

var (
	inlineLink   = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+"[^"]*")?\s*\)`)
	refLinkDef   = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	inlineCode   = regexp.MustCompile("`+[^`]*`+")
	headingLine  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkInText   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	fenceOpening = regexp.MustCompile("^ {0,3}(```+|~~~+)")
)

// proseLines calls fn with each line outside fenced code blocks.
func proseLines(md string, fn func(line string, n int)) {
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		if m := fenceOpening.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case strings.HasPrefix(strings.TrimSpace(line), fence) && strings.TrimSpace(strings.Trim(strings.TrimSpace(line), fence[:1])) == "":
				fence = ""
				continue
			}
		}
		if fence == "" {
			fn(line, i+1)
		}
	}
}

// markdownLinks returns the targets of the inline links, images and
// reference definitions of md, outside code.
func markdownLinks(md string) []mdLink {
	var links []mdLink
	proseLines(md, func(line string, n int) {
		if m := refLinkDef.FindStringSubmatch(line); m != nil {
			links = append(links, mdLink{m[1], n})
			return
		}
		line = inlineCode.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, mdLink{m[1], n})
		}
	})
	return links
}

// headingAnchors returns the anchors GitHub gives md's headings: a
// duplicate heading's anchor gets -1, -2, ….
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	proseLines(md, func(line string, _ int) {
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors
}

// slug is GitHub's anchor of a heading's text: the text as rendered (links
// as their text, no code marks), lower-case, punctuation dropped, each space
// a hyphen.
func slug(heading string) string {
	heading = linkInText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
