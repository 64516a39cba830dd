package server

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// Caller-executed actions over HTTP: the execute answer is the claim, the
// caller settles and renews under its lease, and a lapsed lease is routed
// like any uncertain outcome.

// callerReconciles counts the Reconcile calls of caller.recon.
var callerReconciles atomic.Int64

// callerHarness is a harness whose engine also has caller-executed actions:
//
//   - caller.send (write, allowed, not idempotent: a lapse is unknown);
//   - caller.idem (write, allowed, idempotent: a lapse is claimed again);
//   - caller.recon (write, allowed, with a Reconcile that finds the change);
//   - callerask.pay (write, the requester approves).
//
// The engine's lease is lease; a worker runs when worker is set.
func callerHarness(t *testing.T, kind string, lease time.Duration, worker bool) *harness {
	t.Helper()
	policy := countersign.Policy{Rules: append(slices.Clone(testPolicy.Rules),
		countersign.Rule{Match: "caller.*", Effect: countersign.EffectAllow},
		countersign.Rule{Match: "callerask.*", Effect: countersign.EffectAsk, Approvers: []string{"requester"}},
	)}
	mk := func(name string, idempotent bool, hooks countersign.Hooks) *countersign.Action {
		a, err := countersign.NewRawAction(countersign.RawActionSpec{Name: name, CallerExecuted: true, Idempotent: idempotent, Hooks: hooks})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	actions := []*countersign.Action{
		mk("caller.send", false, countersign.Hooks{}),
		mk("caller.idem", true, countersign.Hooks{}),
		mk("caller.recon", false, countersign.Hooks{Reconcile: func(_ context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
			callerReconciles.Add(1)
			return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "found_" + req.OperationID}, nil
		}}),
		mk("callerask.pay", false, countersign.Hooks{}),
	}
	return newHarness(t, kind, harnessOptions{worker: worker, engine: func(o *countersign.Options) {
		o.Policy = &policy
		o.Actions = append(o.Actions, actions...)
		o.LeaseDuration = lease
	}})
}

func callerCall(tool, action string) map[string]any {
	return map[string]any{"thread_id": "t_caller", "tool_call_id": tool, "action": action, "input": map[string]any{"to": "c_9"}, "wait_seconds": 0}
}

// lease returns the answer's lease: token, attempt.
func leaseOf(t *testing.T, res map[string]any) (string, float64) {
	t.Helper()
	l, ok := res["lease"].(map[string]any)
	if !ok {
		t.Fatalf("answer has no lease: %v", res)
	}
	return l["token"].(string), l["attempt"].(float64)
}

func (h *harness) settle(token, id string, body map[string]any) map[string]any {
	h.t.Helper()
	return h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/settle", token: token, body: body}).json(h.t)
}

