// Command quickstart walks through Countersign's three modes in one process,
// on an embedded SQLite database, and prints what happens at each step.
//
//	go run ./examples/quickstart [-db path]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store/sqlitestore"
)

// RefundInput is the refund action's input; its JSON Schema is inferred.
type RefundInput struct {
	Amount   float64 `json:"amount" jsonschema:"amount in EUR"`
	Customer string  `json:"customer" jsonschema:"customer id"`
}

// out receives the walk-through; tests capture it.
var out io.Writer = os.Stdout

var (
	agent    = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	approver = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
)

func main() {
	dbPath := flag.String("db", "", "SQLite file (default: a fresh file in a temporary directory)")
	flag.Parse()
	if err := run(*dbPath); err != nil {
		log.Fatal(err)
	}
}

func run(dbPath string) error {
	ctx := context.Background()
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "countersign-quickstart-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "countersign.db")
	}
	st, err := sqlitestore.Open(ctx, dbPath, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(out, "store: SQLite at %s\n\n", dbPath)

	var executions atomic.Int32
	refund, err := countersign.NewAction(countersign.ActionSpec[RefundInput]{
		Name:         "payments.refund",
		Description:  "Refund a payment",
		Confirmation: countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest, in RefundInput) (*countersign.Receipt, error) {
			n := executions.Add(1)
			fmt.Fprintf(out, "    backend: refunding %.2f EUR to %s (operation %s, attempt %d)\n", in.Amount, in.Customer, req.OperationID, req.Attempt)
			return &countersign.Receipt{ID: fmt.Sprintf("rf_%d", n), Result: json.RawMessage(`{"refunded":true}`)}, nil
		},
	})
	if err != nil {
		return err
	}
	engine, err := countersign.New(countersign.Options{
		Store:   st,
		Actions: []*countersign.Action{refund},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			Remember: []countersign.Scope{countersign.ScopeThread},
		}}},
		WaitPoll: 20 * time.Millisecond,
	})
	if err != nil {
		return err
	}

	steps := []struct {
		title string
		fn    func(context.Context, *countersign.Engine) error
	}{
		{"1. wait mode: the call blocks until bob approves, then runs in the caller", waitMode},
		{"2. two_phase mode: CONFIRMATION_REQUIRED, then a retry with the evidence", twoPhaseMode},
		{"3. independent mode: a receipt at once; the worker executes after approval", independentMode},
		{"4. a rejection, and a remembered approval", rejectAndRemember},
	}
	for _, s := range steps {
		fmt.Fprintln(out, s.title)
		if err := s.fn(ctx, engine); err != nil {
			return fmt.Errorf("%s: %w", s.title, err)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "the backend executed %d refunds; every approved call ran exactly once\n", executions.Load())
	return nil
}

func call(thread, tool string, mode countersign.Mode, input string) *countersign.Call {
	return &countersign.Call{Identity: agent, ThreadID: thread, RunID: "run_1", ToolCallID: tool,
		Action: "payments.refund", Input: json.RawMessage(input), Mode: mode}
}

