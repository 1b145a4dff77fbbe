// Package plots draws the pictures `paylab bench` and `paylab chaos` leave
// next to their JSON reports: bars of throughput against their baselines and
// the peers (bars.go), latency percentile curves on log axes
// (percentiles.go), and time series with the moments a fault started and
// ended marked (timeseries.go). bench.go and chaos.go turn the reports into
// those charts. Every chart is written as SVG (text, diffable, what the
// README embeds) and PNG.
package plots
