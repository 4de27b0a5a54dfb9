package main

import (
	"math"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// recorder is a workqueue.MetricsProvider that keeps what a trace's `metrics` op
// observes: depth, adds, retries, and the count and sum of the two histograms.
type recorder struct {
	mu                      sync.Mutex
	depth, adds, retries    float64
	latencyCount, workCount int
	latencySum, workSum     float64
}

type gauge struct {
	r *recorder
	v *float64
}

func (g gauge) Inc() { g.r.mu.Lock(); *g.v++; g.r.mu.Unlock() }
func (g gauge) Dec() { g.r.mu.Lock(); *g.v--; g.r.mu.Unlock() }

type histogram struct {
	r     *recorder
	count *int
	sum   *float64
}

func (h histogram) Observe(v float64) { h.r.mu.Lock(); *h.count++; *h.sum += v; h.r.mu.Unlock() }

type ignored struct{}

func (ignored) Set(float64) {}

func (r *recorder) NewDepthMetric(string) workqueue.GaugeMetric  { return gauge{r, &r.depth} }
func (r *recorder) NewAddsMetric(string) workqueue.CounterMetric { return gauge{r, &r.adds} }
func (r *recorder) NewLatencyMetric(string) workqueue.HistogramMetric {
	return histogram{r, &r.latencyCount, &r.latencySum}
}
func (r *recorder) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return histogram{r, &r.workCount, &r.workSum}
}
func (r *recorder) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return ignored{}
}
func (r *recorder) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return ignored{}
}
func (r *recorder) NewRetriesMetric(string) workqueue.CounterMetric { return gauge{r, &r.retries} }

// observe adds the recorded values to an observation; sums in whole milliseconds.
func (r *recorder) observe(obs map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	obs["depth"], obs["adds"], obs["retries"] = int(r.depth), int(r.adds), int(r.retries)
	obs["latency_count"], obs["latency_sum_ms"] = r.latencyCount, int64(math.Round(r.latencySum*1000))
	obs["work_count"], obs["work_sum_ms"] = r.workCount, int64(math.Round(r.workSum*1000))
}
