package server

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// runSealer seals the harness's store every 5ms until the test ends.
func (h *harness) runSealer() {
	h.runSealerWith(countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute})
}

// runSealerWith runs, until the test ends, a worker with the sealer of
// opts, as beside a server.
func (h *harness) runSealerWith(opts countersign.SealerOptions) {
	w, err := h.engine.NewWorker(countersign.WorkerOptions{Sealer: opts})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
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
			evs, err := h.store.ListEvents(t.Context(), &store.ListEventsParams{Tenant: "acme"})
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

// TestAuditEventIsTheChainsEvent: GET /v1/audit answers the chain's own
// event, auditchain.Event, the one definition of the shape an event's hash
// covers: each event of the answer, decoded into the server's AuditEvent,
// hashes by auditchain.Hash to the hash it carries and is written back byte
// for byte as it came, so no member of the answer is outside the hash's
// definition.
func TestAuditEventIsTheChainsEvent(t *testing.T) {
	t.Parallel()
	var _ *auditchain.Event = (*AuditEvent)(nil) // one type, not two of the same fields
	h := newHarness(t, "sqlite", harnessOptions{})
	id := h.pending("call_1", "c_1")
	h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: map[string]any{"reason": "<no & never>\u2028"}})
	evs, err := h.store.ListEvents(t.Context(), &store.ListEventsParams{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	h.runSealer()
	var a auditAnswer
	for a = h.audit("carol", ""); len(a.Events) < len(evs); a = h.audit("carol", "") {
		select {
		case <-t.Context().Done():
			t.Fatalf("the chain holds %d events, want %d", len(a.Events), len(evs))
		case <-time.After(5 * time.Millisecond):
		}
	}
	kinded := 0
	for _, raw := range a.Events {
		var e AuditEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		if got := auditchain.Hash(&e); got != e.Hash {
			t.Errorf("auditchain.Hash of %s = %s, want the hash it carries", raw, got)
		}
		if back, err := json.Marshal(&e); err != nil || string(back) != string(raw) {
			t.Errorf("written back as %s, %v; the answer was %s", back, err, raw)
		}
		if e.ActorKind != "" {
			kinded++
		}
	}
	if kinded == 0 {
		t.Errorf("no event of %d has an actor_kind: the member only some events have is not shown", len(a.Events))
	}
}

// TestAuditEventWireFormat pins the JSON of an exported event, byte for
// byte, as the server wrote it when it had a struct of its own: chains and
// clients of that time still verify. actor_kind is absent when empty.
func TestAuditEventWireFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    AuditEvent
		want string
	}{{
		AuditEvent{Seq: 7, ID: 42, Type: "proposal.expired", ProposalID: "prp_1", Status: "expired", Detail: "not_collected",
			At: "2026-01-02T03:04:05.123456789Z", PrevHash: "ab", Hash: "cd"},
		`{"seq":7,"id":42,"type":"proposal.expired","proposal_id":"prp_1","actor":"","via":"","status":"expired","detail":"not_collected","at":"2026-01-02T03:04:05.123456789Z","prev_hash":"ab","hash":"cd"}`,
	}, {
		AuditEvent{Seq: 1, ID: 1, Type: "proposal.decided", ProposalID: "prp_<&>", Actor: "bob \"b\"", ActorKind: "human", Via: "api", Status: "rejected",
			Detail: "Reason: <no & never>\u2028é", At: "2026-01-02T03:04:05Z", Hash: "00"},
		`{"seq":1,"id":1,"type":"proposal.decided","proposal_id":"prp_\u003c\u0026\u003e","actor":"bob \"b\"","actor_kind":"human","via":"api","status":"rejected","detail":"Reason: \u003cno \u0026 never\u003e\u2028é","at":"2026-01-02T03:04:05Z","prev_hash":"","hash":"00"}`,
	}} {
		if got, err := json.Marshal(&c.e); err != nil || string(got) != c.want {
			t.Errorf("json.Marshal = %s, %v\nwant %s", got, err, c.want)
		}
	}
}

// checkpointAnswer is GET /v1/audit/checkpoints's body, its checkpoints
// kept as sent.
type checkpointAnswer struct {
	Checkpoints []json.RawMessage `json:"checkpoints"`
	Next        *int64            `json:"next"`
}

func (h *harness) checkpoints(token, query string) checkpointAnswer {
	h.t.Helper()
	var a checkpointAnswer
	if err := json.Unmarshal(h.must(200, req{method: "GET", path: "/v1/audit/checkpoints" + query, token: token}).body, &a); err != nil {
		h.t.Fatal(err)
	}
	return a
}

