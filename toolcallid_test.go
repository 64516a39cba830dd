package countersign_test

import (
	"context"
	"errors"
	"testing"

	"github.com/countersign/countersign"
)

// A call with FreshToolCallID (a built-in run's) may replay only its own
// run's record of its tool call id: a record another run of the thread
// made, or a call without a run, is refused with *ToolCallIDReusedError,
// nothing stored, replayed or run, even when that record is approved and a
// replay would execute it. Without the flag the replay rule stands.
func TestFreshToolCallIDRefusesAnotherRunsRecord(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open})
		ctx := context.Background()
		first := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
		if first.Status != countersign.ResultPending {
			t.Fatalf("first call = %+v, want pending", first)
		}
		h.decide(tBob, first.ProposalID, countersign.Approve)

		for _, runID := range []string{"r2", ""} {
			c := refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`)
			c.RunID, c.FreshToolCallID = runID, true
			res, err := h.engine.Call(ctx, c)
			re, ok := errors.AsType[*countersign.ToolCallIDReusedError](err)
			if !ok || !errors.Is(err, countersign.ErrToolCallIDReused) || res != nil || re.ToolCallID != "call_1" {
				t.Fatalf("run %q: Call = %+v, %v; want a *ToolCallIDReusedError", runID, res, err)
			}
		}
		// Another input under the id: the id is taken, whatever the call.
		other := refundCall("call_1", countersign.ModeWait, `{"amount":41,"customer":"c_9"}`)
		other.RunID, other.FreshToolCallID = "r2", true
		if _, err := h.engine.Call(ctx, other); !errors.Is(err, countersign.ErrToolCallIDReused) {
			t.Fatalf("another input under a reused id: %v, want ErrToolCallIDReused", err)
		}
		if n := h.backend.total(); n != 0 {
			t.Fatalf("%d executions after refused reuses, want none", n)
		}

		// The run that made it replays it (a crash's repeat), and executes
		// the approved call once.
		own := refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`)
		own.FreshToolCallID = true
		if res := h.call(own); res.Status != countersign.ResultSucceeded || res.Proposal.ID != first.ProposalID {
			t.Fatalf("own run's repeat = %+v, want the approved proposal executed", res)
		}
		// Without the flag (POST /v1/calls) a repeat from anywhere replays.
		plain := refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`)
		plain.RunID = "r9"
		if res := h.call(plain); res.Status != countersign.ResultSucceeded || res.Proposal.ID != first.ProposalID || h.backend.total() != 1 {
			t.Fatalf("plain repeat = %+v, %d executions; want the recorded outcome, one execution", res, h.backend.total())
		}
	})
}
