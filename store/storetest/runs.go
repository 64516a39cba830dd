package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// testRuns pins store.Conversations: messages of every role, runs and the
// thread they hold, on every driver.
func testRuns(t *testing.T, newStore Factory) {
	t.Run("MessageOnly", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		res := fx.post("t-msg", requester, "hello", nil)
		if res.Run != nil || res.Thread.Owner != requester || res.Thread.RunID != "" {
			t.Fatalf("posted without a run: run %+v, thread %+v", res.Run, res.Thread)
		}
		requireTime(t, "message created_at", res.Message.CreatedAt, fx.clock.Now())
		msgs := fx.messages("t-msg")
		if len(msgs) != 1 || msgs[0].Role != store.RoleUser || msgs[0].Text != "hello" || msgs[0].Sender != requester {
			t.Fatalf("messages %+v, want alice's hello", msgs)
		}
		// A second message: no run holds the thread.
		fx.post("t-msg", requester, "again", nil)
		if n := len(fx.messages("t-msg")); n != 2 {
			t.Fatalf("%d messages, want 2", n)
		}
	})

	t.Run("NotTheOwner", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.post("t-own", requester, "mine", nil)
		_, err := fx.store.PostMessage(fx.ctx, fx.postParams("t-own", approver, "theirs", nil))
		requireErrorIs(t, err, store.ErrNotThreadOwner)
		_, err = fx.store.PostMessage(fx.ctx, fx.postParams("t-own", approver, "theirs", newRun()))
		requireErrorIs(t, err, store.ErrNotThreadOwner)
		if n := len(fx.messages("t-own")); n != 1 {
			t.Fatalf("%d messages after refused posts, want 1", n)
		}
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		for name, mut := range map[string]func(*store.PostMessageParams){
			"no message":        func(p *store.PostMessageParams) { p.Message = nil },
			"no id":             func(p *store.PostMessageParams) { p.Message.ID = "" },
			"no thread":         func(p *store.PostMessageParams) { p.Message.ThreadID = "" },
			"assistant role":    func(p *store.PostMessageParams) { p.Message.Role = store.RoleAssistant },
			"no owner":          func(p *store.PostMessageParams) { p.Owner = "" },
			"run without lease": func(p *store.PostMessageParams) { p.Run = newRun(); p.LeaseDuration = 0 },
			"decision with run": func(p *store.PostMessageParams) { p.Run = newRun(); p.Decision = true },
		} {
			p := fx.postParams("t-bad", requester, "x", nil)
			mut(p)
			if _, err := fx.store.PostMessage(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("%s: %v, want ErrInvalidParams", name, err)
			}
		}
		// A message id is used once in a thread (testMessageIDs has the
		// rest).
		p := fx.postParams("t-bad", requester, "x", nil)
		fx.mustPost(p)
		_, err := fx.store.PostMessage(fx.ctx, p)
		requireMessageIDTaken(t, "the same message id twice", err, "t-bad", p.Message.ID)
	})

	t.Run("RunHoldsTheThread", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		res := fx.post("t-run", requester, "refund 40", newRun())
		r := res.Run
		if r == nil || r.Status != store.RunRunning || r.Lease == nil || r.Lease.Owner != worker || r.Version != 1 || r.Agent != "demo" ||
			!reflect.DeepEqual(r.Roles, []string{"agent", "ops"}) {
			t.Fatalf("started run %+v", r)
		}
		requireTime(t, "lease expiry", r.Lease.ExpiresAt, fx.clock.Now().Add(longLease))
		if res.Thread.RunID != r.ID || fx.thread("t-run").RunID != r.ID {
			t.Fatalf("thread's run %q, want %s", fx.thread("t-run").RunID, r.ID)
		}
		// Another message, with or without a run, is refused and not stored.
		for _, run := range []*store.Run{nil, newRun()} {
			_, err := fx.store.PostMessage(fx.ctx, fx.postParams("t-run", requester, "and more", run))
			var busy *store.ThreadBusyError
			if !errors.As(err, &busy) || busy.RunID != r.ID || !errors.Is(err, store.ErrThreadBusy) {
				t.Fatalf("a message while a run holds the thread: %v, want THREAD_BUSY naming %s", err, r.ID)
			}
		}
		// A text decision is taken, whoever sends it.
		dp := fx.postParams("t-run", approver, "yes", nil)
		dp.Decision, dp.Owner = true, ""
		fx.mustPost(dp)
		msgs := fx.messages("t-run")
		if len(msgs) != 2 || msgs[1].Text != "yes" || msgs[1].Sender != approver || !msgs[1].Decision || msgs[0].Decision {
			t.Fatalf("messages %+v, want the user's and the decision, marked", msgs)
		}
		got := fx.getRun(r.ID)
		requireSameRun(t, got, r)
		// No other tenant sees it.
		if _, err := fx.store.GetRun(fx.ctx, &store.GetRunParams{Tenant: otherTenant, ID: r.ID}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another tenant's GetRun: %v, want ErrNotFound", err)
		}
	})

	t.Run("DecisionNeedsAThread", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		dp := fx.postParams("t-none", approver, "yes", nil)
		dp.Decision, dp.Owner = true, ""
		_, err := fx.store.PostMessage(fx.ctx, dp)
		requireErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("UpdateAppendsAndEnds", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := fx.post("t-upd", requester, "refund 40 to c_9", newRun()).Run
		fx.clock.Advance(time.Second)
		input := json.RawMessage(`{"amount":40,"customer":"c_9"}`)
		r2, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r),
			Steps: 1, ProposalIDs: []string{"prp_1", "prp_1"}, LeaseDuration: 2 * longLease,
			Messages: []*store.Message{
				{ID: uniqueID("msg"), Role: store.RoleAssistant, Text: "I'll ask.",
					ToolCalls: []store.ToolCall{{ID: "call_1", Action: "payments.refund", Input: input}}},
				{ID: uniqueID("msg"), Role: store.RoleTool, ToolCallID: "call_1", ProposalID: "prp_1",
					Result: json.RawMessage(`{"proposal_id":"prp_1","status":"succeeded"}`), Text: "refund succeeded"},
			}})
		if err != nil {
			t.Fatal(err)
		}
		if r2.Status != store.RunRunning || r2.Steps != 1 || !reflect.DeepEqual(r2.ProposalIDs, []string{"prp_1"}) || r2.Version != 2 {
			t.Fatalf("updated run %+v", r2)
		}
		requireTime(t, "renewed lease", r2.Lease.ExpiresAt, fx.clock.Now().Add(2*longLease))
		msgs := fx.messages("t-upd")
		if len(msgs) != 3 {
			t.Fatalf("%d messages, want 3", len(msgs))
		}
		a, tool := msgs[1], msgs[2]
		if a.Role != store.RoleAssistant || a.RunID != r.ID || len(a.ToolCalls) != 1 || a.ToolCalls[0].Action != "payments.refund" ||
			a.ToolCalls[0].ID != "call_1" || !jsonEqual(a.ToolCalls[0].Input, input) {
			t.Fatalf("assistant message %+v", a)
		}
		if tool.Role != store.RoleTool || tool.ToolCallID != "call_1" || tool.ProposalID != "prp_1" || tool.RunID != r.ID ||
			!jsonEqual(tool.Result, json.RawMessage(`{"proposal_id":"prp_1","status":"succeeded"}`)) || tool.Text != "refund succeeded" {
			t.Fatalf("tool message %+v", tool)
		}
		// A stale fence changes nothing.
		_, err = fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: store.Fence{Token: "stale", Generation: 1}, Steps: 1})
		requireRunConflict(t, err, true)
		// Finishing releases the thread.
		r3, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r2), To: store.RunFinished,
			Messages: []*store.Message{{ID: uniqueID("msg"), Role: store.RoleAssistant, Text: "Done."}}})
		if err != nil {
			t.Fatal(err)
		}
		if r3.Status != store.RunFinished || r3.Lease != nil || r3.EndedAt == nil {
			t.Fatalf("finished run %+v", r3)
		}
		requireTime(t, "ended_at", *r3.EndedAt, fx.clock.Now())
		if fx.thread("t-upd").RunID != "" {
			t.Fatal("a finished run still holds its thread")
		}
		_, err = fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r2), Steps: 1})
		requireRunConflict(t, err, true)
		// The thread takes a new run.
		next := fx.post("t-upd", requester, "another", newRun()).Run
		runs, err := fx.store.ListRuns(fx.ctx, &store.ListRunsParams{Tenant: tenant, ThreadID: "t-upd", Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || runs[0].ID != next.ID || runs[1].ID != r.ID {
			t.Fatalf("ListRuns %v, want newest first", runIDs(runs))
		}
		if runs, _ := fx.store.ListRuns(fx.ctx, &store.ListRunsParams{Tenant: tenant, ThreadID: "t-upd", Limit: 1}); len(runs) != 1 {
			t.Fatalf("ListRuns limit 1: %d runs", len(runs))
		}
	})

	t.Run("FailRecordsTheError", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := fx.post("t-fail", requester, "x", newRun()).Run
		r2, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), To: store.RunFailed, Error: "model: 500"})
		if err != nil {
			t.Fatal(err)
		}
		if got := fx.getRun(r.ID); got.Status != store.RunFailed || got.Error != "model: 500" || r2.Error != "model: 500" {
			t.Fatalf("failed run %+v", got)
		}
		if fx.thread("t-fail").RunID != "" {
			t.Fatal("a failed run still holds its thread")
		}
	})

	t.Run("ParkAndResume", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.create(fx.proposal("t-park", withRequester(requester))).Proposal
		r := fx.post("t-park", requester, "refund", newRun()).Run
		parked, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r),
			To: store.RunParked, Awaiting: p.ID, ProposalIDs: []string{p.ID}, Steps: 1})
		if err != nil {
			t.Fatal(err)
		}
		if parked.Status != store.RunParked || parked.Lease != nil || parked.Awaiting != p.ID {
			t.Fatalf("parked run %+v", parked)
		}
		if fx.thread("t-park").RunID != r.ID {
			t.Fatal("a parked run must still hold its thread")
		}
		_, err = fx.store.PostMessage(fx.ctx, fx.postParams("t-park", requester, "hello?", nil))
		requireErrorIs(t, err, store.ErrThreadBusy)
		// Nothing to resume while the proposal is pending.
		fx.clock.Advance(2 * longLease)
		if got := fx.claimRuns(worker2); len(got) != 0 {
			t.Fatalf("claimed %v while its proposal is pending", runIDs(got))
		}
		// The old lease holder cannot write to a parked run.
		_, err = fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), Steps: 1})
		requireRunConflict(t, err, true)
		fx.decide(p, approver, store.VerdictApproved)
		got := fx.claimRuns(worker2)
		if len(got) != 1 || got[0].ID != r.ID || got[0].Status != store.RunRunning || got[0].Lease == nil ||
			got[0].Lease.Owner != worker2 || got[0].Awaiting != "" || got[0].Steps != 1 {
			t.Fatalf("claimed %+v, want the run resumed by worker-2", got)
		}
		if got[0].Lease.Generation != got[0].Version {
			t.Fatalf("lease generation %d, want the version %d", got[0].Lease.Generation, got[0].Version)
		}
		if again := fx.claimRuns(worker); len(again) != 0 {
			t.Fatalf("claimed twice: %v", runIDs(again))
		}
		// The new holder goes on.
		if _, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(got[0]), To: store.RunFinished}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ResumedByEveryWayOutOfPending", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		park := func(th string, p *store.Proposal) *store.Run {
			t.Helper()
			r := fx.post(th, requester, "x", newRun()).Run
			parked, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), To: store.RunParked, Awaiting: p.ID})
			if err != nil {
				t.Fatal(err)
			}
			return parked
		}
		claimOnly := func(name string, want *store.Run) {
			t.Helper()
			// Without a sweep: the transition marked the run ready.
			got := fx.claimRuns(worker2)
			if len(got) != 1 || got[0].ID != want.ID {
				t.Fatalf("%s: claimed %v, want %s", name, runIDs(got), want.ID)
			}
			// Ended, so that moving the clock lapses no lease of it.
			if _, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: want.ID, Fence: runFence(got[0]), To: store.RunFinished}); err != nil {
				t.Fatal(err)
			}
		}
		for _, way := range []struct {
			name string
			opts []func(*store.Proposal)
			out  func(p *store.Proposal)
		}{
			{"approved", nil, func(p *store.Proposal) { fx.decide(p, approver, store.VerdictApproved) }},
			{"rejected", nil, func(p *store.Proposal) { fx.decide(p, approver, store.VerdictRejected) }},
			{"cancelled", nil, func(p *store.Proposal) {
				if _, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: p.ID, Actor: requester, Via: "api"}); err != nil {
					t.Fatal(err)
				}
			}},
			{"expired", nil, func(p *store.Proposal) {
				fx.clock.Advance(2 * time.Hour)
				if _, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: p.ID}); err != nil {
					t.Fatal(err)
				}
			}},
			{"expired by a sweep", nil, func(p *store.Proposal) {
				fx.clock.Advance(2 * time.Hour)
				if _, err := fx.store.ExpireDue(fx.ctx, &store.ExpireDueParams{Limit: 100}); err != nil {
					t.Fatal(err)
				}
			}},
			{"superseded", []func(*store.Proposal){withKey("k")}, func(p *store.Proposal) {
				fx.create(fx.proposal(p.ThreadID, withRequester(requester), withKey("k")))
			}},
		} {
			th := uniqueID("t-way")
			p := fx.create(fx.proposal(th, append([]func(*store.Proposal){withRequester(requester)}, way.opts...)...)).Proposal
			r := park(th, p)
			if got := fx.claimRuns(worker2); len(got) != 0 {
				t.Fatalf("%s: claimed %v while the proposal is pending", way.name, runIDs(got))
			}
			way.out(p)
			claimOnly(way.name, r)
		}
		// A partial approval leaves it pending: nothing to resume.
		th := uniqueID("t-quorum")
		p := fx.create(fx.proposal(th, withRequester(requester), withQuorum(2))).Proposal
		park(th, p)
		fx.decide(p, approver, store.VerdictApproved)
		if got, err := fx.store.ClaimRuns(fx.ctx, &store.ClaimRunsParams{Owner: worker2, LeaseDuration: longLease, Limit: 10, Sweep: true}); err != nil || len(got) != 0 {
			t.Fatalf("claimed %v (%v) after one of two approvals", runIDs(got), err)
		}
		// Parked on a proposal decided already: ready at once.
		th = uniqueID("t-late")
		p = fx.create(fx.proposal(th, withRequester(requester))).Proposal
		fx.decide(p, approver, store.VerdictApproved)
		claimOnly("parked after the decision", park(th, p))
	})

	t.Run("SweepFindsWhatAClaimFinds", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.create(fx.proposal("t-sweep", withRequester(requester))).Proposal
		r := fx.post("t-sweep", requester, "x", newRun()).Run
		if _, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), To: store.RunParked, Awaiting: p.ID}); err != nil {
			t.Fatal(err)
		}
		sweep := func() []*store.Run {
			got, err := fx.store.ClaimRuns(fx.ctx, &store.ClaimRunsParams{Owner: worker2, LeaseDuration: longLease, Limit: 10, Sweep: true})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := sweep(); len(got) != 0 {
			t.Fatalf("a sweep claimed %v while the proposal is pending", runIDs(got))
		}
		fx.decide(p, approver, store.VerdictApproved)
		if got := sweep(); len(got) != 1 || got[0].ID != r.ID {
			t.Fatalf("a sweep claimed %v, want %s", runIDs(got), r.ID)
		}
	})

	t.Run("LapsedLeaseIsClaimable", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := fx.post("t-lapse", requester, "x", newRun()).Run
		if got := fx.claimRuns(worker2); len(got) != 0 {
			t.Fatalf("claimed a run under a live lease: %v", runIDs(got))
		}
		fx.clock.Advance(longLease + time.Second)
		got := fx.claimRuns(worker2)
		if len(got) != 1 || got[0].ID != r.ID || got[0].Lease.Owner != worker2 {
			t.Fatalf("claimed %+v, want the lapsed run", got)
		}
		_, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), Steps: 1})
		requireRunConflict(t, err, true)
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := fx.post("t-cancel", requester, "x", newRun()).Run
		c, err := fx.store.CancelRun(fx.ctx, &store.CancelRunParams{Tenant: tenant, ID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != store.RunCancelled || c.Lease != nil || c.EndedAt == nil {
			t.Fatalf("cancelled run %+v", c)
		}
		if fx.thread("t-cancel").RunID != "" {
			t.Fatal("a cancelled run still holds its thread")
		}
		again, err := fx.store.CancelRun(fx.ctx, &store.CancelRunParams{Tenant: tenant, ID: r.ID})
		if err != nil || again.Version != c.Version {
			t.Fatalf("cancel twice: %+v, %v; want unchanged", again, err)
		}
		_, err = fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), Steps: 1})
		requireRunConflict(t, err, true)
		if _, err := fx.store.CancelRun(fx.ctx, &store.CancelRunParams{Tenant: otherTenant, ID: r.ID}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another tenant's cancel: %v, want ErrNotFound", err)
		}
	})

	t.Run("DeleteThreadDeletesRuns", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := fx.post("t-del", requester, "x", newRun()).Run
		if err := fx.store.DeleteThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: "t-del"}); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.store.GetRun(fx.ctx, &store.GetRunParams{Tenant: tenant, ID: r.ID}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetRun after DeleteThread: %v, want ErrNotFound", err)
		}
		// The thread can be started afresh.
		fx.post("t-del", approver, "new owner", newRun())
	})

	t.Run("RaceTwoMessages", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		for round := range 3 {
			th := fmt.Sprintf("t-race-%d", round)
			if round > 0 { // also when the thread exists already
				fx.post(th, requester, "first", nil)
			}
			const n = 16
			results := make([]*store.PostMessageResult, n)
			errs := make([]error, n)
			concurrently(n, func(i int) {
				results[i], errs[i] = fx.store.PostMessage(fx.ctx, fx.postParams(th, requester, fmt.Sprintf("m%d", i), newRun()))
			})
			won := -1
			for i := range n {
				switch {
				case errs[i] == nil:
					if won >= 0 {
						t.Fatalf("round %d: two runs started: %s and %s", round, results[won].Run.ID, results[i].Run.ID)
					}
					won = i
				case !errors.Is(errs[i], store.ErrThreadBusy):
					t.Fatalf("round %d: poster %d: %v, want THREAD_BUSY", round, i, errs[i])
				}
			}
			if won < 0 {
				t.Fatalf("round %d: no run started", round)
			}
			if got := fx.thread(th).RunID; got != results[won].Run.ID {
				t.Fatalf("round %d: thread held by %q, want %s", round, got, results[won].Run.ID)
			}
			msgs := fx.messages(th)
			if last := msgs[len(msgs)-1]; last.Text != fmt.Sprintf("m%d", won) || len(msgs) != 1+min(round, 1) {
				t.Fatalf("round %d: messages %d, last %q; want only the winner's stored", round, len(msgs), last.Text)
			}
		}
	})

	t.Run("RaceResume", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.create(fx.proposal("t-rres", withRequester(requester))).Proposal
		r := fx.post("t-rres", requester, "x", newRun()).Run
		if _, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), To: store.RunParked, Awaiting: p.ID}); err != nil {
			t.Fatal(err)
		}
		fx.decide(p, approver, store.VerdictRejected)
		const n = 16
		got := make([][]*store.Run, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			got[i], errs[i] = fx.store.ClaimRuns(fx.ctx, &store.ClaimRunsParams{Owner: fmt.Sprintf("w%d", i), LeaseDuration: longLease, Limit: 10})
		})
		claimed := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("claimer %d: %v", i, errs[i])
			}
			claimed += len(got[i])
		}
		if claimed != 1 {
			t.Fatalf("%d claims of one parked run, want 1", claimed)
		}
	})
}