// TestAuditCheckpoints: with a key, the server's sealer signs checkpoints,
// which operators read page by page; what the server answers verifies as it
// is, with the events of GET /v1/audit, against the public key.
func TestAuditCheckpoints(t *testing.T) {
	t.Parallel()
	key := ed25519.NewKeyFromSeed([]byte("countersign-server-checkpoint-ky"))
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, kind, harnessOptions{})
			// Events, sealed and signed a few at a time: each round signs
			// the head as the sealer found it.
			h.runSealerWith(countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute,
				SigningKey: key, CheckpointEvery: 5 * time.Millisecond})
			if a := h.checkpoints("carol", ""); len(a.Checkpoints) != 0 || a.Next != nil {
				t.Fatalf("checkpoints of an empty chain = %+v, want none, next null", a)
			}
			var n int
			for i := range 3 {
				id := h.pending(fmt.Sprint("call_", i), fmt.Sprint("c_", i))
				h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: map[string]any{"reason": "no"}})
				evs, err := h.store.ListEvents(t.Context(), &store.ListEventsParams{Tenant: "acme"})
				if err != nil {
					t.Fatal(err)
				}
				n = len(evs)
				for {
					a := h.checkpoints("carol", "")
					if len(a.Checkpoints) > 0 && strings.Contains(string(a.Checkpoints[len(a.Checkpoints)-1]), fmt.Sprintf(`"seq":%d,`, n)) {
						break
					}
					select {
					case <-t.Context().Done():
						t.Fatalf("no checkpoint of seq %d came: %s", n, a.Checkpoints)
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			whole := h.checkpoints("carol", "")
			if len(whole.Checkpoints) < 3 || whole.Next != nil {
				t.Fatalf("GET /v1/audit/checkpoints = %d checkpoints, next %v; want one a round at least, null", len(whole.Checkpoints), whole.Next)
			}
			// Verified as received: the events, each checkpoint after the
			// event it covers.
			v := &auditchain.ExportVerifier{Keys: auditchain.NewKeys(key.Public().(ed25519.PublicKey)), Every: time.Second, Now: time.Now()}
			cps := slices.Clone(whole.Checkpoints)
			for _, raw := range h.audit("carol", "").Events {
				if err := v.Line(raw); err != nil {
					t.Fatalf("verify the events: %v", err)
				}
				var e struct{ Seq int64 }
				_ = json.Unmarshal(raw, &e)
				for len(cps) > 0 && strings.Contains(string(cps[0]), fmt.Sprintf(`"seq":%d,`, e.Seq)) {
					if err := v.Checkpoint(cps[0]); err != nil {
						t.Fatalf("verify the checkpoint %s: %v", cps[0], err)
					}
					cps = cps[1:]
				}
			}
			if res, err := v.Finish(); err != nil || len(cps) != 0 || res.Checkpoints != len(whole.Checkpoints) {
				t.Fatalf("verify the answer: %+v, %v, %d left over; want every checkpoint verified", res, err, len(cps))
			}
			// Pages of one, joined, are the whole list.
			var joined []json.RawMessage
			for after := "0"; ; {
				page := h.checkpoints("carol", "?limit=1&after="+after)
				joined = append(joined, page.Checkpoints...)
				if page.Next == nil {
					break
				}
				after = fmt.Sprint(*page.Next)
			}
			// (The head's checkpoint is signed again meanwhile, with a new
			// time: the seqs are what pages must agree on.)
			seqs := func(raws []json.RawMessage) []int64 {
				var out []int64
				for _, raw := range raws {
					var c struct{ Seq int64 }
					_ = json.Unmarshal(raw, &c)
					out = append(out, c.Seq)
				}
				return out
			}
			if !slices.Equal(seqs(joined), seqs(whole.Checkpoints)) || !slices.IsSorted(seqs(joined)) {
				t.Errorf("pages of one hold seqs %v, the whole list %v", seqs(joined), seqs(whole.Checkpoints))
			}
			for _, tok := range []string{"alice", "bob", "dave"} {
				if code := h.must(403, req{method: "GET", path: "/v1/audit/checkpoints", token: tok}).errorCode(t); code != CodeForbidden {
					t.Errorf("GET /v1/audit/checkpoints as %s: %s, want FORBIDDEN", tok, code)
				}
			}
			if other := h.checkpoints("x_eve", ""); len(other.Checkpoints) != 0 || other.Next != nil {
				t.Errorf("another tenant's checkpoints = %d, want none", len(other.Checkpoints))
			}
			for _, q := range []string{"?after=-1", "?after=x", "?limit=0", "?limit=1001"} {
				h.must(400, req{method: "GET", path: "/v1/audit/checkpoints" + q, token: "carol", invalid: true})
			}
			h.must(401, req{method: "GET", path: "/v1/audit/checkpoints"})
		})
	}
}
