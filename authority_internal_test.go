package countersign

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
)

// TestUpToCall: what of a thread led to a proposal's call. A run's call
// ends at the assistant message that holds its tool call (also under the
// legacy "RUN/ID" record, and however the clock stood); any other call at
// the proposal's creation, less its own result.
func TestUpToCall(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	user := func(id string, s int) *cstype.Message {
		return &cstype.Message{ID: id, Role: cstype.RoleUser, CreatedAt: at(s)}
	}
	calls := func(id, run, call string, s int) *cstype.Message {
		return &cstype.Message{ID: id, Role: cstype.RoleAssistant, RunID: run, CreatedAt: at(s),
			ToolCalls: []cstype.ToolCall{{ID: "call_other"}, {ID: call}}}
	}
	result := func(id, proposal string, s int) *cstype.Message {
		return &cstype.Message{ID: id, Role: cstype.RoleTool, ProposalID: proposal, CreatedAt: at(s)}
	}
	for _, tc := range []struct {
		name string
		p    *cstype.Proposal
		msgs []*cstype.Message
		want string // ids, and * after the call
	}{
		{"a run's call, then its result and more",
			&cstype.Proposal{ID: "p1", RunID: "r1", ToolCallID: "call_1", CreatedAt: at(11)},
			[]*cstype.Message{user("u", 10), calls("a", "r1", "call_1", 11), result("t", "p1", 11), user("later", 12)}, "u a*"},
		{"a run's call, however the clock stood",
			&cstype.Proposal{ID: "p1", RunID: "r1", ToolCallID: "call_1", CreatedAt: at(5)},
			[]*cstype.Message{user("u", 10), calls("a", "r1", "call_1", 11), user("later", 12)}, "u a*"},
		{"a run's call recorded as RUN/ID",
			&cstype.Proposal{ID: "p1", RunID: "r1", ToolCallID: "r1/call_1", CreatedAt: at(11)},
			[]*cstype.Message{user("u", 10), calls("a", "r1", "call_1", 11), result("t", "p1", 12)}, "u a*"},
		{"the same tool call id in another run is not the call",
			&cstype.Proposal{ID: "p1", RunID: "r2", ToolCallID: "call_1", CreatedAt: at(11)},
			[]*cstype.Message{calls("a", "r1", "call_1", 10), user("u", 11), user("later", 12)}, "a u"},
		{"an API call: what came up to its creation",
			&cstype.Proposal{ID: "p1", ToolCallID: "call_1", CreatedAt: at(20)},
			[]*cstype.Message{user("u", 10), result("older", "p0", 15), user("same time", 20), result("own", "p1", 20), user("later", 21)},
			"u older same time"},
		{"an empty thread", &cstype.Proposal{ID: "p1", CreatedAt: at(1)}, nil, ""},
	} {
		got, call := upToCall(tc.msgs, tc.p)
		var ids []string
		for i, m := range got {
			if i == call {
				ids = append(ids, m.ID+"*")
				continue
			}
			ids = append(ids, m.ID)
		}
		if s := strings.Join(ids, " "); s != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, s, tc.want)
		}
	}
}

