package bench

import (
	"strings"
	"testing"
)

func TestStagesSelectAndValidate(t *testing.T) {
	base := Config{Bin: "bin", AdminURL: "postgres://x", Brokers: []string{"k:9092"}, Sizes: Quick}
	all := base
	if err := all.validate(); err != nil || !all.runs("P1") {
		t.Errorf("no stages: validate %v, runs P1 %t; want every stage", err, all.runs("P1"))
	}
	some := base
	some.Stages = []string{"B1", "S3"}
	if !some.runs("B1") || !some.runs("B2", "S3") || some.runs("S1") || some.runs("S4", "S5") {
		t.Error("--stages B1,S3 does not select B1 and S3 alone")
	}
	for _, tc := range []struct {
		stages []string
		rate   float64
		want   string // in the error; "" for none
	}{
		{[]string{"S4"}, 0, "need S1's rate"},
		{[]string{"S5"}, 0, "need S1's rate"},
		{[]string{"S4"}, 2400, ""},
		{[]string{"S1", "S4"}, 0, ""},
		{[]string{"S9"}, 0, `no stage "S9"`},
	} {
		c := base
		c.Stages, c.S1Rate = tc.stages, tc.rate
		err := c.validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("stages %v, rate %v: validate = %v, want %q", tc.stages, tc.rate, err, tc.want)
		}
	}
}
