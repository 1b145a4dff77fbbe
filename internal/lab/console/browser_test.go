package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/internal/lab/console"
	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// Environment variables of the browser test.
const (
	// chromiumEnv names the browser binary; by default the first of
	// chromium, chromium-browser, google-chrome on PATH.
	chromiumEnv = "PAYLAB_CHROMIUM"
	// skipBrowserEnv=1 skips the test where no browser can be installed;
	// without it a missing browser fails the test.
	skipBrowserEnv = "PAYLAB_SKIP_BROWSER"
	// screenshotsEnv is a folder (relative: to the checkout) to write the
	// page's screenshots to, e.g. docs/img for the README's.
	screenshotsEnv = "PAYLAB_SCREENSHOTS"
)

// The page in a real browser, on a local deployment of the real services
// on the stack: the toggles are disabled until the token is entered, a
// crash armed with a click takes the orders API down mid-load, the
// counters of every stage move, and the verify panel reports nothing lost
// with the outbox — and, after the switch to naive mode, the same crash
// losing events.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	bootstrapRoles(t, ctx)

	tokenBytes := make([]byte, 12)
	_, _ = rand.Read(tokenBytes)
	tok := hex.EncodeToString(tokenBytes)
	d, err := console.StartLocal(ctx, console.LocalConfig{
		Bin: testenv.BuildServices(t), LogDir: t.TempDir(), Token: tok,
		Servers: chaosrun.Servers{AdminURL: testenv.AdminURL(), Brokers: testenv.Brokers(), SMTPAddr: testenv.StartMailpit(t).SMTPAddr},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	defer func() {
		if t.Failed() {
			logs(t, d.LogDir())
		}
	}()
	base := serve(t, ctx, d)

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1500, 1150))...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	b := &page{t: t, ctx: tab}

	b.do(chromedp.Navigate(base + "/"))
	b.wait("every process up", `document.querySelectorAll(".proc .dot.up").length === 5`)
	if !b.eval(`[...document.querySelectorAll(".needs-token")].every(el => el.disabled)`) {
		t.Error("without a token the toggles are enabled")
	}
	// Not only disabled: the processes refuse a toggle without the token.
	const point = "orders.after_commit_before_publish"
	status, body := send(t, http.MethodPut, base+"/api/procs/orders/faults/"+point, "", `{"action":"crash","count":1}`)
	if status != http.StatusUnauthorized {
		t.Errorf("a toggle without the token: %d %s, want the orders API's 401", status, body)
	}
	orders := &chaos.Client{BaseURL: d.Procs(ctx)[0].Admin, Token: tok}
	if st, err := orders.Status(ctx, point); err != nil || st.Armed {
		t.Fatalf("armed without the token: %+v %v", st, err)
	}
	checkPoints(t, ctx, d, tok)

	b.do(chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"), chromedp.Click(chromedp.CSS("#use-token")))
	b.wait("a wrong token refused", `document.querySelector("#token-state").textContent.includes("refused")`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), tok), chromedp.Click(chromedp.CSS("#use-token")))
	b.wait("the token accepted", `document.querySelector("#token-state").textContent.includes("accepted")`)
	if got := b.text("#token"); got != "" {
		t.Errorf("the token field still holds %q", got)
	}

	// Outbox: the API crashes after committing, before answering; the
	// outbox row is committed with the capture, so nothing is lost.
	b.crashAndPlace(point, 100, 50)
	b.wait("the orders API restarted", `document.querySelector('.proc[data-proc="orders"] .restarts').textContent.includes("restarted")`)
	b.wait("the counters of every stage moving", `+document.querySelector('[data-k="orders.captures"]').textContent > 0 &&
		+document.querySelector('[data-k="outbox.dispatched"]').textContent > 0 &&
		+document.querySelector('[data-k="kafka.total"]').textContent > 0 &&
		+document.querySelector('[data-k="ledger.effects"]').textContent > 0 &&
		+document.querySelector('[data-k="notifications.effects"]').textContent > 0 &&
		document.querySelector("#partitions").children.length === 6`)
	verdict := b.verify()
	if !strings.HasPrefix(verdict, "closed") || b.number("#lost-ledger") != 0 || b.number("#lost-notifications") != 0 {
		t.Errorf("outbox mode: verdict %q, lost %d and %d; want nothing lost", verdict, b.number("#lost-ledger"), b.number("#lost-notifications"))
	}
	b.screenshot("console-outbox.png")

	// Naive: the same crash, with the event published after the commit
	// by the API itself — the committed captures it crashed on are lost.
	b.do(chromedp.SetValue(chromedp.CSS("#mode-select"), "naive"), chromedp.Click(chromedp.CSS("#mode-go")))
	b.wait("the switch to naive", `document.body.dataset.mode === "naive" && document.querySelector("#mode-state").textContent === "" &&
		document.querySelector('.proc[data-proc="orders"] .dot').classList.contains("up")`)
	b.crashAndPlace(point, 100, 50)
	verdict = b.verify()
	lost := b.number("#lost-ledger")
	if !strings.HasPrefix(verdict, "HOLE OPEN") || lost == 0 || b.number("#lost-notifications") == 0 {
		t.Errorf("naive mode: verdict %q, lost %d; want the hole open", verdict, lost)
	}
	if v := b.text(`[data-k="verify.since"]`); !strings.Contains(v, "switch to naive") {
		t.Errorf("the verify panel counts since %q, want since the switch", v)
	}
	b.screenshot("console-naive.png")
	t.Logf("naive mode: %s", verdict)
}

