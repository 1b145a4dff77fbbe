package chaosrun

import (
	"slices"
	"testing"
)

// TestSelectHA: the scenarios on a Patroni cluster run as `ha` (make
// chaos-ha), never with all (make chaos) nor in the quick set (make test).
func TestSelectHA(t *testing.T) {
	t.Parallel()
	names := func(scs []Scenario) []string {
		var out []string
		for _, s := range scs {
			out = append(out, s.Name)
		}
		return out
	}
	ha, err := Select([]string{"ha"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"postgres-leader-killed", "postgres-async-failover", "postgres-switchover"}
	if got := names(ha); !slices.Equal(got, want) {
		t.Fatalf("ha selects %v, want %v", got, want)
	}
	for _, quick := range []bool{false, true} {
		all, err := Select([]string{"all"}, quick)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names(all) {
			if slices.Contains(want, n) {
				t.Fatalf("all (quick %v) selects %s", quick, n)
			}
		}
	}
	for _, s := range ha {
		if s.stops == "" || s.sizes == nil || s.sizes(Quick).Payments < 2000 {
			t.Fatalf("%s: runs alone %v, payments %d; want alone and at least 2000", s.Name, s.stops != "", s.sizes(Quick).Payments)
		}
	}
}
