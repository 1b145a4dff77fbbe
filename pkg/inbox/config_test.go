package inbox

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Validate reports every problem at once, not the first.
func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := Config{Table: "1inbox", BatchSize: -1}.Validate()
	for _, want := range []string{"Brokers", "Topic", "Group", "Handlers", "1inbox", "BatchSize"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %s", err, want)
		}
	}
	if err := (Config{Retention: -time.Second}).validateOptional(); err != nil {
		t.Errorf("a negative Retention (keep forever) is refused: %v", err)
	}
	if got := (Config{}).withDefaults().Retention; got != DefaultRetention {
		t.Errorf("default Retention %v, want %v", got, DefaultRetention)
	}
}

// Permanent, ErrPermanent and IsPermanent mean what they mean in package
// outbox.
func TestPermanent(t *testing.T) {
	t.Parallel()
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
	cause := errors.New("no such cart")
	err := Permanent(cause)
	if !errors.Is(err, ErrPermanent) || !IsPermanent(err) || !errors.Is(err, cause) || err.Error() != cause.Error() {
		t.Fatalf("Permanent(%v) = %v: Is ErrPermanent %t, IsPermanent %t, wraps the cause %t",
			cause, err, errors.Is(err, ErrPermanent), IsPermanent(err), errors.Is(err, cause))
	}
	if IsPermanent(cause) {
		t.Fatal("a plain error is permanent")
	}
}
