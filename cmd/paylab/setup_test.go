package main

import (
	"strings"
	"testing"
)

// RELAY_MODE=wal makes migrate and init grant the orders role REPLICATION;
// another value is refused, naming the variable.
func TestSetupConfigRelayMode(t *testing.T) {
	t.Setenv("RELAY_MODE", "wal")
	cfg, err := loadSetupConfig()
	if err != nil || cfg.RelayMode != "wal" {
		t.Fatalf("RELAY_MODE=wal: %+v, %v", cfg, err)
	}
	t.Setenv("RELAY_MODE", "stream")
	if _, err := loadSetupConfig(); err == nil || !strings.Contains(err.Error(), "RELAY_MODE") {
		t.Errorf("RELAY_MODE=stream: %v, want an error naming RELAY_MODE", err)
	}
}
