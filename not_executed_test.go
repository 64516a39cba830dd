package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// An Execute hook that makes no attempt at the change (its own check just
// before it failed) fails the proposal with executed false and its code
// first in the error, on every store; the hook saw the version the call was
// checked against.
func TestNotExecuted(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var mu sync.Mutex
		var versions []string
		spec := func(b *backend, name string, kind countersign.Kind) countersign.RawActionSpec {
			s := refundSpec(b)
			s.Name, s.Kind = name, kind
			s.Hooks.Execute = func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				mu.Lock()
				versions = append(versions, req.ActionVersion)
				mu.Unlock()
				return nil, countersign.NotExecuted(countersign.CodeActionVersionChanged, errors.New("the backend's refund is version 2"))
			}
			return s
		}
		h := newHarness(t, harnessOpts{open: open, actions: func(b *backend) []*countersign.Action {
			return []*countersign.Action{
				mustAction(t, spec(b, "payments.refund", countersign.KindWrite)),
				mustAction(t, spec(b, "payments.lookup", countersign.KindRead)),
			}
		}, rules: []countersign.Rule{
			{Match: "payments.refund", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}},
			{Match: "payments.lookup", Effect: countersign.EffectAllow},
		}})
		const want = "ACTION_VERSION_CHANGED: the backend's refund is version 2"

		res := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
		h.decide(tBob, res.ProposalID, countersign.Approve)
		out := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
		p := out.Proposal
		if out.Status != countersign.ResultFailed || p.Status != cstype.StatusFailed || out.Error != want {
			t.Fatalf("result %s %q, proposal %s: want failed with %q", out.Status, out.Error, p.Status, want)
		}
		if out.Executed == nil || *out.Executed || p.Outcome.Executed == nil || *p.Outcome.Executed {
			t.Fatalf("executed %v (proposal %v), want false: the hook attempted nothing", out.Executed, p.Outcome.Executed)
		}
		again, err := h.engine.Proposal(context.Background(), tAlice, p.ID)
		if err != nil || again.Outcome == nil || again.Outcome.Error == nil || *again.Outcome.Error != want {
			t.Fatalf("stored outcome %+v, %v: want the coded error", again.Outcome, err)
		}

		// A read, run at once without a record, answers the same.
		read := &countersign.Call{Identity: tAlice, ThreadID: "t1", ToolCallID: "call_2", Action: "payments.lookup",
			Input: json.RawMessage(`{"amount":1,"customer":"c_9"}`), Mode: countersign.ModeWait}
		out = h.call(read)
		if out.Status != countersign.ResultFailed || out.Error != want || out.Executed == nil || *out.Executed {
			t.Fatalf("a read: %s %q executed %v, want failed, not executed, with %q", out.Status, out.Error, out.Executed, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(versions, ",") != "1,1" {
			t.Fatalf("the hook saw versions %v, want the proposal's and the action's, 1", versions)
		}
	})
}
