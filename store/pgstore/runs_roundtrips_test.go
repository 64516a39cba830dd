package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// TestRunTransitionsAreOneRoundTrip pins docs/design.md §15 for runs: posting a
// message that starts a run, a step, a claim of a parked run, the run's end
// and a cancellation each cost one round trip (the pool has one connection,
// and a first round warms its prepared statements).
func TestRunTransitionsAreOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, rt := tracedStore(t, "1")

	counted := func(f func() error) int64 {
		t.Helper()
		before := rt.Total()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return rt.Total() - before
	}
	for round := range 2 {
		th := fmt.Sprint("t", round)
		p := &store.Proposal{ID: fmt.Sprint("prp_", round), Tenant: "acme", Requester: "alice", ThreadID: th, ToolCallID: fmt.Sprint("c", round),
			Action: "payments.refund", ActionVersion: "1", InputDigest: "sha256:00", Mode: store.ModeWait,
			Approvers: []string{"role:finance"}, Quorum: 1, ExpiresAt: time.Now().Add(time.Hour), OperationID: fmt.Sprint("op", round)}
		if _, err := st.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
		var run *store.Run
		trips := map[string]int64{}
		trips["post"] = counted(func() error {
			res, err := st.PostMessage(ctx, &store.PostMessageParams{Owner: "alice",
				Message: &store.Message{ID: fmt.Sprint("msg_u", round), Tenant: "acme", ThreadID: th, Role: store.RoleUser, Text: "refund", Sender: "alice"},
				Run:     &store.Run{ID: fmt.Sprint("run_", round), Agent: "demo"}, LeaseOwner: "w", LeaseDuration: time.Minute})
			if err == nil {
				run = res.Run
			}
			return err
		})
		fence := func() store.Fence { return store.Fence{Token: run.Lease.Token, Generation: run.Lease.Generation} }
		trips["step"] = counted(func() error {
			var err error
			run, err = st.UpdateRun(ctx, &store.UpdateRunParams{Tenant: "acme", ID: run.ID, Fence: fence(), Steps: 1,
				Messages: []*store.Message{{ID: fmt.Sprint("msg_a", round), Role: store.RoleAssistant, Text: "asking",
					ToolCalls: []store.ToolCall{{ID: "call_1", Action: "payments.refund", Input: []byte(`{}`)}}}}})
			return err
		})
		trips["park"] = counted(func() error {
			_, err := st.UpdateRun(ctx, &store.UpdateRunParams{Tenant: "acme", ID: run.ID, Fence: fence(), To: store.RunParked, Awaiting: p.ID})
			return err
		})
		if _, err := st.Decide(ctx, &store.DecideParams{Tenant: "acme", ID: p.ID, Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}); err != nil {
			t.Fatal(err)
		}
		trips["claim"] = counted(func() error {
			runs, err := st.ClaimRuns(ctx, &store.ClaimRunsParams{Owner: "w2", LeaseDuration: time.Minute, Limit: 4})
			if err == nil && len(runs) != 1 {
				err = fmt.Errorf("claimed %d runs, want 1", len(runs))
			}
			if err == nil {
				run = runs[0]
			}
			return err
		})
		trips["finish"] = counted(func() error {
			_, err := st.UpdateRun(ctx, &store.UpdateRunParams{Tenant: "acme", ID: run.ID, Fence: fence(), To: store.RunFinished,
				Messages: []*store.Message{{ID: fmt.Sprint("msg_t", round), Role: store.RoleTool, ToolCallID: "call_1", Result: []byte(`{"status":"succeeded"}`)}}})
			return err
		})
		trips["cancel ended"] = counted(func() error {
			_, err := st.CancelRun(ctx, &store.CancelRunParams{Tenant: "acme", ID: run.ID})
			return err
		})
		if round == 0 {
			continue // the statements were being prepared
		}
		for op, n := range trips {
			if n != 1 {
				t.Errorf("%s: %d round trips, want 1", op, n)
			}
		}
	}
}
