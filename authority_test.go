package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// The authority table (docs/api.md Part 3; docs/design.md §18): every credential kind
// × role × relation to the thread × channel × operation, with the answer a
// reading of the contract gives, written here without the engine's code and
// checked against the engine on every store.

// answer is what an operation comes to.
type answer string

const (
	allowed answer = "allowed"
	// agentRefused: *AgentCannotDecideError, before anything is looked up.
	agentRefused answer = "agent"
	// refused: forbidden, or not found (another tenant's record).
	refused answer = "refused"
)

// authorityActor is one row's who: an actor of a tenant with roles, and its
// relation to alice's thread t1 and her proposals in it.
type authorityActor struct {
	name     string
	tenant   string
	roles    []string
	relation string // owner, approver, operator, none, other-tenant
}

var authorityActors = []authorityActor{
	{"alice", "acme", nil, "owner"},
	{"bob", "acme", []string{"finance"}, "approver"},
	{"olga", "acme", []string{"operator"}, "operator"},
	{"dave", "acme", nil, "none"},
	{"eve", "globex", []string{"finance", "operator"}, "other-tenant"},
}

// expected is the contract's answer for op by a of kind.
func expected(a authorityActor, kind countersign.CredentialKind, op string) answer {
	human := kind == countersign.KindHuman
	same := a.tenant == "acme"
	owner := same && a.relation == "owner"
	finance := same && slices.Contains(a.roles, "finance")
	operator := same && slices.Contains(a.roles, "operator")
	decisionShaped := func(ok bool) answer {
		switch {
		case !human:
			return agentRefused
		case ok:
			return allowed
		}
		return refused
	}
	either := func(ok bool) answer {
		if ok {
			return allowed
		}
		return refused
	}
	switch op {
	case "see", "list", "conversation", "announcements":
		// The requester sees her proposals whatever the kind; an approver's
		// visibility is a person's only. Operators see pending proposals
		// no more than anyone else (only reconciling and unknown ones).
		// Whoever sees a proposal reads the conversation that led to it,
		// and where it was announced.
		return either(owner || (human && finance))
	case "waits-for", "counted":
		// A pending proposal waits for each person who may approve it and
		// has not decided it: the requester (an approver here) and
		// finance; never for an agent credential, whoever it acts for.
		return either(human && (owner || finance))
	case "announce":
		// A Slack button or an email link goes to whom the proposal waits
		// for, as a person, but never to its requester: the requester's
		// agent may read their chat and mail.
		return either(human && finance && !owner)
	case "email-link":
		// Links go where announcements go; an agent credential is
		// refused before anything is looked up.
		return decisionShaped(finance && !owner)
	case "approve", "reject":
		// Approvers: the requester (as a person) and role:finance.
		return decisionShaped(owner || finance)
	case "post-message":
		// Only the thread's owner posts in it, and only as a person. A
		// thread is a tenant's: eve's "t1" is her own, which her message
		// makes.
		return decisionShaped(owner || !same)
	case "read-thread":
		// eve reads the t1 her message (as a person, first) made.
		return either(owner || !same)
	case "cancel":
		return either(owner)
	case "own-proposal":
		// An MCP task is its requester's alone, whatever the kind: an
		// approver, however senior, answers as if it did not exist.
		return either(owner)
	case "revoke-grant":
		// The grant's requester (alice), its approver (bob), operators.
		return decisionShaped(owner || (same && a.name == "bob") || operator)
	case "audit", "notifications":
		// An operator reads her own tenant's, whichever tenant that is.
		return decisionShaped(slices.Contains(a.roles, "operator"))
	case "resolve":
		return decisionShaped(operator)
	case "sign-in":
		return decisionShaped(true)
	case "enroll-link":
		// Only an operator, as a person, makes a passkey enrollment link,
		// for an actor of her own tenant, whichever tenant that is.
		return decisionShaped(slices.Contains(a.roles, "operator"))
	case "step-up":
		// A step-up challenge is a decision's first half: the approvers'.
		return decisionShaped(owner || finance)
	case "reserved-thread":
		// Thread ids beginning mcp: or mcp_ are the MCP gateway's: nobody
		// names one in a call or a message, whoever they are.
		return refused
	}
	panic("unknown operation " + op)
}

