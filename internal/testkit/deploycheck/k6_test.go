package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every k6 script parses as an ES module (k6 itself is not installed here).
func TestK6ScriptsParse(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed to syntax-check the k6 scripts")
	}
	scripts, _ := filepath.Glob(filepath.Join(root, "k6", "*.js"))
	if len(scripts) == 0 {
		t.Fatal("no k6 scripts found")
	}
	for _, script := range scripts {
		src, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		// node decides the module type by extension; k6 scripts are modules.
		mjs := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(script), ".js")+".mjs")
		if err := os.WriteFile(mjs, src, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(node, "--check", mjs).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", script, err, out)
		}
		for _, field := range []string{"customer_id", "merchant_id", "amount", "currency", "Idempotency-Key", "Authorization: `Bearer ${API_KEY}`"} {
			if !strings.Contains(string(src), field) {
				t.Errorf("%s does not send %s (the wire contract)", script, field)
			}
		}
	}
}
