package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/cstype"
)

// The reads behind the inbox's proposal page and its counts: the
// conversation that led to a call, where a proposal stands for one reader,
// and how many proposals wait for a decider.

// tLena decides large refunds (role:legal); bob and carol do not see them.
var tLena = countersign.Identity{Tenant: "acme", Actor: "lena", Roles: []string{"legal"}}

// conversationEngine: refunds ask finance, those over 1,000 ask legal
// instead; the demo agent (a scripted model) calls refunds it is asked for.
func conversationEngine(t *testing.T, open storeOpener) (*countersign.Engine, *agent.Runtime) {
	t.Helper()
	e, err := countersign.New(countersign.Options{
		Store:   open(t, nil),
		Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))},
		Policy: &countersign.Policy{Rules: []countersign.Rule{
			{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent},
			{Match: "payments.refund", When: "input.amount > 1000", Effect: countersign.EffectAsk, Approvers: []string{"role:legal"}, Mode: countersign.ModeIndependent},
		}},
		WaitPoll: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	model, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
		{Match: `refund (?P<amount>\d+) to (?P<customer>\w+)`, Say: "I'll ask for that refund.",
			Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`}},
		{Match: `.*`, Say: "I can refund payments."},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := agent.NewRuntime(agent.RuntimeOptions{Engine: e, Agents: []*agent.Agent{{Name: "demo", Model: model}}})
	if err != nil {
		t.Fatal(err)
	}
	return e, rt
}

// chat posts alice's message to thread, and with the agent drives the run
// it starts to its end; it returns the proposals the run made.
func chat(t *testing.T, e *countersign.Engine, rt *agent.Runtime, thread, text string, withAgent bool) []string {
	t.Helper()
	m := &countersign.Message{Identity: tAlice, ThreadID: thread, Text: text}
	if withAgent {
		m.Agent = "demo"
	}
	ans, err := e.PostMessage(context.Background(), m)
	if err != nil {
		t.Fatalf("post %q: %v", text, err)
	}
	if !withAgent {
		return nil
	}
	r, err := rt.Drive(context.Background(), ans.Run)
	if err != nil || r.Status != cstype.RunFinished {
		t.Fatalf("run of %q: %v %+v", text, err, r)
	}
	return r.ProposalIDs
}

// shown is a conversation in one line: each message's role, its text (or
// "withheld"), the actions it called, and "(the call)" on the message that
// made the proposal's call.
func shown(c *countersign.ProposalConversation) string {
	var parts []string
	for _, m := range c.Messages {
		s := m.Role + ":" + m.Text
		if m.Withheld {
			s = m.Role + ":withheld"
		}
		if len(m.Calls) > 0 {
			s += " calls " + strings.Join(m.Calls, ",")
		}
		if m.Call {
			s += " (the call)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}

// TestProposalConversation: whoever may see a proposal reads its thread up
// to and including the call (the assistant message that made it), oldest
// first: not the call's own result, nothing posted after it, nothing of
// another thread; a result of another call the reader may not see is
// withheld, shown to the thread's owner. The last n come with the count of
// those left out. Anyone else is refused, as reading the proposal is.
func TestProposalConversation(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e, rt := conversationEngine(t, open)
		chat(t, e, rt, "t2", "the other thread's secret", false)
		big := chat(t, e, rt, "t1", "refund 5000 to c_big", true)
		small := chat(t, e, rt, "t1", "refund 40 to c_9\nthe customer was charged twice", true)
		if len(big) != 1 || len(small) != 1 {
			t.Fatalf("proposals %v %v, want one each", big, small)
		}
		chat(t, e, rt, "t1", "posted after the call", false)

		// The large refund's result, as its thread's owner reads it.
		view, err := e.Thread(ctx, tAlice, "t1")
		if err != nil {
			t.Fatal(err)
		}
		result := ""
		for _, m := range view.Messages {
			if m.Role == "tool" && m.ProposalID == big[0] {
				result = m.Text
			}
		}
		if result == "" {
			t.Fatalf("no result of %s in the thread", big[0])
		}
		var got *countersign.ProposalConversation
		const (
			ask   = "user:refund 40 to c_9\nthe customer was charged twice"
			call  = "assistant:I'll ask for that refund. calls payments.refund (the call)"
			first = "user:refund 5000 to c_big | assistant:I'll ask for that refund. calls payments.refund"
		)
		for _, c := range []struct {
			who  countersign.Identity
			id   string
			want string
		}{
			// bob may not see the large refund: its result is withheld.
			{tBob, small[0], first + " | tool:withheld | " + ask + " | " + call},
			{tCarol, small[0], first + " | tool:withheld | " + ask + " | " + call},
			// alice owns the thread and reads every result.
			{tAlice, small[0], first + " | tool:" + result + " | " + ask + " | " + call},
			{tLena, big[0], "user:refund 5000 to c_big | assistant:I'll ask for that refund. calls payments.refund (the call)"},
		} {
			got, err = e.ProposalConversation(ctx, c.who, c.id, 0)
			if err != nil {
				t.Fatalf("%s reads %s: %v", c.who.Actor, c.id, err)
			}
			if s := shown(got); s != c.want || got.Earlier != 0 || !got.Call {
				t.Errorf("%s reads %s:\n got %s (earlier %d, call %v)\nwant %s", c.who.Actor, c.id, s, got.Earlier, got.Call, c.want)
			}
		}
		// The last two, and how many were left out.
		got, err = e.ProposalConversation(ctx, tBob, small[0], 2)
		if err != nil || shown(got) != ask+" | "+call || got.Earlier != 3 || !got.Call {
			t.Fatalf("the last two: %v %+v", err, got)
		}
		// Whoever may not see the proposal reads none of it.
		for _, who := range []countersign.Identity{tDave, tLena} {
			_, err := e.ProposalConversation(ctx, who, small[0], 0)
			wantForbidden(t, who.Actor+" reads the conversation", err)
		}
		_, err = e.ProposalConversation(ctx, tBob, big[0], 0)
		wantForbidden(t, "bob reads legal's conversation", err)
		_, err = e.ProposalConversation(ctx, tEve, small[0], 0)
		wantForbidden(t, "another tenant reads the conversation", err)
		_, err = e.ProposalConversation(ctx, tBob, "prp_nope", 0)
		wantNotFound(t, "an unknown proposal", err)
	})
}

// TestProposalConversationOfAnExternalCall: a call made through the API
// (no run) has no message of its own: the conversation is what the thread
// held when it was made, without what came after; a thread deleted since
// leaves it empty.
func TestProposalConversationOfAnExternalCall(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e, rt := conversationEngine(t, open)
		chat(t, e, rt, "t1", "please refund c_1, 40 EUR", false)
		p := pendingRefund(t, e, "call_ext")
		chat(t, e, rt, "t1", "any news?", false)
		got, err := e.ProposalConversation(ctx, tBob, p.ID, 0)
		if err != nil || shown(got) != "user:please refund c_1, 40 EUR" || got.Call {
			t.Fatalf("the conversation of an API call: %v %s (call %v)", err, shown(got), got.Call)
		}
		if got.Messages[0].Sender != "alice" || got.Messages[0].At.IsZero() {
			t.Errorf("message %+v: want alice's, with its time", got.Messages[0])
		}
	})
}

// TestTurn: where a quorum-2 proposal stands for each reader, before and
// after one approval: it waits for each finance approver who has not
// decided; once bob approved it waits no more for him, offers him nothing,
// holds his decision and needs one more approval from role:finance; the
// requester (who may not approve her own) is never waited for and is
// offered the rejection only; a bystander gets nothing.
func TestTurn(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e, err := countersign.New(countersign.Options{
			Store:   open(t, nil),
			Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))},
			Policy: &countersign.Policy{Rules: []countersign.Rule{{
				Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance", "requester"},
				Quorum: 2, ForbidSelfApproval: true, Channels: []string{"web", "api"},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		p := pendingRefund(t, e, "call_q")
		finance := []string{"role:finance"}
		for _, c := range []struct {
			who  countersign.Identity
			want countersign.Turn
		}{
			{tBob, countersign.Turn{Yours: true, Reject: true, Needed: 2, From: finance}},
			{tCarol, countersign.Turn{Yours: true, Reject: true, Needed: 2, From: finance}},
			// alice may reject her own request, not approve it.
			{tAlice, countersign.Turn{Reject: true, Needed: 2, From: finance}},
			{tDave, countersign.Turn{}},
			{tEve, countersign.Turn{}},
		} {
			if got := e.Turn(ctx, c.who, p, "web"); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s before any decision: %+v, want %+v", c.who.Actor, got, c.want)
			}
		}
		res, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: p.ID, Verdict: countersign.Approve, Via: "web", Reason: "checked the ledger"})
		if err != nil || res.Status != countersign.DecideApplied {
			t.Fatalf("bob approves: %v %+v", err, res)
		}
		p = res.Proposal
		got := e.Turn(ctx, tBob, p, "web")
		if got.Yours || got.Reject || got.Needed != 1 || !reflect.DeepEqual(got.From, finance) || got.Decision == nil ||
			got.Decision.Decision != countersign.Approve || got.Decision.Reason != "checked the ledger" || got.Decision.At.IsZero() {
			t.Errorf("bob after approving: %+v (decision %+v)", got, got.Decision)
		}
		if got := e.Turn(ctx, tCarol, p, "web"); !got.Yours || !got.Reject || got.Needed != 1 || got.Decision != nil {
			t.Errorf("carol after bob approved: %+v", got)
		}
		// Through a channel the rule does not take, it waits for nobody.
		if got := e.Turn(ctx, tCarol, p, "nowhere"); got.Yours || got.Reject {
			t.Errorf("carol through a channel the rule does not take: %+v", got)
		}
		res, err = e.Decide(ctx, &countersign.Decision{Identity: tCarol, ProposalID: p.ID, Verdict: countersign.Approve})
		if err != nil || res.Proposal.Status != cstype.StatusApproved {
			t.Fatalf("carol approves: %v %+v", err, res)
		}
		if got := e.Turn(ctx, tBob, res.Proposal, "web"); got.Yours || got.Needed != 0 || got.From != nil || got.Decision == nil {
			t.Errorf("bob once it is approved: %+v", got)
		}
	})
}

// TestWaitingFor counts only what waits for the reader's decision: a
// finance approver's count falls as it approves (a quorum-2 proposal it
// approved waits for others), the requester's is 0 whatever she requested,
// an agent credential's is 0, and the count stops at its limit with more.
func TestWaitingFor(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e, err := countersign.New(countersign.Options{
			Store:   open(t, nil),
			Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))},
			Policy: &countersign.Policy{Rules: []countersign.Rule{
				{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}},
				{Match: "payments.refund", When: "input.amount > 100", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: 2},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i, amount := range []int{40, 41, 500} {
			res, err := e.Call(ctx, &countersign.Call{
				Identity: tAlice, ThreadID: "t1", ToolCallID: fmt.Sprintf("call_%d", i), Action: "payments.refund",
				Input: json.RawMessage(fmt.Sprintf(`{"amount": %d, "customer": "c_%d"}`, amount, i)), Mode: countersign.ModeIndependent,
			})
			if err != nil || res.Proposal == nil {
				t.Fatalf("call: %v %+v", err, res)
			}
			ids = append(ids, res.ProposalID)
		}
		count := func(who countersign.Identity, limit int) string {
			t.Helper()
			n, more, err := e.WaitingFor(ctx, who, "web", limit)
			if err != nil {
				t.Fatalf("%s: %v", who.Actor, err)
			}
			return fmt.Sprintf("%d %v", n, more)
		}
		agentBob := tBob
		agentBob.Kind = countersign.KindAgent
		for _, c := range []struct {
			who   countersign.Identity
			limit int
			want  string
		}{
			{tBob, 100, "3 false"}, {tBob, 2, "2 true"}, {tBob, 3, "3 false"},
			{tAlice, 100, "0 false"}, {tDave, 100, "0 false"}, {tEve, 100, "0 false"}, {agentBob, 100, "0 false"},
		} {
			if got := count(c.who, c.limit); got != c.want {
				t.Errorf("%s, limit %d: %s, want %s", c.who.Actor, c.limit, got, c.want)
			}
		}
		// bob approves the quorum-2 refund and one of the others.
		for _, id := range []string{ids[2], ids[0]} {
			if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: id, Verdict: countersign.Approve, Via: "web"}); err != nil {
				t.Fatal(err)
			}
		}
		if got := count(tBob, 100); got != "1 false" {
			t.Errorf("bob after approving two: %s, want 1 false", got)
		}
		if got := count(tCarol, 100); got != "2 false" {
			t.Errorf("carol after bob approved two: %s, want 2 false (the quorum-2 refund still waits for her)", got)
		}
	})
}
