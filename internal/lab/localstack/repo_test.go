package localstack_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/lab/localstack"
)

// The checkout is found from the working directory, wherever the binary was
// built, or from PAYLAB_REPO; outside a checkout without it, the error says
// what to do.
func TestRepoRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Clean(filepath.Join(wd, "..", "..", ".."))
	t.Setenv(localstack.RepoEnv, "")

	t.Chdir(filepath.Join(root, "internal", "lab", "localstack"))
	if got, err := localstack.RepoRoot(); err != nil || got != root {
		t.Errorf("inside the checkout: %q, %v; want %q", got, err, root)
	}

	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	if got, err := localstack.RepoRoot(); err == nil || !strings.Contains(err.Error(), localstack.RepoEnv) {
		t.Errorf("outside a checkout: %q, %v; want an error naming %s", got, err, localstack.RepoEnv)
	}

	t.Setenv(localstack.RepoEnv, root)
	if got, err := localstack.RepoRoot(); err != nil || got != root {
		t.Errorf("%s=%s: %q, %v", localstack.RepoEnv, root, got, err)
	}
	t.Setenv(localstack.RepoEnv, elsewhere)
	if _, err := localstack.RepoRoot(); err == nil {
		t.Errorf("%s pointing at a folder without scripts/stack.sh: no error", localstack.RepoEnv)
	}
}