// classify is what the engine answered.
func classify(err error) answer {
	var agent *countersign.AgentCannotDecideError
	switch {
	case err == nil:
		return allowed
	case errors.As(err, &agent):
		return agentRefused
	case errors.Is(err, countersign.ErrForbidden), errors.Is(err, countersign.ErrNotFound):
		return refused
	}
	return answer("error: " + err.Error())
}

// authorityPolicy: the requester and finance approve refunds, remembering
// for the thread; every channel.
var authorityPolicy = countersign.Policy{Rules: []countersign.Rule{{
	Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"requester", "role:finance"},
	Remember: []countersign.Scope{countersign.ScopeThread},
}}}

func TestAuthorityTable(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e, err := countersign.New(countersign.Options{
			Store: open(t, nil), Policy: &authorityPolicy,
			Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))},
		})
		if err != nil {
			t.Fatal(err)
		}
		requester := countersign.Identity{Tenant: "acme", Actor: "alice", Kind: countersign.KindAgent}
		n := 0
		pending := func() *cstype.Proposal {
			t.Helper()
			n++
			res, err := e.Call(ctx, &countersign.Call{
				Identity: requester, ThreadID: "t1", ToolCallID: fmt.Sprintf("call_%d", n), Action: "payments.refund",
				Input: json.RawMessage(fmt.Sprintf(`{"amount": %d, "customer": "c_%d"}`, n, n)), Mode: countersign.ModeIndependent,
			})
			if err != nil || res.Proposal == nil {
				t.Fatalf("call: %v %+v", err, res)
			}
			return res.Proposal
		}
		// A grant of alice's, approved by bob, for the revocations.
		granted := pending()
		bob := countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
		if _, err := e.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: granted.ID, Verdict: countersign.Approve, Remember: countersign.ScopeThread}); err != nil {
			t.Fatal(err)
		}
		shared := pending()
		runs := newRunRows(t, open) // issue 31: see runRows below
		channels := []string{"api", "cli", "web", countersign.ViaText, countersign.ViaAGUI, countersign.ViaMCP, countersign.ViaSlack, countersign.ViaEmail}

		rows := 0
		for _, a := range authorityActors {
			for _, kind := range []countersign.CredentialKind{countersign.KindHuman, countersign.KindAgent} {
				id := countersign.Identity{Tenant: a.tenant, Actor: a.name, Roles: a.roles, Kind: kind}
				check := func(op, channel string, err error) {
					t.Helper()
					rows++
					want := expected(a, kind, op)
					if got := classify(err); got != want {
						t.Errorf("%s (%s, %s, %s) %s via %s: %s, want %s", a.name, kind, a.relation, a.roles, op, channel, got, want)
					}
				}
				_, err := e.Proposal(ctx, id, shared.ID)
				check("see", "api", err)
				page, err := e.List(ctx, id, countersign.ListParams{Statuses: []cstype.Status{cstype.StatusPending}})
				if err == nil && !slices.ContainsFunc(page.Proposals, func(p *cstype.Proposal) bool { return p.ID == shared.ID }) {
					err = countersign.ErrForbidden // listed without it: as good as refused
				}
				check("list", "api", err)
				_, err = e.ProposalConversation(ctx, id, shared.ID, 0)
				check("conversation", "web", err)
				_, err = e.Announcements(ctx, id, shared.ID)
				check("announcements", "web", err)
				err = nil
				if !e.Turn(ctx, id, shared, "web").Yours {
					err = countersign.ErrForbidden // not waiting for id: as good as refused
				}
				check("waits-for", "web", err)
				// shared is one of the pending proposals waiting for each
				// decider, each of whom has decided none yet at this point.
				n, _, err := e.WaitingFor(ctx, id, "web", 1000)
				if err == nil && n == 0 {
					err = countersign.ErrForbidden
				}
				check("counted", "web", err)
				for _, via := range []string{countersign.ViaSlack, countersign.ViaEmail} {
					err = nil
					if got := e.Announcees(ctx, shared, via, []countersign.Identity{id}); len(got) != 1 || got[0].Actor != id.Actor {
						err = countersign.ErrForbidden // not announced to: as good as refused
					}
					check("announce", via, err)
				}
				// Email links are minted only for whom the proposal may
				// be announced to by email (issue 34).
				_, err = e.IssueEmailLinks(ctx, &countersign.EmailLinkIssue{Tenant: id.Tenant, ProposalID: shared.ID,
					Approver: id, NotificationID: "ntf_authority", TTL: time.Hour})
				check("email-link", countersign.ViaEmail, err)
				for _, via := range channels {
					for _, verdict := range []countersign.Verdict{countersign.Approve, countersign.Reject} {
						target := shared
						if expected(a, kind, "approve") == allowed {
							target = pending() // a decision that is taken changes its proposal
						}
						_, err := e.Decide(ctx, &countersign.Decision{Identity: id, ProposalID: target.ID, Verdict: verdict, Via: via})
						check(map[countersign.Verdict]string{countersign.Approve: "approve", countersign.Reject: "reject"}[verdict], via, err)
					}
				}
				_, err = e.PostMessage(ctx, &countersign.Message{Identity: id, ThreadID: "t1", Text: "how is my refund going?"})
				check("post-message", "api", err)
				_, err = e.Thread(ctx, id, "t1")
				check("read-thread", "api", err)
				cancelTarget := shared
				if expected(a, kind, "cancel") == allowed {
					cancelTarget = pending()
				}
				_, err = e.Cancel(ctx, id, cancelTarget.ID, "api", "")
				check("cancel", "api", err)
				_, err = e.OwnProposal(ctx, id, shared.ID)
				check("own-proposal", countersign.ViaMCP, err)
				grants, err := e.Grants(ctx, countersign.Identity{Tenant: "acme", Actor: "olga", Roles: []string{"operator"}}, "")
				if err != nil || len(grants) == 0 {
					t.Fatalf("grants: %v %v", grants, err)
				}
				_, err = e.RevokeGrant(ctx, id, grants[0].ID)
				check("revoke-grant", "api", err)
				_, err = e.Audit(ctx, id, 0, 10)
				check("audit", "api", err)
				_, err = e.Notifications(ctx, id, "", 10)
				check("notifications", "api", err)
				_, err = e.Resolve(ctx, id, shared.ID, cstype.StatusSucceeded, "", "checked", "api")
				if errors.Is(err, countersign.ErrConflict) {
					err = nil // past the authority check: the pending proposal is not reconciling
				}
				check("resolve", "api", err)
				_, _, err = e.StartSession(ctx, &countersign.StartSessionParams{Identity: id, Credential: "tok_" + a.name, TTL: time.Minute})
				check("sign-in", "web", err)
				_, err = e.CreatePasskeyEnrollment(ctx, id, "dave")
				if errors.Is(err, countersign.ErrInvalidCall) {
					err = nil // past the authority check: this engine has no public URL
				}
				check("enroll-link", "cli", err)
				_, err = e.StepUpChallenge(ctx, id, shared.ID, "api")
				if errors.Is(err, countersign.ErrInvalidCall) {
					err = nil // past the authority check: shared's rule asks no step-up
				}
				check("step-up", "api", err)
				for _, thread := range []string{"mcp:0123456789abcdef", "mcp_session", "mcp:", "mcp_"} {
					_, err = e.Call(ctx, &countersign.Call{Identity: id, ThreadID: thread, ToolCallID: "call_reserved",
						Action: "payments.refund", Input: json.RawMessage(`{"amount": 1, "customer": "c_1"}`)})
					check("reserved-thread", "api", err)
					_, err = e.PostMessage(ctx, &countersign.Message{Identity: id, ThreadID: thread, Text: "hello"})
					check("reserved-thread", countersign.ViaAGUI, err)
				}
				rows += runs.check(t, a, kind, id)
			}
		}
		if rows < 330 {
			t.Fatalf("checked %d rows: the table is smaller than it should be", rows)
		}
	})
}

