package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
)

// A tool call id names one call: repeating it with another action or another
// input answers *MismatchError naming what differs, and stores and runs
// nothing — even when the other action is one the policy allows, or a read.
// Inputs compare by their validated digest, so a repeat that only reorders
// keys is the same call and replays.
func TestRepeatedToolCallWithAnotherActionOrInputIsAMismatch(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var reads atomic.Int32
		h := newHarness(t, harnessOpts{open: open,
			rules: []countersign.Rule{
				{Match: "payments.refund", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}},
				{Match: "payments.void", Effect: countersign.EffectAllow},
			},
			actions: func(b *backend) []*countersign.Action {
				void := refundSpec(b)
				void.Name = "payments.void"
				lookup := countersign.RawActionSpec{Name: "crm.lookup", Kind: countersign.KindRead,
					Hooks: countersign.Hooks{Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
						reads.Add(1)
						return &countersign.Receipt{ID: "found"}, nil
					}}}
				return []*countersign.Action{mustAction(t, refundSpec(b)), mustAction(t, void), mustAction(t, lookup)}
			}})
		ctx := context.Background()
		first := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
		if first.Status != countersign.ResultPending {
			t.Fatalf("first call = %+v, want pending", first)
		}
		mismatch := func(c *countersign.Call, want ...string) {
			t.Helper()
			res, err := h.engine.Call(ctx, c)
			me, ok := errors.AsType[*countersign.MismatchError](err)
			if !ok || !errors.Is(err, countersign.ErrCallMismatch) || res != nil {
				t.Fatalf("Call(%s %s %s) = %+v, %v; want a *MismatchError", c.ToolCallID, c.Action, c.Input, res, err)
			}
			if !slices.Equal(me.Differs, want) || me.ToolCallID != c.ToolCallID {
				t.Fatalf("mismatch = %+v, want %v differing", me, want)
			}
		}
		mismatch(refundCall("call_1", countersign.ModeIndependent, `{"amount":41,"customer":"c_9"}`), "input")
		// An input the schema refuses differs too; it is not stored either.
		mismatch(refundCall("call_1", countersign.ModeIndependent, `{"amount":-1,"customer":"c_9"}`), "input")
		void := refundCall("call_1", "", `{"amount":40,"customer":"c_9"}`)
		void.Action = "payments.void"
		mismatch(void, "action")
		look := &countersign.Call{Identity: tAlice, ThreadID: "t1", ToolCallID: "call_1", Action: "crm.lookup", Input: json.RawMessage(`{}`)}
		mismatch(look, "action", "input")
		if n := h.backend.total(); n != 0 || reads.Load() != 0 {
			t.Fatalf("a mismatched call ran: %d executions, %d reads", n, reads.Load())
		}

		// Another spelling of the same input is the same call.
		again := h.call(refundCall("call_1", countersign.ModeIndependent, ` { "customer": "c_9", "amount": 40.0 } `))
		if again.ProposalID != first.ProposalID {
			t.Fatalf("a reordered repeat = %+v, want the proposal %s", again, first.ProposalID)
		}

		// An allowed write that ran: a repeat with another input does not run
		// it again, nor a second one.
		ran := refundCall("call_2", "", `{"amount":5,"customer":"c_1"}`)
		ran.Action = "payments.void"
		if res := h.call(ran); res.Status != countersign.ResultSucceeded {
			t.Fatalf("allowed void = %+v", res)
		}
		other := refundCall("call_2", "", `{"amount":6,"customer":"c_1"}`)
		other.Action = "payments.void"
		mismatch(other, "input")
		if n := h.backend.total(); n != 1 {
			t.Fatalf("%d executions, want 1", n)
		}

		page, err := h.engine.List(ctx, tAlice, countersign.ListParams{ThreadID: "t1"})
		if err != nil || len(page.Proposals) != 2 {
			t.Fatalf("thread holds %+v, %v; want the two first calls only", page, err)
		}
		for _, p := range page.Proposals {
			if p.ToolCallID == "call_1" && string(p.Input) != `{"amount":40,"customer":"c_9"}` {
				t.Fatalf("the record's input became %s", p.Input)
			}
		}
	})
}
