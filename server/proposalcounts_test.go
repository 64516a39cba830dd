package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// countsStore counts the store calls a /metrics scrape may make: counts by
// status, and the reads that could count by hand.
type countsStore struct {
	store.Store
	mu    sync.Mutex
	calls int
}

func (c *countsStore) note() {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
}

func (c *countsStore) taken() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.calls
	c.calls = 0
	return n
}

func (c *countsStore) CountByStatus(ctx context.Context) (map[cstype.Status]int, error) {
	c.note()
	return c.Store.CountByStatus(ctx)
}

func (c *countsStore) ListProposals(ctx context.Context, p *store.ListProposalsParams) (*cstype.ProposalPage, error) {
	c.note()
	return c.Store.ListProposals(ctx, p)
}

func (c *countsStore) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*cstype.Event, error) {
	c.note()
	return c.Store.ListEvents(ctx, p)
}

// TestMetricsScrapeCostsNoStoreWork scrapes /metrics at 10 and at 10,000
// stored proposals: at both sizes a scrape makes no store call at all (the
// gauge is the last background count), so its cost does not grow with the
// table; the count itself (the worker's, internal/maintenance) is one store
// call, and is right.
func TestMetricsScrapeCostsNoStoreWork(t *testing.T) {
	t.Parallel()
	for _, size := range []int{10, 10_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			st := &countsStore{Store: memstore.New(nil)}
			reg := prometheus.NewRegistry()
			metrics := NewMetrics(reg)
			counts := NewProposalCounts()
			reg.MustRegister(counts)
			h := newHarness(t, "mem", harnessOptions{metrics: metrics, engine: func(o *countersign.Options) { o.Store = st }})
			ctx := context.Background()
			// One proposal through the engine, the rest copies of it stored
			// directly (the engine's path would take minutes under -race).
			res, err := h.engine.Call(ctx, &countersign.Call{
				Identity: identities["alice"], ThreadID: "t_m", ToolCallID: "m0", Action: "payments.refund",
				Input: json.RawMessage(`{"amount":1,"customer":"c_0"}`), Mode: countersign.ModeIndependent,
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < size; i++ {
				p := res.Proposal.Clone()
				p.ID, p.ToolCallID, p.OperationID, p.ReplacementKey = fmt.Sprintf("prp_m%d", i), fmt.Sprintf("m%d", i), fmt.Sprintf("op_m%d", i), ""
				p.ConfirmationID = fmt.Sprintf("cnf_m%d", i)
				if _, err := st.Store.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
					t.Fatal(err)
				}
			}
			scrape := func() string {
				t.Helper()
				rec := httptest.NewRecorder()
				promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				return rec.Body.String()
			}
			st.taken()
			if body := scrape(); strings.Contains(body, "countersign_proposals{") {
				t.Errorf("a sample before the first count:\n%s", body)
			}
			countOnce(t, st, counts)
			if n := st.taken(); n != 1 {
				t.Errorf("one count made %d store calls", n)
			}
			const scrapes = 20
			var body string
			for range scrapes {
				body = scrape()
				// Through the server too, as Prometheus scrapes it.
				h.must(200, req{method: "GET", path: "/metrics"})
			}
			if n := st.taken(); n != 0 {
				t.Errorf("at %d proposals, %d scrapes made %d store calls; want none", size, 2*scrapes, n)
			}
			t.Logf("%d proposals: %d scrapes, 0 store calls", size, 2*scrapes)
			if want := fmt.Sprintf("countersign_proposals{status=\"pending\"} %d", size); !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
			if !strings.Contains(body, "countersign_proposals_counted_timestamp_seconds ") {
				t.Errorf("/metrics lacks the count's time")
			}
		})
	}
}

// countOnce runs the worker's proposal count (maintenance.ProposalCounts,
// which countersign.Worker runs with OnProposalCounts) into counts: its
// first run, which starts at once; the interval is too long for another.
func countOnce(t *testing.T, st store.Store, counts *ProposalCounts) {
	t.Helper()
	set := make(chan struct{}, 1)
	svc := maintenance.NewProposalCounts(st, func(c map[cstype.Status]int, at time.Time) {
		counts.Set(c, at)
		set <- struct{}{}
	}, maintenance.ProposalCountsConfig{Interval: time.Hour, Logger: discard()})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-set:
	case err := <-done:
		t.Fatalf("the count stopped first: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no count within 30s")
	}
}