// approveFirstPending plays bob: it waits for a pending proposal and approves it.
func approveFirstPending(ctx context.Context, e *countersign.Engine, remember countersign.Scope) (string, error) {
	for {
		page, err := e.List(ctx, approver, countersign.ListParams{Statuses: []cstype.Status{cstype.StatusPending}})
		if err != nil {
			return "", err
		}
		if len(page.Proposals) > 0 {
			p := page.Proposals[0]
			fmt.Fprintf(out, "  bob sees: %q (input %s, digest %s…)\n", p.Preview, p.Input, p.InputDigest[:19])
			d, err := e.Decide(ctx, &countersign.Decision{Identity: approver, ProposalID: p.ID,
				Verdict: countersign.Approve, Via: "api", Reason: "looks right", Remember: remember})
			if err != nil {
				return "", err
			}
			fmt.Fprintf(out, "  bob approves: %s\n", d.Status)
			return p.ID, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitMode(ctx context.Context, e *countersign.Engine) error {
	done := make(chan error, 1)
	go func() {
		res, err := e.Call(ctx, call("thread_wait", "call_1", countersign.ModeWait, `{"amount": 40, "customer": "c_9"}`))
		if err == nil {
			fmt.Fprintf(out, "  alice's call returns: %s, receipt %s\n", res.Status, res.Receipt)
		}
		done <- err
	}()
	if _, err := approveFirstPending(ctx, e, ""); err != nil {
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	res, err := e.Call(ctx, call("thread_wait", "call_1", countersign.ModeWait, `{"amount": 40, "customer": "c_9"}`))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  alice repeats the same call: %s, receipt %s (not executed again)\n", res.Status, res.Receipt)
	return nil
}

func twoPhaseMode(ctx context.Context, e *countersign.Engine) error {
	first, err := e.Call(ctx, call("thread_2p", "call_1", countersign.ModeTwoPhase, `{"amount": 15, "customer": "c_4"}`))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  alice's call returns: %s, confirmation %s…, summary %q\n", first.Status, first.ConfirmationID[:12], first.Summary)
	if _, err := approveFirstPending(ctx, e, ""); err != nil {
		return err
	}
	retry := call("thread_2p", "call_2", countersign.ModeTwoPhase, `{"amount": 15, "customer": "c_4"}`)
	retry.Evidence = first.ConfirmationID
	res, err := e.Call(ctx, retry)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  alice retries with the evidence: %s, receipt %s\n", res.Status, res.Receipt)
	again := *retry
	again.ToolCallID = "call_3"
	_, err = e.Call(ctx, &again)
	var ev *countersign.EvidenceError
	if !errors.As(err, &ev) {
		return fmt.Errorf("spending evidence twice: %v", err)
	}
	fmt.Fprintf(out, "  spending the evidence again: CONFIRMATION_INVALID, reason %s\n", ev.Reason)
	return nil
}

func independentMode(ctx context.Context, e *countersign.Engine) error {
	wctx, stop := context.WithCancel(ctx)
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 50 * time.Millisecond})
	if err != nil {
		stop()
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(wctx) }()
	defer func() { stop(); <-stopped }()

	res, err := e.Call(ctx, call("thread_ind", "call_1", countersign.ModeIndependent, `{"amount": 99.5, "customer": "c_7"}`))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  alice's call returns at once: %s, executed %v; her turn ends\n", res.Status, *res.Executed)
	if _, err := approveFirstPending(ctx, e, ""); err != nil {
		return err
	}
	p, err := e.Wait(ctx, agent, res.ProposalID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  the worker settled it: %s, receipt %s\n", p.Status, p.Outcome.Receipt)
	// The outcome reached alice's thread: she reads it as its owner.
	v, err := e.Thread(ctx, agent, "thread_ind")
	if err != nil {
		return err
	}
	for _, m := range v.Messages {
		fmt.Fprintf(out, "  thread message (%s): %s\n", m.Role, m.Text)
	}
	return nil
}

func rejectAndRemember(ctx context.Context, e *countersign.Engine) error {
	res, err := e.Call(ctx, call("thread_r", "call_1", countersign.ModeIndependent, `{"amount": 5000, "customer": "c_1"}`))
	if err != nil {
		return err
	}
	d, err := e.Decide(ctx, &countersign.Decision{Identity: approver, ProposalID: res.ProposalID, Verdict: countersign.Reject, Reason: "too large"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  bob rejects a 5000 EUR refund: %s → %s: %s\n", d.Status, d.Proposal.Status, d.Proposal.Outcome.Summary)

	done := make(chan error, 1)
	go func() {
		_, err := e.Call(ctx, call("thread_r", "call_2", countersign.ModeWait, `{"amount": 3, "customer": "c_2"}`))
		done <- err
	}()
	if _, err := approveFirstPending(ctx, e, countersign.ScopeThread); err != nil {
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	again, err := e.Call(ctx, call("thread_r", "call_3", countersign.ModeWait, `{"amount": 3, "customer": "c_2"}`))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  the same refund again in the thread: %s without asking (grant %s…)\n", again.Status, again.GrantID[:12])
	return nil
}
