package daemon

import (
	"net/http"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// metrics is sessiond's Prometheus registry, served at /metrics. A fleet is
// watched by scraping this, not by a home-made cluster.
type metrics struct {
	reg         *prometheus.Registry
	handler     http.Handler
	reconcile   *prometheus.HistogramVec
	refused     prometheus.Counter
	subscribers prometheus.Gauge
	hooks       *prometheus.CounterVec
}

func newMetrics(st *state.Store, tr *tracker.Tracker) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.reconcile = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sessiond_reconcile_duration_seconds",
		Help:    "Duration of reconcile passes, by trigger (startup, tick, exit, hint).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"trigger"})
	m.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sessiond_api_refused_total",
		Help: "API requests refused because the client runs as another user.",
	})
	m.subscribers = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sessiond_event_subscribers",
		Help: "Open event-stream connections.",
	})
	m.hooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sessiond_hooks_total",
		Help: "Agent hooks received, by agent and result: taken (kept as evidence), no_activity (an event that says nothing of activity), no_caller (its process could not be read), bad (not a payload).",
	}, []string{"agent", "result"})
	counter := func(name, help string, f func(tracker.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(tr.Stats())) })
	}
	m.reg.MustRegister(
		m.reconcile, m.refused, m.subscribers, m.hooks,
		// The memstats set, plus the live heap (go_gc_heap_live_bytes):
		// the heap after the last collection, which RSS settles near
		// twice of; heap in use also counts garbage not yet collected.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$|^/cpu/classes/(gc|scavenge)/total:cpu-seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		counter("sessiond_probes_unknown_total", "Liveness probes that could not decide (the check itself failed).", func(s tracker.Stats) uint64 { return s.ProbeUnknown }),
		counter("sessiond_probes_total", "Liveness probes made.", func(s tracker.Stats) uint64 { return s.Probes }),
		counter("sessiond_adapter_errors_total", "Adapter passes that could not read all of their inputs.", func(s tracker.Stats) uint64 { return s.AdapterErrors }),
		counter("sessiond_transitions_total", "Session records changed by the tracker.", func(s tracker.Stats) uint64 { return s.Transitions }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sessiond_events_total", Help: "Events recorded in the store (the last sequence number).",
		}, func() float64 {
			seq, _ := st.LastSeq()
			return float64(seq)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sessiond_store_commits_total", Help: "Write transactions of session changes committed to the store.",
		}, func() float64 { return float64(st.CommitStats().Commits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sessiond_store_commit_seconds_total", Help: "Time spent in those transactions, fsync included.",
		}, func() float64 { return st.CommitStats().Time.Seconds() }),
		&sessionCollector{store: st},
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

func (m *metrics) observePass(p tracker.PassReport) {
	m.reconcile.WithLabelValues(p.Trigger).Observe(p.Duration.Seconds())
}

// sessionCollector counts sessions by agent and status at scrape time.
type sessionCollector struct{ store *state.Store }

var sessionsDesc = prometheus.NewDesc("sessiond_sessions", "Sessions by agent and status.", []string{"agent", "status"}, nil)

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	// The store's own records, read only: a copy of each was ~7 MB of
	// garbage a scrape at 17,000 sessions (a Prometheus scrapes every 15 s).
	recs, err := c.store.ListShared()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	type key struct{ agent, status string }
	n := map[key]int{}
	for _, r := range recs {
		n[key{r.Agent, string(r.Status)}]++
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(v), k.agent, k.status)
	}
}