// TestProposalCountsFromTheWorker: the worker counts the store's proposals
// into the gauge (WorkerOptions.OnProposalCounts = ProposalCounts.Set) and
// /metrics serves exactly the count: every status, the approved backlog and
// the count's time; a later change shows in a later count. On SQLite and
// PostgreSQL.
func TestProposalCountsFromTheWorker(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "pg"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			counts := NewProposalCounts()
			reg.MustRegister(counts)
			start := time.Now()
			h := newHarness(t, kind, harnessOptions{metrics: NewMetrics(reg), worker: true, workerOpts: func(o *countersign.WorkerOptions) {
				o.OnProposalCounts, o.ProposalCountsEvery = counts.Set, 10*time.Millisecond
			}})
			// Two pending, one rejected, one approved that waits for its
			// caller (wait mode, nobody waiting), one independent that the
			// worker executes.
			h.pending("pc1", "c_1")
			h.pending("pc2", "c_2")
			h.decide(200, "bob", h.pending("pc3", "c_3"), "reject", nil, nil)
			h.decide(200, "bob", h.pending("pc4", "c_4"), "approve", nil, nil)
			ind := refund("pc5", "c_5", 5)
			ind["mode"] = "independent"
			res := h.call("alice", ind)
			h.decide(200, "bob", res["proposal_id"].(string), "approve", nil, nil)

			gauge := func(status string, n int) string {
				return fmt.Sprintf("countersign_proposals{status=%q} %d", status, n)
			}
			want := []string{
				gauge("pending", 2), gauge("approved", 1), gauge("rejected", 1), gauge("succeeded", 1),
				gauge("executing", 0), gauge("expired", 0), gauge("failed", 0), gauge("unknown", 0),
				"countersign_approved_backlog 1",
			}
			body := scrapeUntil(t, reg, want)
			at := countedAt(t, body)
			if at.Before(start.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("counted at %v: not during the test (%v..now)", at, start)
			}

			// One more proposal, rejected: a later count says so.
			h.decide(200, "bob", h.pending("pc6", "c_6"), "reject", nil, nil)
			body = scrapeUntil(t, reg, []string{gauge("pending", 2), gauge("rejected", 2), "countersign_approved_backlog 1"})
			if later := countedAt(t, body); !later.After(at) {
				t.Errorf("the later count is stamped %v, not after %v", later, at)
			}
		})
	}
}

// scrapeUntil scrapes reg until every sample in want is in the scrape, and
// returns it; it fails the test after 30s with the last scrape.
func scrapeUntil(t *testing.T, reg *prometheus.Registry, want []string) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body = rec.Body.String()
		missing := false
		for _, s := range want {
			if !strings.Contains(body, "\n"+s+"\n") {
				missing = true
				break
			}
		}
		if !missing {
			return body
		}
	}
	t.Fatalf("within 30s the scrape never held all of %q:\n%s", want, body)
	return ""
}

// countedAt is countersign_proposals_counted_timestamp_seconds of a scrape.
func countedAt(t *testing.T, body string) time.Time {
	t.Helper()
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "countersign_proposals_counted_timestamp_seconds "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("counted timestamp %q: %v", v, err)
			}
			return time.Unix(0, int64(f*1e9))
		}
	}
	t.Fatalf("no countersign_proposals_counted_timestamp_seconds in:\n%s", body)
	return time.Time{}
}

// TestProposalCountsSetKeepsItsCopy: the gauge reports the count as it was
// given, whatever its giver does with the map afterwards.
func TestProposalCountsSetKeepsItsCopy(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	counts := NewProposalCounts()
	reg.MustRegister(counts)
	m := map[cstype.Status]int{cstype.StatusPending: 3}
	counts.Set(m, time.Unix(1_700_000_000, 0))
	m[cstype.StatusPending] = 99
	scrapeUntil(t, reg, []string{`countersign_proposals{status="pending"} 3`, "countersign_proposals_counted_timestamp_seconds 1.7e+09"})
}
