package countersign_test

import (
	"context"
	"sync"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// grantRule asks role:finance and lets an approval be remembered.
func grantRule() countersign.Rule {
	return countersign.Rule{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		Remember: []countersign.Scope{countersign.ScopeThread, countersign.ScopeRun}}
}

const grantInput = `{"amount":40,"customer":"c_9"}`

// remember has bob approve the pending proposal of tool call tool with a
// thread grant, and alice's repeat of the call execute it, so that the grant
// goes live.
func (h *harness) remember(tool string) {
	h.t.Helper()
	first := h.call(refundCall(tool, countersign.ModeWait, grantInput))
	if _, err := h.engine.Decide(context.Background(), &countersign.Decision{Identity: tBob, ProposalID: first.ProposalID,
		Verdict: countersign.Approve, Remember: countersign.ScopeThread}); err != nil {
		h.t.Fatal(err)
	}
	if r := h.call(refundCall(tool, countersign.ModeWait, grantInput)); r.Status != countersign.ResultSucceeded {
		h.t.Fatalf("the remembered call's execution = %+v", r)
	}
}

// A grant remembers the rule it was made under: once the rule's terms
// change it approves nothing, and if they change back it approves again.
func TestGrantStopsMatchingWhenItsRuleChanges(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open, rules: []countersign.Rule{grantRule()}})
		ctx := context.Background()
		h.remember("call_1")
		changed := map[string]func(r *countersign.Rule){
			"quorum":        func(r *countersign.Rule) { r.Quorum = 2 },
			"approvers":     func(r *countersign.Rule) { r.Approvers = []string{"role:finance", "actor:zoe"} },
			"self-approval": func(r *countersign.Rule) { r.ForbidSelfApproval = true },
			"remember":      func(r *countersign.Rule) { r.Remember = []countersign.Scope{countersign.ScopeThread} },
			"mode":          func(r *countersign.Rule) { r.Mode = countersign.ModeIndependent },
			"channels":      func(r *countersign.Rule) { r.Channels = []string{"web"} },
		}
		for name, change := range changed {
			rule := grantRule()
			change(&rule)
			res, err := h.engineWith(rule).Call(ctx, refundCall("changed_"+name, "", grantInput))
			if err != nil || res.GrantID != "" || res.Status != countersign.ResultPending {
				t.Fatalf("after the rule's %s changed: %+v, %v; want pending, no grant", name, res, err)
			}
		}
		// The same terms in another engine (another process, a restart): the
		// grant still approves.
		res, err := h.engineWith(grantRule()).Call(ctx, refundCall("same_rule", "", grantInput))
		if err != nil || res.GrantID == "" || res.Status != countersign.ResultSucceeded {
			t.Fatalf("under the unchanged rule: %+v, %v; want approved by the grant", res, err)
		}
	})
}

