package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics records what the engine and the server do as Prometheus metrics.
// It implements countersign.Observer, so one value can be given to the
// engine (Options.Observer) and to the server (Options.Metrics). Its methods
// are safe for concurrent use and never block.
//
// The metrics:
//
//	countersign_proposal_transitions_total{status}                 counter: proposals this process moved into status
//	countersign_decision_latency_seconds{decision}                 histogram: created → approved / rejected
//	countersign_execution_duration_seconds{action,result}          histogram: one Execute call
//	countersign_executions_total{action,result}                    counter: Execute calls by result (succeeded, not_applied, uncertain)
//	countersign_lease_losses_total                                 counter: executions that lost their lease
//	countersign_webhook_duration_seconds{action,endpoint,status}   histogram: one webhook request (status "error" without an answer)
//	countersign_http_request_duration_seconds{route,method,status} histogram: one API request (route is the pattern)
//
// [ProposalCounts] adds the countersign_proposals{status} gauge.
type Metrics struct {
	gatherer prometheus.Gatherer
	serve    http.Handler

	transitions     *prometheus.CounterVec
	decisionLatency *prometheus.HistogramVec
	execDuration    *prometheus.HistogramVec
	executions      *prometheus.CounterVec
	leaseLosses     prometheus.Counter
	webhookDuration *prometheus.HistogramVec
	httpDuration    *prometheus.HistogramVec
}

var _ countersign.Observer = (*Metrics)(nil)

// Execution results, the label values of countersign_executions_total.
const (
	resultSucceeded  = "succeeded"
	resultNotApplied = "not_applied"
	resultUncertain  = "uncertain"
)

// NewMetrics registers the metrics with reg and returns them. /metrics then
// serves reg when it is also a prometheus.Gatherer (a *prometheus.Registry
// is), and prometheus.DefaultGatherer otherwise. A nil reg means a private
// registry, which also gets the Go runtime and process collectors.
//
// Metrics already registered with reg (NewMetrics called twice on one
// registry) are reused; any other registration error panics, as
// prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg = r
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	} else {
		m.gatherer = prometheus.DefaultGatherer
	}
	longBuckets := append(prometheus.DefBuckets[:len(prometheus.DefBuckets):len(prometheus.DefBuckets)], 30, 60, 120)
	m.transitions = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_proposal_transitions_total",
		Help: "Proposals this process moved into a status (pending counts creations).",
	}, []string{"status"}))
	m.decisionLatency = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "countersign_decision_latency_seconds",
		Help:    "Time from a proposal's creation to its approval or rejection.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400},
	}, []string{"decision"}))
	m.execDuration = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "countersign_execution_duration_seconds",
		Help:    "Duration of one call of an action's Execute hook.",
		Buckets: longBuckets,
	}, []string{"action", "result"}))
	m.executions = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_executions_total",
		Help: "Calls of an action's Execute hook, by result: succeeded, not_applied or uncertain.",
	}, []string{"action", "result"}))
	m.leaseLosses = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "countersign_lease_losses_total",
		Help: "Executions that lost their lease and stopped.",
	}))
	m.webhookDuration = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "countersign_webhook_duration_seconds",
		Help:    "Duration of one webhook request, by action, endpoint and HTTP status (error: no answer).",
		Buckets: longBuckets,
	}, []string{"action", "endpoint", "status"}))
	m.httpDuration = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "countersign_http_request_duration_seconds",
		Help:    "Duration of one API request, by route pattern, method and status. Event streams count their whole life.",
		Buckets: longBuckets,
	}, []string{"route", "method", "status"}))
	m.serve = promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
	return m
}

// register registers c, or returns the equal collector already registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// Transition implements countersign.Observer.
func (m *Metrics) Transition(p *store.Proposal, from store.Status) {
	if p == nil || p.Status == from {
		return // a partial approval towards a quorum moves nothing
	}
	m.transitions.WithLabelValues(string(p.Status)).Inc()
	if from == store.StatusPending && (p.Status == store.StatusApproved || p.Status == store.StatusRejected) {
		// UpdatedAt is the decision's time on the store's clock, like CreatedAt.
		if d := p.UpdatedAt.Sub(p.CreatedAt); d >= 0 {
			m.decisionLatency.WithLabelValues(string(p.Status)).Observe(d.Seconds())
		}
	}
}

// Executed implements countersign.Observer.
func (m *Metrics) Executed(action string, d time.Duration, err error) {
	result := resultSucceeded
	switch {
	case errors.Is(err, countersign.ErrNotApplied):
		result = resultNotApplied
	case err != nil:
		result = resultUncertain
	}
	m.execDuration.WithLabelValues(action, result).Observe(d.Seconds())
	m.executions.WithLabelValues(action, result).Inc()
}

// LeaseLost implements countersign.Observer.
func (m *Metrics) LeaseLost(string) { m.leaseLosses.Inc() }

// WebhookObserved records one webhook request of an action: its endpoint
// ("prepare", "execute", "reconcile"), duration and HTTP status (0 when no
// answer came: a time-out or a broken connection).
func (m *Metrics) WebhookObserved(action, endpoint string, d time.Duration, status int) {
	s := "error"
	if status > 0 {
		s = strconv.Itoa(status)
	}
	m.webhookDuration.WithLabelValues(action, endpoint, s).Observe(d.Seconds())
}

func (m *Metrics) observeHTTP(route, method string, status int, d time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // clients choose methods: keep the label bounded
	}
	m.httpDuration.WithLabelValues(route, method, strconv.Itoa(status)).Observe(d.Seconds())
}

// handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) handler() http.Handler { return m.serve }