func TestCallerExecutedAction(t *testing.T) {
	t.Parallel()
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := callerHarness(t, kind, time.Minute, false)
			res := h.call("alice", callerCall("call_1", "caller.send"))
			if res["status"] != "execute" {
				t.Fatalf("status %v, want execute: %v", res["status"], res)
			}
			token, attempt := leaseOf(t, res)
			id, op := res["proposal_id"].(string), res["operation_id"].(string)
			if attempt != 1 || op == "" || token == "" {
				t.Errorf("lease attempt %v, operation %q, token %q; want 1, an id, a token", attempt, op, token)
			}
			if in, _ := res["input"].(map[string]any); in["to"] != "c_9" {
				t.Errorf("input = %v, want the approved input", res["input"])
			}
			if p := res["proposal"].(map[string]any); p["status"] != "executing" || p["operation_id"] != op {
				t.Errorf("proposal status %v, operation %v; want executing, %s", p["status"], p["operation_id"], op)
			}

			// A repeat while the lease is live: executing, no lease.
			again := h.call("alice", callerCall("call_1", "caller.send"))
			if again["status"] != "executing" || again["executed"] != nil || again["lease"] != nil || again["proposal_id"] != id {
				t.Errorf("repeat = %v, want executing, executed null, no lease, the same proposal", again)
			}

			// Renew: the same token, a later (or equal) expiry.
			expires := res["lease"].(map[string]any)["expires_at"].(string)
			ren := h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/renew", token: "alice", body: map[string]any{"lease_token": token}}).json(t)
			if ren["status"] != "applied" {
				t.Fatalf("renew = %v, want applied", ren)
			}
			if l := ren["lease"].(map[string]any); l["token"] != token || l["expires_at"].(string) < expires || l["attempt"].(float64) != 1 {
				t.Errorf("renewed lease %v, want token %s, expires_at at or after %s, attempt 1", l, token, expires)
			}
			if r := h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/renew", token: "alice", body: map[string]any{"lease_token": "not-the-token"}}).json(t); r["status"] != "conflict" || r["lease"] != nil {
				t.Errorf("renew with a wrong token = %v, want conflict without a lease", r)
			}

			// Only the requester settles; a wrong token is a conflict.
			if r := h.do(req{method: "POST", path: "/v1/proposals/" + id + "/settle", token: "bob", body: map[string]any{"lease_token": token, "outcome": "succeeded"}}); r.status != 403 {
				t.Errorf("bob's settlement: %d, want 403: %s", r.status, r.body)
			}
			if r := h.do(req{method: "POST", path: "/v1/proposals/" + id + "/settle", token: "x_alice", body: map[string]any{"lease_token": token, "outcome": "succeeded"}}); r.status != 403 {
				t.Errorf("another tenant's settlement: %d, want 403: %s", r.status, r.body)
			}
			if r := h.do(req{method: "POST", path: "/v1/proposals/prp_nope/settle", token: "alice", body: map[string]any{"lease_token": token, "outcome": "succeeded"}}); r.status != 404 {
				t.Errorf("settlement of no proposal: %d, want 404: %s", r.status, r.body)
			}
			for _, bad := range []map[string]any{
				{"outcome": "succeeded"},
				{"lease_token": token, "outcome": "unknown"},
				{"lease_token": token, "outcome": "succeeded", "extra": 1},
			} {
				if r := h.do(req{method: "POST", path: "/v1/proposals/" + id + "/settle", token: "alice", body: bad, invalid: true}); r.status != 400 {
					t.Errorf("settle %v: %d, want 400: %s", bad, r.status, r.body)
				}
			}
			stale := h.settle("alice", id, map[string]any{"lease_token": "stale", "outcome": "succeeded", "receipt": "r_1"})
			if stale["status"] != "conflict" || stale["proposal"].(map[string]any)["status"] != "executing" {
				t.Errorf("settlement with a wrong token = %v, want conflict, still executing", stale)
			}

			done := h.settle("alice", id, map[string]any{"lease_token": token, "outcome": "succeeded", "receipt": "r_1", "result": map[string]any{"sent": true}})
			p := done["proposal"].(map[string]any)
			if done["status"] != "applied" || p["status"] != "succeeded" || p["outcome"].(map[string]any)["receipt"] != "r_1" {
				t.Fatalf("settlement = %v, want applied, succeeded with receipt r_1", done)
			}
			// Repeated after a lost answer: applied; with another outcome:
			// conflict, and nothing changes.
			if r := h.settle("alice", id, map[string]any{"lease_token": token, "outcome": "succeeded", "receipt": "r_1"}); r["status"] != "applied" {
				t.Errorf("the same settlement again = %v, want applied", r["status"])
			}
			if r := h.settle("alice", id, map[string]any{"lease_token": token, "outcome": "failed", "error": "oops"}); r["status"] != "conflict" || r["proposal"].(map[string]any)["status"] != "succeeded" {
				t.Errorf("another settlement after it = %v, want conflict, still succeeded", r)
			}
			// The call now replays the outcome.
			replay := h.call("alice", callerCall("call_1", "caller.send"))
			if replay["status"] != "succeeded" || replay["receipt"] != "r_1" || replay["executed"] != true {
				t.Errorf("replay = %v, want succeeded, receipt r_1, executed", replay)
			}
			if res := replay["result"].(map[string]any); res["sent"] != true {
				t.Errorf("replayed result = %v, want the settled one", replay["result"])
			}
		})
	}
}