// engineWith is another engine on h's store and clock, under rule.
func (h *harness) engineWith(rule countersign.Rule) *countersign.Engine {
	h.t.Helper()
	e, err := countersign.New(countersign.Options{Store: h.store, Now: h.clock.Now, Actions: []*countersign.Action{mustAction(h.t, refundSpec(h.backend))},
		Policy: &countersign.Policy{Rules: []countersign.Rule{rule}}})
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// Calls that found a live grant before it was revoked, and are still
// preparing when the revocation is answered, do not go through on it: the
// grant is checked again when their proposals are created, and they ask a
// human instead, each in the mode it asked for: a two-phase call's
// proposal, made in wait mode while the grant stood, is then two-phase,
// with the confirmation id its evidence will carry (none in wait mode).
func TestGrantRevokedWhileCallsPrepareIsNeverOutrun(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		const n = 4
		var (
			mu      sync.Mutex
			armed   bool
			entered = make(chan struct{}, n)
			release = make(chan struct{})
		)
		h := newHarness(t, harnessOpts{open: open, rules: []countersign.Rule{grantRule()},
			actions: func(b *backend) []*countersign.Action {
				s := refundSpec(b)
				s.ReplacementKey = "" // the racing calls stand side by side
				s.Hooks.Prepare = func(ctx context.Context, req *countersign.PrepareRequest) (*countersign.Prepared, error) {
					mu.Lock()
					block := armed
					mu.Unlock()
					if block {
						entered <- struct{}{}
						<-release
					}
					return &countersign.Prepared{Preview: "refund"}, nil
				}
				return []*countersign.Action{mustAction(t, s)}
			}})
		ctx := context.Background()
		h.remember("call_1")
		executions := h.backend.total()
		mu.Lock()
		armed = true
		mu.Unlock()
		results := make([]*countersign.Result, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = h.engine.Call(ctx, refundCall("racing_"+string(rune('a'+i)), racingMode(i), grantInput))
			}()
		}
		for range n {
			<-entered // past FindGrant, which found the grant; now in Prepare
		}
		grants, err := h.engine.Grants(ctx, tAlice, "t1")
		if err != nil || len(grants) != 1 {
			t.Fatalf("grants = %+v, %v", grants, err)
		}
		if _, err := h.engine.RevokeGrant(ctx, tAlice, grants[0].ID); err != nil {
			t.Fatal(err)
		}
		close(release)
		wg.Wait()
		for i := range n {
			want := countersign.ResultPending
			if racingMode(i) == countersign.ModeTwoPhase {
				want = countersign.ResultConfirmationRequired
			}
			if errs[i] != nil || results[i].GrantID != "" || results[i].Status != want {
				t.Fatalf("call %d after the revocation = %+v, %v; want %s, asking a human", i, results[i], errs[i], want)
			}
			p, err := h.store.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: results[i].ProposalID})
			if err != nil || p.Status != cstype.StatusPending || len(p.Decisions) != 0 {
				t.Fatalf("proposal of call %d = %+v, %v; want pending, undecided", i, p, err)
			}
			if p.Mode != racingMode(i) || p.ConfirmationID != results[i].ConfirmationID ||
				(p.Mode == countersign.ModeTwoPhase) != (p.ConfirmationID != "") {
				t.Fatalf("proposal of call %d: mode %s, confirmation id %q, the call's %q; want %s, one exactly in two-phase mode",
					i, p.Mode, p.ConfirmationID, results[i].ConfirmationID, racingMode(i))
			}
		}
		if got := h.backend.total(); got != executions {
			t.Fatalf("%d executions after the revocation", got-executions)
		}
	})
}

// racingMode is the mode of TestGrantRevokedWhileCallsPrepareIsNeverOutrun's
// racing call i: wait and two-phase in turn.
func racingMode(i int) countersign.Mode {
	if i%2 == 1 {
		return countersign.ModeTwoPhase
	}
	return countersign.ModeWait
}

// Under a quorum a grant stands for a complete approval: one approver's
// remember plus another's plain approval remembers nothing; when both ask,
// the narrowest scope asked is what is remembered.
func TestQuorumGrantNeedsEveryApprovalToRemember(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		rule := grantRule()
		rule.Quorum = 2
		h := newHarness(t, harnessOpts{open: open, rules: []countersign.Rule{rule}})
		ctx := context.Background()
		approve := func(who countersign.Identity, id string, scope countersign.Scope) {
			t.Helper()
			if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: who, ProposalID: id, Verdict: countersign.Approve, Remember: scope}); err != nil {
				t.Fatal(err)
			}
		}
		first := h.call(refundCall("call_1", countersign.ModeWait, grantInput))
		approve(tBob, first.ProposalID, countersign.ScopeThread)
		approve(tCarol, first.ProposalID, "")
		if r := h.call(refundCall("call_1", countersign.ModeWait, grantInput)); r.Status != countersign.ResultSucceeded {
			t.Fatalf("the approved call = %+v", r)
		}
		next := h.call(refundCall("call_2", countersign.ModeWait, grantInput))
		if next.Status != countersign.ResultPending || next.GrantID != "" {
			t.Fatalf("after one remembering and one plain approval, the next identical call = %+v; want pending", next)
		}
		// Both remember, one the thread and one the run: the run is remembered.
		approve(tBob, next.ProposalID, countersign.ScopeThread)
		approve(tCarol, next.ProposalID, countersign.ScopeRun)
		h.call(refundCall("call_2", countersign.ModeWait, grantInput))
		if r := h.call(refundCall("call_3", countersign.ModeWait, grantInput)); r.Status != countersign.ResultSucceeded || r.GrantID == "" {
			t.Fatalf("in the same run after a complete remembered approval: %+v; want approved by the grant", r)
		}
		other := refundCall("call_4", countersign.ModeWait, grantInput)
		other.RunID = "r2"
		if r := h.call(other); r.Status != countersign.ResultPending || r.GrantID != "" {
			t.Fatalf("in another run: %+v; want pending (the grant is the narrowest scope asked, the run)", r)
		}
	})
}
