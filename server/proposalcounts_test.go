package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
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

func (c *countsStore) CountByStatus(ctx context.Context) (map[store.Status]int, error) {
	c.note()
	return c.Store.CountByStatus(ctx)
}

func (c *countsStore) ListProposals(ctx context.Context, p *store.ListProposalsParams) (*store.ProposalPage, error) {
	c.note()
	return c.Store.ListProposals(ctx, p)
}

func (c *countsStore) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*store.Event, error) {
	c.note()
	return c.Store.ListEvents(ctx, p)
}

// TestMetricsScrapeCostsNoStoreWork scrapes /metrics at 10 and at 10,000
// stored proposals: at both sizes a scrape makes no store call at all (the
// gauge is the last background count), so its cost does not grow with the
// table; the count itself runs once per Refresh, and is right.
func TestMetricsScrapeCostsNoStoreWork(t *testing.T) {
	t.Parallel()
	for _, size := range []int{10, 10_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			st := &countsStore{Store: memstore.New(nil)}
			reg := prometheus.NewRegistry()
			metrics := NewMetrics(reg)
			counts := NewProposalCounts(st)
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
			if err := counts.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if n := st.taken(); n != 1 {
				t.Errorf("one refresh made %d store calls", n)
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

// TestProposalCountsRun: Run counts again each interval, and returns when
// its context ends.
func TestProposalCountsRun(t *testing.T) {
	t.Parallel()
	st := &countsStore{Store: memstore.New(nil)}
	counts := NewProposalCounts(st)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		counts.Run(ctx, 5*time.Millisecond, discard())
	}()
	// It counts again and again (each interval), until cancelled.
	for calls := 0; calls < 3; calls += st.taken() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