func newRun() *store.Run {
	return &store.Run{ID: uniqueID("run"), Agent: "demo", Roles: []string{"agent", "ops"}}
}

func runFence(r *store.Run) store.Fence {
	return store.Fence{Token: r.Lease.Token, Generation: r.Lease.Generation}
}

func (fx *fixture) postParams(th, sender, text string, run *store.Run) *store.PostMessageParams {
	return &store.PostMessageParams{
		Owner:   sender,
		Message: &store.Message{ID: uniqueID("msg"), Tenant: tenant, ThreadID: th, Role: store.RoleUser, Text: text, Sender: sender},
		Run:     run, LeaseOwner: worker, LeaseDuration: longLease,
	}
}

func (fx *fixture) mustPost(p *store.PostMessageParams) *store.PostMessageResult {
	fx.t.Helper()
	res, err := fx.store.PostMessage(fx.ctx, p)
	if err != nil {
		fx.t.Fatalf("PostMessage(%q): %v", p.Message.Text, err)
	}
	if res == nil || res.Message == nil || res.Thread == nil || (p.Run != nil) != (res.Run != nil) {
		fx.t.Fatalf("PostMessage(%q): result %+v", p.Message.Text, res)
	}
	return res
}

func (fx *fixture) post(th, sender, text string, run *store.Run) *store.PostMessageResult {
	fx.t.Helper()
	return fx.mustPost(fx.postParams(th, sender, text, run))
}