func TestCallerExecutedAskedAndFailed(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := callerHarness(t, kind, time.Minute, false)
			first := h.call("alice", callerCall("call_pay", "callerask.pay"))
			if first["status"] != "pending" {
				t.Fatalf("status %v, want pending", first["status"])
			}
			id := first["proposal_id"].(string)
			h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "alice", body: map[string]any{}})
			res := h.call("alice", callerCall("call_pay", "callerask.pay"))
			if res["status"] != "execute" {
				t.Fatalf("after approval: %v, want execute", res)
			}
			token, _ := leaseOf(t, res)
			done := h.settle("alice", id, map[string]any{"lease_token": token, "outcome": "failed", "error": "card declined"})
			p := done["proposal"].(map[string]any)
			o := p["outcome"].(map[string]any)
			if done["status"] != "applied" || p["status"] != "failed" || o["error"] != "card declined" || o["executed"] != true {
				t.Errorf("failed settlement = %v, want applied, failed, executed, with the error", done)
			}
			if r := h.call("alice", callerCall("call_pay", "callerask.pay")); r["status"] != "failed" || r["error"] != "card declined" {
				t.Errorf("replay = %v, want failed with the caller's error", r)
			}
			// Nobody but its caller can execute it: independent mode is refused.
			r := h.do(req{method: "POST", path: "/v1/calls", token: "alice", body: map[string]any{
				"thread_id": "t_caller", "tool_call_id": "call_ind", "action": "callerask.pay", "input": map[string]any{}, "mode": "independent",
			}})
			if r.status != 400 || r.errorCode(t) != CodeInvalidBody {
				t.Errorf("independent call: %d %s, want 400 %s", r.status, r.body, CodeInvalidBody)
			}
		})
	}
}

// TestCallerConcurrentIdenticalCalls: identical calls at once get one lease;
// every other answer is executing.
func TestCallerConcurrentIdenticalCalls(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "pg"} {
		for _, action := range []string{"caller.send", "callerask.pay"} {
			t.Run(kind+"/"+action, func(t *testing.T) {
				t.Parallel()
				h := callerHarness(t, kind, time.Minute, false)
				if action == "callerask.pay" {
					first := h.call("alice", callerCall("call_race", action))
					h.must(200, req{method: "POST", path: "/v1/proposals/" + first["proposal_id"].(string) + "/approve", token: "alice", body: map[string]any{}})
				}
				const n = 12
				answers := make([]*response, n)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i := range n {
					wg.Go(func() {
						<-start
						answers[i] = h.do(req{method: "POST", path: "/v1/calls", token: "alice", body: callerCall("call_race", action)})
					})
				}
				close(start)
				wg.Wait()
				leases, ids := 0, map[string]bool{}
				for i, a := range answers {
					if a.status != 200 {
						t.Fatalf("call %d: %d %s", i, a.status, a.body)
					}
					m := a.json(t)
					ids[m["proposal_id"].(string)] = true
					switch m["status"] {
					case "execute":
						leases++
					case "executing":
						if m["lease"] != nil {
							t.Errorf("an executing answer carries a lease: %v", m)
						}
					default:
						t.Errorf("call %d: %v, want execute or executing", i, m)
					}
				}
				if leases != 1 || len(ids) != 1 {
					t.Errorf("%d leases over %d proposals, want 1 lease on 1 proposal", leases, len(ids))
				}
			})
		}
	}
}

