//go:build race

package paymenttrace_test

func init() { raceEnabled = true }
