package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

var (
	demoAlice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	demoBob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance", "operator"}}
)

// demoEngine is the demo's engine on st, with a fresh demo backend: a new
// engine on the same store is a restart.
func demoEngine(t *testing.T, st store.Store) *countersign.Engine {
	t.Helper()
	actions, err := newDemoBackend().actions()
	if err != nil {
		t.Fatal(err)
	}
	e, err := countersign.New(countersign.Options{Store: st, Actions: actions, Policy: demoPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func demoRefund(tool, input string) *countersign.Call {
	return &countersign.Call{Identity: demoAlice, ThreadID: "t1", ToolCallID: tool, Action: "payments.refund", Input: json.RawMessage(input)}
}

// A refund of nothing or of a negative amount is invalid input: refused at
// the call, before anyone is asked.
func TestDemoRefundNeedsAPositiveAmount(t *testing.T) {
	t.Parallel()
	e := demoEngine(t, memstore.New(nil))
	for _, amount := range []string{"-5", "0", "-0.01"} {
		res, err := e.Call(context.Background(), demoRefund("neg_"+amount, `{"amount":`+amount+`,"customer":"c_9"}`))
		in, ok := errors.AsType[*countersign.InvalidInputError](err)
		if !ok || len(in.Problems) == 0 || in.Problems[0].Path != "/amount" {
			t.Fatalf("refund of %s = %+v, %v; want invalid input at /amount", amount, res, err)
		}
	}
	if res, err := e.Call(context.Background(), demoRefund("pos", `{"amount":0.01,"customer":"c_9"}`)); err != nil || res.Status != countersign.ResultPending {
		t.Fatalf("refund of 0.01 = %+v, %v; want pending", res, err)
	}
}

// The approver reads amounts with thousands separators, in the preview and
// the confirmation title.
func TestDemoAmountsHaveThousandsSeparators(t *testing.T) {
	t.Parallel()
	e := demoEngine(t, memstore.New(nil))
	res, err := e.Call(context.Background(), demoRefund("big", `{"amount":5000000,"customer":"c_9"}`))
	if err != nil || res.Proposal == nil {
		t.Fatalf("refund = %+v, %v", res, err)
	}
	const want = "Refund 5,000,000 EUR to c_9"
	if p := res.Proposal; p.Preview != want || p.Confirmation.Title != want {
		t.Fatalf("preview %q, title %q; want %q", p.Preview, p.Confirmation.Title, want)
	}
	for v, s := range map[float64]string{0: "0", 40: "40", 999: "999", 1000: "1,000", 1234.5: "1,234.5", 100000: "100,000",
		1234567.25: "1,234,567.25", -1234: "-1,234", 1e21: "1,000,000,000,000,000,000,000"} {
		if got := groupThousands(v); got != s {
			t.Errorf("groupThousands(%v) = %q, want %q", v, got, s)
		}
	}
}

// Receipts are unique across restarts: a restarted demo does not hand out
// rf_1 again.
func TestDemoReceiptsAreUniqueAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := openStore(ctx, "sqlite:"+filepath.Join(t.TempDir(), "demo.db"), true, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	receipts := map[string]string{}
	for _, run := range []string{"first", "second"} {
		e := demoEngine(t, st) // a fresh backend each time: a restart
		res, err := e.Call(ctx, demoRefund("call_"+run, `{"amount":40,"customer":"c_`+run+`"}`))
		if err != nil || res.Status != countersign.ResultPending {
			t.Fatalf("%s refund = %+v, %v", run, res, err)
		}
		if d, err := e.Decide(ctx, &countersign.Decision{Identity: demoBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil || d.Status != countersign.DecideApplied {
			t.Fatalf("approve: %+v, %v", d, err)
		}
		w, err := e.NewWorker(countersign.WorkerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := w.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("worker ran %d, %v", n, err)
		}
		p, err := e.Proposal(ctx, demoAlice, res.ProposalID)
		if err != nil || p.Status != cstype.StatusSucceeded || p.Outcome == nil || p.Outcome.Receipt == "" {
			t.Fatalf("%s refund after the worker: %+v, %v", run, p, err)
		}
		if prev, dup := receipts[p.Outcome.Receipt]; dup {
			t.Fatalf("the %s run's receipt %s repeats the %s run's", run, p.Outcome.Receipt, prev)
		}
		receipts[p.Outcome.Receipt] = run
	}
}

// Refunds over 1,000 EUR need two finance approvers; the others one. The
// proposal records which rule asked.
func TestDemoLargeRefundsNeedTwoApprovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := demoEngine(t, memstore.New(nil))
	carol := countersign.Identity{Tenant: "acme", Actor: "carol", Roles: []string{"finance"}}
	for _, tc := range []struct {
		amount      string
		quorum      int
		match, when string
	}{
		{"1000", 1, "payments.*", ""},
		{"1000.01", 2, "payments.refund", "input.amount > 1000"},
		{"25000", 2, "payments.refund", "input.amount > 1000"},
	} {
		res, err := e.Call(ctx, &countersign.Call{Identity: demoAlice, ThreadID: "t_" + tc.amount, ToolCallID: "c1",
			Action: "payments.refund", Input: json.RawMessage(`{"amount":` + tc.amount + `,"customer":"c_9"}`)})
		if err != nil || res.Status != countersign.ResultPending {
			t.Fatalf("refund of %s = %+v, %v; want pending", tc.amount, res, err)
		}
		p := res.Proposal
		if p.Quorum != tc.quorum || p.RuleMatch != tc.match || p.RuleWhen != tc.when {
			t.Errorf("refund of %s: quorum %d under rule %q when %q; want %d under %q when %q",
				tc.amount, p.Quorum, p.RuleMatch, p.RuleWhen, tc.quorum, tc.match, tc.when)
		}
		d, err := e.Decide(ctx, &countersign.Decision{Identity: demoBob, ProposalID: p.ID, Verdict: countersign.Approve})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int]cstype.Status{1: cstype.StatusApproved, 2: cstype.StatusPending}[tc.quorum]; d.Proposal.Status != want {
			t.Errorf("refund of %s after bob approved: %s, want %s", tc.amount, d.Proposal.Status, want)
		}
		if tc.quorum == 2 {
			d, err = e.Decide(ctx, &countersign.Decision{Identity: carol, ProposalID: p.ID, Verdict: countersign.Approve})
			if err != nil || d.Proposal.Status != cstype.StatusApproved {
				t.Errorf("refund of %s after carol approved too: %+v, %v; want approved", tc.amount, d, err)
			}
		}
	}
}
