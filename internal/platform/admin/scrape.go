package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
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

// Metric reads metric name (summed over its series) from the /metrics of the
// admin listener at baseURL.
func Metric(ctx context.Context, baseURL, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := scrapeClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return 0, fmt.Errorf("%s/metrics: %s", baseURL, res.Status)
	}
	sum, found := SumSamples(res.Body, name)
	if !found {
		return 0, fmt.Errorf("%s/metrics: no metric %s", baseURL, name)
	}
	return sum, nil
}

var scrapeClient = &http.Client{Timeout: 5 * time.Second}