// ---------------------------------------------------------------------------
// Runs, resumes and cancels (issue 31): rows of their own, on an engine of
// their own whose rule forbids self-approval, so that alice, the thread's
// owner, may reject her proposals but not approve them. An allowed answer
// is the status it came to (applied, unchanged, conflict, stands).

// runRows holds those rows' engine and what they act on.
type runRows struct {
	e *countersign.Engine
	// run is a run of alice's thread "tr".
	run *cstype.Run
	// pending is an interrupt (a call of alice's run) nobody decided;
	// decided one bob approved; cancelled one alice withdrew.
	pending, decided, cancelled *cstype.Proposal
	// fresh makes a new pending interrupt, for a row that changes one.
	fresh func() *cstype.Proposal
}

func newRunRows(t *testing.T, open storeOpener) *runRows {
	t.Helper()
	ctx := context.Background()
	e, err := countersign.New(countersign.Options{
		Store: open(t, nil),
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"requester", "role:finance"},
			ForbidSelfApproval: true,
		}}},
		Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))},
	})
	if err != nil {
		t.Fatal(err)
	}
	rr := &runRows{e: e}
	n := 0
	rr.fresh = func() *cstype.Proposal {
		t.Helper()
		n++
		res, err := e.Call(ctx, &countersign.Call{
			Identity: countersign.Identity{Tenant: "acme", Actor: "alice", Kind: countersign.KindAgent},
			ThreadID: "t1", RunID: "run_a", ToolCallID: fmt.Sprintf("call_%d", n), Action: "payments.refund",
			Input: json.RawMessage(fmt.Sprintf(`{"amount": %d, "customer": "c_%d"}`, n, n)), Mode: countersign.ModeIndependent,
		})
		if err != nil || res.Proposal == nil {
			t.Fatalf("call: %v %+v", err, res)
		}
		return res.Proposal
	}
	rr.pending, rr.decided, rr.cancelled = rr.fresh(), rr.fresh(), rr.fresh()
	bob := countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
	if dr, err := e.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: rr.decided.ID, Verdict: countersign.Approve}); err != nil || dr.Status != countersign.DecideApplied {
		t.Fatalf("bob approves: %+v, %v", dr, err)
	}
	alice := countersign.Identity{Tenant: "acme", Actor: "alice"}
	if dr, err := e.Cancel(ctx, alice, rr.cancelled.ID, "api", ""); err != nil || dr.Status != countersign.DecideApplied {
		t.Fatalf("alice cancels: %+v, %v", dr, err)
	}
	ans, err := e.PostMessage(ctx, &countersign.Message{Identity: alice, ThreadID: "tr", Text: "refund my order", Agent: "assistant"})
	if err != nil || ans.Run == nil {
		t.Fatalf("a run: %+v, %v", ans, err)
	}
	rr.run = ans.Run
	return rr
}

