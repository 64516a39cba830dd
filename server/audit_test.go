package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
)

// auditAnswer is GET /v1/audit's body, its events kept as sent.
type auditAnswer struct {
	Events []json.RawMessage `json:"events"`
	Next   *int64            `json:"next"`
}

func (h *harness) audit(token, query string) auditAnswer {
	h.t.Helper()
	var a auditAnswer
	if err := json.Unmarshal(h.must(200, req{method: "GET", path: "/v1/audit" + query, token: token}).body, &a); err != nil {
		h.t.Fatal(err)
	}
	return a
}

// runSealer seals the harness's store until the test ends.
func (h *harness) runSealer() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = h.engine.RunSealer(ctx, countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute})
	})
	h.t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestAudit(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, kind, harnessOptions{})
			for i := range 3 {
				id := h.pending(fmt.Sprint("call_", i), fmt.Sprint("c_", i))
				h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: map[string]any{"reason": "<no & never>"}})
			}
			evs, err := h.engine.Store().ListEvents(t.Context(), &store.ListEventsParams{Tenant: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			h.runSealer()
			var whole auditAnswer
			for whole = h.audit("carol", ""); len(whole.Events) < len(evs); whole = h.audit("carol", "") {
				select {
				case <-t.Context().Done():
					t.Fatalf("the chain holds %d events, want %d", len(whole.Events), len(evs))
				case <-time.After(5 * time.Millisecond):
				}
			}
			if len(whole.Events) != len(evs) || whole.Next != nil {
				t.Fatalf("GET /v1/audit = %d events, next %v; want %d, null", len(whole.Events), whole.Next, len(evs))
			}
			// What the server answers verifies as it is.
			var v auditchain.Verifier
			for _, raw := range whole.Events {
				if err := v.Line(raw); err != nil {
					t.Fatalf("verify the answer: %v", err)
				}
			}
			// Pages of two, joined, are the whole chain.
			var joined []json.RawMessage
			for after := "0"; ; {
				page := h.audit("carol", "?limit=2&after="+after)
				joined = append(joined, page.Events...)
				if page.Next == nil {
					break
				}
				if len(page.Events) != 2 {
					t.Fatalf("a page of limit 2 with a next = %d events", len(page.Events))
				}
				after = fmt.Sprint(*page.Next)
			}
			if fmt.Sprint(joined) != fmt.Sprint(whole.Events) {
				t.Error("pages of two differ from the whole chain")
			}
			// Only operators read it; another tenant's operator reads its own.
			for _, tok := range []string{"alice", "bob", "dave"} {
				if code := h.must(403, req{method: "GET", path: "/v1/audit", token: tok}).errorCode(t); code != CodeForbidden {
					t.Errorf("GET /v1/audit as %s: %s, want FORBIDDEN", tok, code)
				}
			}
			if other := h.audit("x_eve", ""); len(other.Events) != 0 || other.Next != nil {
				t.Errorf("another tenant's chain = %d events, want none", len(other.Events))
			}
			for _, q := range []string{"?after=-1", "?after=x", "?limit=0", "?limit=1001"} {
				h.must(400, req{method: "GET", path: "/v1/audit" + q, token: "carol", invalid: true})
			}
			h.must(401, req{method: "GET", path: "/v1/audit"})
		})
	}
}
