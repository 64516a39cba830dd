package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// TestPartition black-holes the server's connections to PostgreSQL for 10 s
// (nothing moves either way, the connections stay open: a network
// partition, not a stopped database) while approvals are in flight through
// the API. No request answers 500; /healthz keeps answering and /readyz
// fails within its bound; when the partition heals, every approval the API
// accepted is recorded, one answered 503 is accepted when sent again, and
// the agents' repeated calls, made twice at once, execute each approved
// refund exactly once.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10s partition")
	}
	t.Parallel()
	var mu sync.Mutex
	executed := map[string]int{}
	h, proxy := proxiedHarness(t, harnessOptions{engine: func(o *countersign.Options) {
		refund, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
			Name: "payments.refund",
			Execute: func(_ context.Context, req *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
				mu.Lock()
				executed[req.OperationID]++
				mu.Unlock()
				return &countersign.Receipt{ID: "rf_" + in.Customer}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		o.Actions = []*countersign.Action{refund}
	}})
	const n = 12
	ids := make([]string, n)
	for i := range ids {
		ids[i] = h.pending(fmt.Sprintf("p%d", i), fmt.Sprintf("c_p%d", i))
	}

	proxy.BlackHole()
	cutAt := time.Now()
	answers := make([]*response, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			answers[i] = h.do(req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob", body: map[string]any{"reason": "ok"}})
		})
	}
	if r := h.do(req{method: "GET", path: "/healthz"}); r.status != http.StatusOK {
		t.Errorf("/healthz in the partition: %d", r.status)
	}
	if r := h.do(req{method: "GET", path: "/readyz"}); r.status != http.StatusServiceUnavailable {
		t.Errorf("/readyz in the partition: %d %s, want 503", r.status, r.body)
	}
	time.Sleep(time.Until(cutAt.Add(10 * time.Second)))
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	h.must(http.StatusOK, req{method: "GET", path: "/readyz"})

	accepted, unavailable := 0, 0
	for i, r := range answers {
		switch r.status {
		case http.StatusOK:
			accepted++
		case http.StatusServiceUnavailable:
			unavailable++ // refused whole: sent again, it is accepted
			h.must(http.StatusOK, req{method: "POST", path: "/v1/proposals/" + ids[i] + "/approve", token: "bob", body: map[string]any{"reason": "ok"}})
		default:
			t.Errorf("approve %s across the partition: %d %s, want 200 or 503", ids[i], r.status, r.body)
		}
	}
	// Each agent calls again, twice at once: the refund runs once.
	for i, id := range ids {
		p := h.must(http.StatusOK, req{method: "GET", path: "/v1/proposals/" + id, token: "bob"}).json(t)
		if p["status"] != "approved" {
			t.Fatalf("%s after the partition: %v, want approved (the decision lost?)", id, p["status"])
		}
		var again sync.WaitGroup
		for range 2 {
			again.Go(func() {
				body := refund(fmt.Sprintf("p%d", i), fmt.Sprintf("c_p%d", i), 40)
				body["wait_seconds"] = 10
				if r := h.do(req{method: "POST", path: "/v1/calls", token: "alice", body: body}); r.status != http.StatusOK {
					t.Errorf("the repeated call of %s: %d %s", id, r.status, r.body)
				}
			})
		}
		again.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	most := 0
	for _, c := range executed {
		most = max(most, c)
	}
	t.Logf("a 10s partition under %d approvals in flight: %d accepted once it healed, %d answered 503 (accepted when sent again); %d refunds executed, at most %d times each",
		n, accepted, unavailable, len(executed), most)
	if len(executed) != n || most != 1 {
		t.Errorf("%d refunds executed, at most %d times each; want %d, once each", len(executed), most, n)
	}
}
