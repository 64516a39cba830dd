package server

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
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
//	countersign_worker_claims_total{action}                        counter: proposals a worker claimed (to execute or reconcile)
//	countersign_execution_retries_total{action}                    counter: idempotent executions run again after an uncertain outcome
//	countersign_reconcile_attempts_total{action,outcome}           counter: Reconcile calls by outcome (applied, not_applied, unknown, error)
//	countersign_decisions_total{decision,via}                      counter: decisions that applied, by verdict and channel
//	countersign_notification_attempts_total{receiver,result}       counter: outbox deliveries (receiver webhook, slack, email; result delivered, retry, failed)
//	countersign_audit_sealed_timestamp_seconds                     gauge: when this process's sealer last had every committed event chained
//
// Every label value known at start-up has its series from the start, at 0,
// so that rate() and increase() see a counter's first increments after a
// restart: statuses, decisions, channels, and, once [Metrics.InitActions]
// is given the engine's actions, each action's results and outcomes. (HTTP
// and webhook statuses are open-ended; their series start on first use.)
//
// [ProposalCounts] adds the countersign_proposals{status} and
// countersign_approved_backlog gauges.
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
	claims          *prometheus.CounterVec
	retries         *prometheus.CounterVec
	reconciles      *prometheus.CounterVec
	decisions       *prometheus.CounterVec
	notifications   *prometheus.CounterVec
	sealed          prometheus.Gauge
}

var _ countersign.WorkObserver = (*Metrics)(nil)

// reconcileOutcomes are the outcome label values of
// countersign_reconcile_attempts_total.
var reconcileOutcomes = []string{
	countersign.ReconcileOutcomeApplied, countersign.ReconcileOutcomeNotApplied,
	countersign.ReconcileOutcomeUnknown, countersign.ReconcileOutcomeError,
}

// otherVia is the via label of a decision on a channel the engine does not
// list, so that the label stays bounded.
const otherVia = "other"

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
	m.claims = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_worker_claims_total",
		Help: "Proposals a worker of this process claimed, to execute or to reconcile.",
	}, []string{"action"}))
	m.retries = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_execution_retries_total",
		Help: "Idempotent executions run again, under the same operation id, after an uncertain outcome.",
	}, []string{"action"}))
	m.reconciles = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_reconcile_attempts_total",
		Help: "Calls of an action's Reconcile hook, by outcome: applied, not_applied, unknown or error.",
	}, []string{"action", "outcome"}))
	m.decisions = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_decisions_total",
		Help: "Decisions that applied (partial approvals towards a quorum too), by verdict and channel.",
	}, []string{"decision", "via"}))
	m.notifications = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_notification_attempts_total",
		Help: "Attempts at delivering the notification outbox, by receiver (webhook, or an approver channel: slack, email) and result (delivered, retry, failed).",
	}, []string{"receiver", "result"}))
	m.sealed = register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "countersign_audit_sealed_timestamp_seconds",
		Help: "Unix time at which this process's audit sealer last had every committed event chained (0: it has not, or does not hold the sealing lease). time() minus the maximum across processes is the chain's lag.",
	}))
	m.serve = promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
	m.initLabels()
	return m
}

// initLabels creates, at 0, the series of every label value known without
// the engine's actions.
func (m *Metrics) initLabels() {
	for _, s := range cstype.Statuses {
		m.transitions.WithLabelValues(string(s))
	}
	for _, v := range []countersign.Verdict{countersign.Approve, countersign.Reject} {
		m.decisionLatency.WithLabelValues(string(v))
		for _, via := range append(slices.Clone(countersign.Channels), otherVia) {
			m.decisions.WithLabelValues(string(v), via)
		}
	}
	for _, r := range notificationReceivers {
		for _, res := range notificationResults {
			m.notifications.WithLabelValues(r, res)
		}
	}
}

// The label values of countersign_notification_attempts_total: the
// receivers (a webhook, or an approver channel) and the results.
var (
	notificationReceivers = []string{"webhook", countersign.ViaSlack, countersign.ViaEmail}
	notificationResults   = []string{"delivered", "retry", "failed"}
)

// NotificationAttempt counts one attempt at delivering a notification, as
// notifications.Options.Observe reports it. A receiver or result outside
// the known ones is counted as "other", so the labels stay bounded.
func (m *Metrics) NotificationAttempt(receiver, result string) {
	if !slices.Contains(notificationReceivers, receiver) {
		receiver = otherVia
	}
	if !slices.Contains(notificationResults, result) {
		result = otherVia
	}
	m.notifications.WithLabelValues(receiver, result).Inc()
}

// Sealed implements countersign.SealObserver.
func (m *Metrics) Sealed(at time.Time) { m.sealed.Set(float64(at.UnixNano()) / 1e9) }

var _ countersign.SealObserver = (*Metrics)(nil)

// InitActions creates, at 0, the series of each action's label values:
// its execution results, claims, retries and reconcile outcomes. Call it
// with the engine's actions (Engine.Actions) at start-up.
func (m *Metrics) InitActions(actions []*countersign.Action) {
	for _, a := range actions {
		name := a.Name()
		for _, r := range []string{resultSucceeded, resultNotApplied, resultUncertain} {
			m.executions.WithLabelValues(name, r)
			m.execDuration.WithLabelValues(name, r)
		}
		m.claims.WithLabelValues(name)
		m.retries.WithLabelValues(name)
		for _, o := range reconcileOutcomes {
			m.reconciles.WithLabelValues(name, o)
		}
	}
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
func (m *Metrics) Transition(p *cstype.Proposal, from cstype.Status) {
	if p == nil || p.Status == from {
		return // a partial approval towards a quorum moves nothing
	}
	m.transitions.WithLabelValues(string(p.Status)).Inc()
	if from == cstype.StatusPending && (p.Status == cstype.StatusApproved || p.Status == cstype.StatusRejected) {
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

// Claimed implements countersign.WorkObserver.
func (m *Metrics) Claimed(action string) { m.claims.WithLabelValues(action).Inc() }

// Retried implements countersign.WorkObserver.
func (m *Metrics) Retried(action string) { m.retries.WithLabelValues(action).Inc() }

// Reconciled implements countersign.WorkObserver.
func (m *Metrics) Reconciled(action, outcome string) {
	if !slices.Contains(reconcileOutcomes, outcome) {
		outcome = countersign.ReconcileOutcomeError
	}
	m.reconciles.WithLabelValues(action, outcome).Inc()
}

// Decided implements countersign.WorkObserver.
func (m *Metrics) Decided(verdict countersign.Verdict, via string) {
	if !slices.Contains(countersign.Channels, via) {
		via = otherVia
	}
	m.decisions.WithLabelValues(string(verdict), via).Inc()
}

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
