package localstack

import (
	"fmt"
	"net"
	"testing"
)

// FreePorts gives as many different ports as asked, each free to listen on.
func TestFreePortsAreDistinctAndFree(t *testing.T) {
	ports, err := FreePorts(40)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d given twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
	if len(ports) != 40 {
		t.Fatalf("%d ports, want 40", len(ports))
	}
}