// page drives the console's page in the browser tab ctx.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (b *page) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *page) eval(expr string) bool {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *page) text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).value ?? document.querySelector(%q).textContent`, sel, sel)))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *page) number(sel string) int {
	b.t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(b.text(sel)))
	if err != nil {
		b.t.Fatalf("%s: %v", sel, err)
	}
	return n
}

// wait polls expr in the page until it is true; the deadline is generous,
// for a loaded machine.
func (b *page) wait(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(200*time.Millisecond),
		chromedp.WithPollingTimeout(3*time.Minute))); err != nil {
		state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		b.t.Fatalf("waiting for %s: %v\nthe page:\n%s", what, err, state)
	}
}

// crashAndPlace arms a one-shot crash at the orders API's point with a
// click, sees it armed, and places count payments at rate.
func (b *page) crashAndPlace(point string, count, rate int) {
	b.t.Helper()
	row := fmt.Sprintf(`.proc[data-proc="orders"] .point[data-point=%q]`, point)
	b.do(chromedp.SetValue(chromedp.CSS(row+" .action"), "crash"), chromedp.SetValue(chromedp.CSS(row+" .count"), "1"),
		chromedp.Click(chromedp.CSS(row+" .arm")))
	b.wait("the crash armed", fmt.Sprintf(`document.querySelector('%s .status').textContent.startsWith("armed: crash")`, row))
	b.do(chromedp.SetValue(chromedp.CSS("#load-count"), strconv.Itoa(count)), chromedp.SetValue(chromedp.CSS("#load-rate"), strconv.Itoa(rate)),
		chromedp.Click(chromedp.CSS("#load-go")))
	b.wait("the payments placed", fmt.Sprintf(`document.querySelector("#load-state").textContent.startsWith("placed %d")`, count))
}

// verify runs the reconciliation from the page and returns its verdict.
func (b *page) verify() string {
	b.t.Helper()
	before, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("#verify-verdict").dataset.at || ""`))
	if err != nil {
		b.t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS("#verify-go")))
	b.wait("the verdict", fmt.Sprintf(`document.querySelector("#verify-verdict").classList.contains("verdict") &&
		document.querySelector("#verify-verdict").dataset.at !== %q && !document.querySelector("#verify-go").disabled`, before))
	return b.text("#verify-verdict")
}

// screenshot writes the page as name into PAYLAB_SCREENSHOTS, or the
// test's own folder.
func (b *page) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv(screenshotsEnv)
	switch {
	case dir == "":
		dir = b.t.TempDir()
	case !filepath.IsAbs(dir):
		root, err := localstack.RepoRoot()
		if err != nil {
			b.t.Fatal(err)
		}
		dir = filepath.Join(root, dir)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// checkPoints makes sure the page's toggles are the points the services
// declare: each process lists those of its role.
func checkPoints(t *testing.T, ctx context.Context, d console.Deployment, tok string) {
	t.Helper()
	for _, p := range d.Procs(ctx) {
		list, err := (&chaos.Client{BaseURL: p.Admin, Token: tok}).List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var own []string
		for _, s := range list {
			if strings.HasPrefix(s.Point, p.Role+".") {
				own = append(own, s.Point)
			}
		}
		want := slices.Sorted(slices.Values(console.Points(p.Role)))
		if !slices.Equal(own, want) {
			t.Errorf("%s declares %v; the page shows %v", p.Name, own, want)
		}
	}
}

// chromium finds the browser, or fails: a missing browser is not a pass.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(skipBrowserEnv) == "1" {
		t.Skipf("no Chromium on PATH and %s=1", skipBrowserEnv)
	}
	t.Fatalf("the console's browser test needs headless Chromium: apt-get install chromium (or set %s; %s=1 skips the test)", chromiumEnv, skipBrowserEnv)
	return ""
}

// logs prints the processes' logs.
func logs(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("%s:\n%s", filepath.Base(f), b)
	}
}