// TestStillApproving: who may still approve, in the approvers' own forms.
func TestStillApproving(t *testing.T) {
	approved := func(actors ...string) []cstype.Decision {
		var out []cstype.Decision
		for _, a := range actors {
			out = append(out, cstype.Decision{Actor: a, Decision: cstype.VerdictApproved})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    *cstype.Proposal
		want []string
	}{
		{"a role stays after one of it approved",
			&cstype.Proposal{Requester: "alice", Approvers: []string{"role:finance"}, Decisions: approved("bob")}, []string{"role:finance"}},
		{"an actor who approved does not",
			&cstype.Proposal{Requester: "alice", Approvers: []string{"actor:bob", "actor:carol"}, Decisions: approved("bob")}, []string{"actor:carol"}},
		{"the requester who approved does not",
			&cstype.Proposal{Requester: "alice", Approvers: []string{"requester", "role:finance"}, Decisions: approved("alice")}, []string{"role:finance"}},
		{"the requester where self-approval is forbidden",
			&cstype.Proposal{Requester: "alice", Approvers: []string{"requester", "actor:alice", "role:finance"}, ForbidSelfApproval: true},
			[]string{"role:finance"}},
		{"a rejection is no approval",
			&cstype.Proposal{Requester: "alice", Approvers: []string{"actor:bob"}, Decisions: []cstype.Decision{{Actor: "bob", Decision: cstype.VerdictRejected}}},
			[]string{"actor:bob"}},
		{"each once", &cstype.Proposal{Requester: "alice", Approvers: []string{"role:finance", "role:finance"}}, []string{"role:finance"}},
	} {
		if got := stillApproving(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestWaitsFor: a pending proposal waits for a person who may approve it
// and has not decided it; not past its deadline, not after a decision of
// theirs, not for one who may only reject (who is offered the rejection),
// nor for an agent credential.
func TestWaitsFor(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	bob := Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
	pending := func(edit func(p *cstype.Proposal)) *cstype.Proposal {
		p := &cstype.Proposal{ID: "p1", Tenant: "acme", Requester: "alice", Status: cstype.StatusPending, Quorum: 2,
			Approvers: []string{"role:finance", "requester"}, ExpiresAt: now.Add(time.Hour)}
		if edit != nil {
			edit(p)
		}
		return p
	}
	refuse := func(context.Context, Identity, *cstype.Proposal) bool { return false }
	for _, tc := range []struct {
		name string
		p    *cstype.Proposal
		id   Identity
		hook func(context.Context, Identity, *cstype.Proposal) bool
		want bool
	}{
		{"an approver who has not decided", pending(nil), bob, nil, true},
		{"the requester named as an approver", pending(nil), Identity{Tenant: "acme", Actor: "alice"}, nil, true},
		{"after approving", pending(func(p *cstype.Proposal) {
			p.Decisions = []cstype.Decision{{Actor: "bob", Decision: cstype.VerdictApproved}}
		}), bob, nil, false},
		{"another approver's approval", pending(func(p *cstype.Proposal) {
			p.Decisions = []cstype.Decision{{Actor: "carol", Decision: cstype.VerdictApproved}}
		}), bob, nil, true},
		{"past its deadline", pending(func(p *cstype.Proposal) { p.ExpiresAt = now }), bob, nil, false},
		{"no longer pending", pending(func(p *cstype.Proposal) { p.Status = cstype.StatusApproved }), bob, nil, false},
		{"the requester who may only reject", pending(func(p *cstype.Proposal) { p.ForbidSelfApproval = true }),
			Identity{Tenant: "acme", Actor: "alice"}, nil, false},
		{"not an approver", pending(nil), Identity{Tenant: "acme", Actor: "dave"}, nil, false},
		{"an agent credential", pending(nil), Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}, Kind: KindAgent}, nil, false},
		{"another tenant", pending(nil), Identity{Tenant: "globex", Actor: "bob", Roles: []string{"finance"}}, nil, false},
		{"a channel the rule does not take", pending(func(p *cstype.Proposal) { p.Channels = []string{"text"} }), bob, nil, false},
		{"the rule's CanDecide hook refuses", pending(nil), bob, refuse, false},
	} {
		if got := waitsFor(context.Background(), tc.p, tc.id, "web", now, tc.hook); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		reject := tc.want || tc.name == "the requester who may only reject"
		if got := mayReject(context.Background(), tc.p, tc.id, "web", now, tc.hook); got != reject {
			t.Errorf("%s: rejection offered %v, want %v", tc.name, got, reject)
		}
	}
}

// TestMayNameThread: the reserved prefixes, by who named the thread.
func TestMayNameThread(t *testing.T) {
	id := Identity{Tenant: "acme", Actor: "alice"}
	for _, row := range []struct {
		thread string
		origin ThreadOrigin
		ok     bool
	}{
		{"mcp:0123456789abcdef", ThreadNamed, false},
		{"mcp_0123", ThreadNamed, false},
		{"mcp:", ThreadNamed, false},
		{"mcp_", ThreadNamed, false},
		{"mcp:0123456789abcdef", ThreadMCPGateway, true},
		{"mcp_0123", ThreadMCPGateway, true},
		{"mcp", ThreadNamed, true},
		{"mcpx", ThreadNamed, true},
		{"MCP:x", ThreadNamed, true}, // ids are case-sensitive: only the gateway's exact prefixes
		{"t1", ThreadNamed, true},
		{"xmcp:1", ThreadNamed, true},
	} {
		err := mayNameThread(id, row.thread, row.origin)
		var forbidden *ForbiddenError
		if got := err == nil; got != row.ok || (err != nil && !errors.As(err, &forbidden)) {
			t.Errorf("mayNameThread(%q, %d) = %v, want ok %v", row.thread, row.origin, err, row.ok)
		}
	}
}
