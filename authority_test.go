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
	"github.com/countersign/countersign/store"
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
	case "see", "list", "conversation":
		// The requester sees her proposals whatever the kind; an approver's
		// visibility is a person's only. Operators see pending proposals
		// no more than anyone else (only reconciling and unknown ones).
		// Whoever sees a proposal reads the conversation that led to it.
		return either(owner || (human && finance))
	case "waits-for", "counted":
		// A pending proposal waits for each person who may approve it and
		// has not decided it: the requester (an approver here) and
		// finance; never for an agent credential, whoever it acts for.
		return either(human && (owner || finance))
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
		pending := func() *store.Proposal {
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
		channels := []string{"api", "cli", "web", countersign.ViaText, countersign.ViaAGUI, countersign.ViaMCP}

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
				page, err := e.List(ctx, id, store.ListProposalsParams{Statuses: []store.Status{store.StatusPending}})
				if err == nil && !slices.ContainsFunc(page.Proposals, func(p *store.Proposal) bool { return p.ID == shared.ID }) {
					err = countersign.ErrForbidden // listed without it: as good as refused
				}
				check("list", "api", err)
				_, err = e.ProposalConversation(ctx, id, shared.ID, 0)
				check("conversation", "web", err)
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
				_, err = e.Resolve(ctx, id, shared.ID, store.StatusSucceeded, "", "checked", "api")
				if errors.Is(err, countersign.ErrConflict) {
					err = nil // past the authority check: the pending proposal is not reconciling
				}
				check("resolve", "api", err)
				_, _, err = e.StartSession(ctx, &countersign.StartSessionParams{Identity: id, Credential: "tok_" + a.name, TTL: time.Minute})
				check("sign-in", "web", err)
			}
		}
		if rows < 250 {
			t.Fatalf("checked %d rows: the table is smaller than it should be", rows)
		}
	})
}
