package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/prometheus/client_golang/prometheus"
)

// metricsHarness is a harness whose engine and server report to fresh
// metrics on st, with every action's series initialised as serve does.
func metricsHarness(t *testing.T, st store.Store, extra ...*countersign.Action) (*harness, *Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := newHarness(t, "mem", harnessOptions{metrics: m, engine: func(o *countersign.Options) {
		o.Store = st
		o.Actions = append(o.Actions, extra...)
		o.RetryBackoff = time.Millisecond
	}})
	m.InitActions(h.engine.Actions())
	return h, m, reg
}

// scrape reads /metrics.
func (h *harness) scrape() string {
	h.t.Helper()
	return string(h.must(200, req{method: "GET", path: "/metrics"}).body)
}

// runWorker runs one worker batch.
func (h *harness) runWorker() int {
	h.t.Helper()
	w, err := h.engine.NewWorker(countersign.WorkerOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	n, err := w.RunOnce(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func wantSamples(t *testing.T, when, body string, samples ...string) {
	t.Helper()
	for _, s := range samples {
		if !strings.Contains(body, "\n"+s+"\n") {
			t.Errorf("%s: /metrics lacks %s", when, s)
		}
	}
}

// Counters exist at 0 from start-up, so that increase() over a restart sees
// a counter's first increments: a process restarted on the same store
// serves every known series at 0 before anything happens, and at 1 after
// its first rejection. (A series born at 1 reads as no increase.)
func TestMetricsSeriesStartAtZeroAcrossARestart(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "restart.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	first, _, _ := metricsHarness(t, st)
	id := first.pending("r1", "c_r1")
	first.decide(200, "bob", id, "reject", nil, nil)
	wantSamples(t, "first process", first.scrape(), `countersign_proposal_transitions_total{status="rejected"} 1`)

	// The restart: a new process (engine, metrics, server) on the same store.
	second, _, _ := metricsHarness(t, st)
	before := second.scrape()
	zero := []string{
		`countersign_proposal_transitions_total{status="rejected"} 0`,
		`countersign_proposal_transitions_total{status="pending"} 0`,
		`countersign_proposal_transitions_total{status="unknown"} 0`,
		`countersign_decisions_total{decision="rejected",via="api"} 0`,
		`countersign_decisions_total{decision="approved",via="web"} 0`,
		`countersign_decision_latency_seconds_count{decision="rejected"} 0`,
		`countersign_executions_total{action="payments.refund",result="succeeded"} 0`,
		`countersign_executions_total{action="payments.refund",result="uncertain"} 0`,
		`countersign_execution_duration_seconds_count{action="payments.refund",result="not_applied"} 0`,
		`countersign_worker_claims_total{action="payments.refund"} 0`,
		`countersign_execution_retries_total{action="payments.refund"} 0`,
		`countersign_reconcile_attempts_total{action="flaky.reconciled",outcome="unknown"} 0`,
		`countersign_reconcile_attempts_total{action="flaky.reconciled",outcome="error"} 0`,
		`countersign_lease_losses_total 0`,
		`countersign_notification_attempts_total{receiver="webhook",result="failed"} 0`,
		`countersign_notification_attempts_total{receiver="slack",result="retry"} 0`,
		`countersign_notification_attempts_total{receiver="email",result="delivered"} 0`,
		`countersign_audit_sealed_timestamp_seconds 0`,
	}
	wantSamples(t, "after the restart, before anything", before, zero...)
	id = second.pending("r2", "c_r2")
	second.decide(200, "bob", id, "reject", nil, nil)
	wantSamples(t, "after the first rejection", second.scrape(),
		`countersign_proposal_transitions_total{status="rejected"} 1`,
		`countersign_decisions_total{decision="rejected",via="api"} 1`,
		`countersign_decision_latency_seconds_count{decision="rejected"} 1`)
}

// The work series: claims, idempotent retries, reconcile attempts by
// outcome, decisions by channel, and the approved backlog from the
// background count; and promtool accepts a real scrape holding them all.
func TestWorkMetrics(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "work.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var tries atomic.Int32
	idem, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "flaky.idempotent", Idempotent: true,
		Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			if tries.Add(1) == 1 {
				return nil, errors.New("connection reset after the request was sent")
			}
			return &countersign.Receipt{ID: "done"}, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, _, reg := metricsHarness(t, st, idem)
	counts := NewProposalCounts()
	reg.MustRegister(counts)

	independent := func(tool, action string, input map[string]any) string {
		res := h.call("alice", map[string]any{"thread_id": "t1", "tool_call_id": tool, "action": action, "input": input, "mode": "independent"})
		id, _ := res["proposal_id"].(string)
		if res["status"] != "pending" || id == "" {
			t.Fatalf("%s: %v", tool, res)
		}
		return id
	}
	refundID := independent("w1", "payments.refund", map[string]any{"amount": 1, "customer": "c_w1"})
	h.decide(200, "bob", refundID, "approve", nil, map[string]string{ViaHeader: "cli"})
	countOnce(t, st, counts)
	wantSamples(t, "an approved refund not yet run", h.scrape(),
		`countersign_approved_backlog 1`,
		`countersign_decisions_total{decision="approved",via="cli"} 1`,
		`countersign_decisions_total{decision="approved",via="api"} 0`)

	reconID := independent("w2", "flaky.reconciled", map[string]any{})
	h.decide(200, "alice", reconID, "approve", nil, nil)
	idemID := independent("w3", "flaky.idempotent", map[string]any{})
	h.decide(200, "alice", idemID, "approve", nil, nil)
	for h.runWorker() > 0 {
		// The reconciling proposal waits for its next attempt; the others settle.
	}
	countOnce(t, st, counts)
	body := h.scrape()
	wantSamples(t, "after the worker", body,
		`countersign_approved_backlog 0`,
		`countersign_worker_claims_total{action="payments.refund"} 1`,
		`countersign_worker_claims_total{action="flaky.reconciled"} 1`,
		`countersign_worker_claims_total{action="flaky.idempotent"} 1`,
		`countersign_execution_retries_total{action="flaky.idempotent"} 1`,
		`countersign_executions_total{action="flaky.idempotent",result="uncertain"} 1`,
		`countersign_executions_total{action="flaky.idempotent",result="succeeded"} 1`,
		`countersign_reconcile_attempts_total{action="flaky.reconciled",outcome="unknown"} 1`,
		`countersign_reconcile_attempts_total{action="flaky.reconciled",outcome="applied"} 0`,
		`countersign_decisions_total{decision="approved",via="api"} 2`)
	promtoolCheck(t, body)
}

// promtoolCheck runs `promtool check metrics` over a scrape. Without
// promtool the test skips, except in CI (.ci/run installs it).
func promtoolCheck(t *testing.T, scrape string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing: install Debian's prometheus package (.ci/run does)")
		}
		t.Skip("promtool is missing (Debian's prometheus package); CI runs this check")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// The operators' series: notification attempts by receiver and result
// (bounded: anything unknown is "other"), and the sealer's timestamp.
func TestOperatorMetrics(t *testing.T) {
	t.Parallel()
	m := NewMetrics(nil)
	m.NotificationAttempt("webhook", "failed")
	m.NotificationAttempt("slack", "retry")
	m.NotificationAttempt("slack", "retry")
	m.NotificationAttempt("t0123456789abcdef", "exploded")
	m.Sealed(time.Unix(1796356800, 500_000_000))
	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	wantSamples(t, "after the attempts and a seal", body,
		`countersign_notification_attempts_total{receiver="webhook",result="failed"} 1`,
		`countersign_notification_attempts_total{receiver="slack",result="retry"} 2`,
		`countersign_notification_attempts_total{receiver="other",result="other"} 1`,
		`countersign_audit_sealed_timestamp_seconds 1.7963568005e+09`)
	promtoolCheck(t, body)
}