// expectedRunRow is the contract's answer for op by a of kind (docs/api.md:
// Messages and runs; Decisions; AG-UI, Resume).
func expectedRunRow(a authorityActor, kind countersign.CredentialKind, op string) answer {
	human := kind == countersign.KindHuman
	owner := a.tenant == "acme" && a.relation == "owner"
	ownerSays := func(status answer) answer {
		if owner {
			return status
		}
		return refused
	}
	switch op {
	case "follow-run":
		// A run is its thread's: its owner follows it, of either kind.
		return ownerSays(allowed)
	case "cancel":
		return ownerSays("applied")
	case "cancel-again":
		// The requester cancelling again is told nothing changed.
		return ownerSays("unchanged")
	}
	// A resume is the thread owner's, as a person: an agent credential is
	// refused before anything is looked up, anyone else is refused however
	// they stand to the proposal (bob may decide it, but not resume it).
	if !human {
		return agentRefused
	}
	switch op {
	case "resume-reject":
		return ownerSays("applied")
	case "resume-approve":
		// alice may not approve her own proposal: refused while pending.
		return refused
	case "resume-approve-decided":
		// ... but once bob approved it, her resume takes the decision
		// that stands, and she follows the run.
		return ownerSays("stands")
	case "resume-reject-decided":
		// She may reject: a different decision stands.
		return ownerSays("conflict")
	}
	panic("unknown operation " + op)
}

