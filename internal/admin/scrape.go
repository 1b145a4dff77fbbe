package admin

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// SumSamples reads a Prometheus text exposition (what /metrics serves) and
// sums the samples of metric name over all its series. found is false when
// the metric has no sample.
func SumSamples(exposition io.Reader, name string) (sum float64, found bool) {
	sc := bufio.NewScanner(exposition)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}