// waitStatus polls a proposal until it has status want.
func (h *harness) waitStatus(token, id, want string, within time.Duration) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		p := h.must(200, req{method: "GET", path: "/v1/proposals/" + id, token: token}).json(h.t)
		if p["status"] == want {
			return p
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("proposal %s is %v after %v, want %s: %v", id, p["status"], within, want, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCallerLeaseLapses: a caller that claims and never settles leaves its
// lease to lapse. The workers notice within the lease and a poll: unknown,
// or reconciled, or (idempotent) claimed again by the next identical call
// with the same operation id, one attempt more. The stale lease settles
// nothing.
func TestCallerLeaseLapses(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	for _, kind := range []string{"sqlite", "pg"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := callerHarness(t, kind, lease, true)
			claim := func(tool, action string) (string, string, string, float64) {
				res := h.call("alice", callerCall(tool, action))
				if res["status"] != "execute" {
					t.Fatalf("%s: %v, want execute", action, res)
				}
				token, attempt := leaseOf(t, res)
				return res["proposal_id"].(string), res["operation_id"].(string), token, attempt
			}
			sendID, _, sendTok, _ := claim("call_send", "caller.send")
			idemID, idemOp, idemTok, _ := claim("call_idem", "caller.idem")
			reconID, reconOp, reconTok, _ := claim("call_recon", "caller.recon")

			p := h.waitStatus("alice", sendID, "unknown", 10*lease)
			if o := p["outcome"].(map[string]any); o["executed"] != nil {
				t.Errorf("unknown outcome executed = %v, want null", o["executed"])
			}
			if r := h.call("alice", callerCall("call_send", "caller.send")); r["status"] != "unknown" || r["executed"] != nil {
				t.Errorf("repeat after the lapse = %v, want unknown (never a second lease)", r)
			}
			p = h.waitStatus("alice", reconID, "succeeded", 10*lease)
			if o := p["outcome"].(map[string]any); o["receipt"] != "found_"+reconOp {
				t.Errorf("reconciled receipt %v, want found_%s", o["receipt"], reconOp)
			}

			// The idempotent one is released to its caller: the next
			// identical call claims attempt 2.
			deadline := time.Now().Add(10 * lease)
			var again map[string]any
			for {
				again = h.call("alice", callerCall("call_idem", "caller.idem"))
				if again["status"] == "execute" || time.Now().After(deadline) {
					break
				}
				if again["status"] != "executing" {
					t.Fatalf("repeat of the idempotent call = %v, want executing, then execute", again)
				}
				time.Sleep(20 * time.Millisecond)
			}
			tok2, attempt2 := leaseOf(t, again)
			if again["operation_id"] != idemOp || attempt2 != 2 || tok2 == idemTok || again["proposal_id"] != idemID {
				t.Errorf("re-claim: operation %v, attempt %v, token new %v; want %s, 2, true", again["operation_id"], attempt2, tok2 != idemTok, idemOp)
			}
			if r := h.call("alice", callerCall("call_idem", "caller.idem")); r["status"] != "executing" {
				t.Errorf("repeat while the new lease is live = %v, want executing", r["status"])
			}

			// Stale leases settle nothing.
			for _, s := range []struct{ id, token, want string }{{sendID, sendTok, "unknown"}, {reconID, reconTok, "succeeded"}, {idemID, idemTok, "executing"}} {
				r := h.settle("alice", s.id, map[string]any{"lease_token": s.token, "outcome": "succeeded", "receipt": "late"})
				if r["status"] != "conflict" || r["proposal"].(map[string]any)["status"] != s.want {
					t.Errorf("stale settlement of %s = %v, want conflict, still %s", s.id, r["status"], s.want)
				}
			}
			done := h.settle("alice", idemID, map[string]any{"lease_token": tok2, "outcome": "succeeded", "receipt": "r_idem"})
			if done["status"] != "applied" || done["proposal"].(map[string]any)["status"] != "succeeded" {
				t.Errorf("settlement under the new lease = %v, want applied, succeeded", done)
			}
		})
	}
}