func (fx *fixture) thread(th string) *store.Thread {
	fx.t.Helper()
	t, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: th})
	if err != nil {
		fx.t.Fatalf("GetThread(%s): %v", th, err)
	}
	return t
}

func (fx *fixture) getRun(id string) *store.Run {
	fx.t.Helper()
	r, err := fx.store.GetRun(fx.ctx, &store.GetRunParams{Tenant: tenant, ID: id})
	if err != nil {
		fx.t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

func (fx *fixture) claimRuns(owner string) []*store.Run {
	fx.t.Helper()
	runs, err := fx.store.ClaimRuns(fx.ctx, &store.ClaimRunsParams{Owner: owner, LeaseDuration: longLease, Limit: 10})
	if err != nil {
		fx.t.Fatalf("ClaimRuns: %v", err)
	}
	return runs
}

func runIDs(runs []*store.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

func requireRunConflict(t *testing.T, err error, leaseLost bool) {
	t.Helper()
	var ce *store.RunConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) || ce.LeaseLost != leaseLost {
		t.Fatalf("error %v, want a run conflict (lease lost %v)", err, leaseLost)
	}
}

func requireSameRun(t *testing.T, got, want *store.Run) {
	t.Helper()
	if got.ID != want.ID || got.Status != want.Status || got.Version != want.Version || got.Agent != want.Agent ||
		got.ThreadID != want.ThreadID || got.Tenant != want.Tenant || (got.Lease == nil) != (want.Lease == nil) ||
		(got.Lease != nil && (got.Lease.Token != want.Lease.Token || got.Lease.Generation != want.Lease.Generation)) {
		t.Fatalf("run %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(got.Roles, want.Roles) {
		t.Fatalf("run roles %q, want %q", got.Roles, want.Roles)
	}
	requireTime(t, "started_at", got.StartedAt, want.StartedAt)
}