// check asks every operation of these rows as id (a of kind) and reports
// each answer that is not the contract's; it returns the rows checked.
func (rr *runRows) check(t *testing.T, a authorityActor, kind countersign.CredentialKind, id countersign.Identity) int {
	t.Helper()
	ctx := context.Background()
	rows := 0
	check := func(op string, status answer, err error) {
		t.Helper()
		rows++
		got := classify(err)
		if err == nil {
			got = status
		}
		if want := expectedRunRow(a, kind, op); got != want {
			t.Errorf("%s (%s, %s, %s) %s: %s, want %s", a.name, kind, a.relation, a.roles, op, got, want)
		}
	}
	// fresh is a new interrupt when the row would change its proposal.
	fresh := func(op string, shared *cstype.Proposal) *cstype.Proposal {
		switch expectedRunRow(a, kind, op) {
		case "applied":
			return rr.fresh()
		}
		return shared
	}

	_, err := rr.e.ThreadRunState(ctx, id, rr.run.ThreadID, rr.run.ID)
	check("follow-run", allowed, err)
	_, stop, err := rr.e.WatchThreadRun(ctx, id, rr.run.ThreadID, rr.run.ID)
	if err == nil {
		stop()
	}
	check("follow-run", allowed, err)

	status := func(dr *countersign.DecideResult) answer {
		if dr == nil {
			return ""
		}
		return answer(dr.Status)
	}
	dr, err := rr.e.Cancel(ctx, id, fresh("cancel", rr.pending).ID, "api", "")
	check("cancel", status(dr), err)
	dr, err = rr.e.Cancel(ctx, id, rr.cancelled.ID, "api", "")
	check("cancel-again", status(dr), err)

	resume := func(op string, p *cstype.Proposal, verdict countersign.Verdict) {
		t.Helper()
		res, err := rr.e.Resume(ctx, &countersign.Decision{Identity: id, ProposalID: p.ID, Verdict: verdict, Via: countersign.ViaAGUI})
		var got answer
		switch {
		case err != nil:
		case res.Stands:
			got = "stands"
		default:
			got = status(res.Decided)
		}
		check(op, got, err)
		if err != nil || res.Stands {
			// Nothing was decided.
			now, rerr := rr.e.Proposal(ctx, countersign.Identity{Tenant: "acme", Actor: "alice"}, p.ID)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if now.Status != p.Status || len(now.Decisions) != len(p.Decisions) {
				t.Errorf("%s (%s) %s: the proposal is %s with %d decisions, was %s with %d: a refused resume decided",
					a.name, kind, op, now.Status, len(now.Decisions), p.Status, len(p.Decisions))
			}
		}
	}
	decided, err := rr.e.Proposal(ctx, countersign.Identity{Tenant: "acme", Actor: "alice"}, rr.decided.ID)
	if err != nil {
		t.Fatal(err)
	}
	resume("resume-reject", fresh("resume-reject", rr.pending), countersign.Reject)
	resume("resume-approve", rr.pending, countersign.Approve)
	resume("resume-approve-decided", decided, countersign.Approve)
	resume("resume-reject-decided", decided, countersign.Reject)
	return rows
}
