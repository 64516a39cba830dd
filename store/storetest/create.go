package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

func testCreateProposal(t *testing.T, newStore Factory) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.clock.Advance(1234567 * time.Microsecond)
		now := fx.clock.Now()

		sent := fx.proposal(thread, func(p *store.Proposal) {
			p.Requester = "alice"
			p.RequesterRoles = []string{"agent", "finance"}
			p.RunID = "run_7"
			p.ActionVersion = "3"
			p.Input = json.RawMessage(`{"amount":40.5,"customer":"c_9","lines":[{"sku":"a","qty":2},{"sku":"b","qty":1}],"note":"caf\u00e9 \"quoted\"","flag":true,"none":null}`)
			p.RawInput = json.RawMessage(` { "note": "café \"quoted\"", "amount": 4.05e1, "customer": "c_9", "flag": true, "none": null,
				"lines": [ {"qty": 2, "sku": "a"}, {"sku": "b", "qty": 1} ] } `)
			p.InputDigest = digest(p.Input)
			p.Preview = "Refund 40.50 EUR to c_9"
			p.StateVersion = "etag-42"
			p.Confirmation = store.Confirmation{Title: "Refund 40.5 to c_9", Verb: "Refund"}
			p.Mode = store.ModeTwoPhase
			p.Approvers = []string{"role:finance", "actor:bob", "requester"}
			p.Quorum = 2
			p.ForbidSelfApproval = true
			p.Channels = []string{"api", "text", "slack", "email"}
			p.Notify = []string{"slack", "email"}
			p.StepUp = "passkey"
			p.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			p.RememberScopes = []store.Scope{store.ScopeThread}
			p.GrantAnyInput = true
			p.GrantTTL = 36 * time.Hour
			p.ReplacementKey = "c_9"
			p.RuleFingerprint = "rule_sha256:9f2c"
			p.RuleMatch = "payments.*"
			p.RuleWhen = `input.amount > 1000 && "finance" in actor.roles && thread_id != 'caf\u00e9'`
			// Sub-millisecond precision must survive.
			p.ExpiresAt = now.Add(10*time.Minute + 123456*time.Microsecond)
		})
		want := sent.Clone()
		want.Status = store.StatusPending
		want.Version = 1
		want.CreatedAt = now
		want.UpdatedAt = now

		res := fx.create(sent)
		if !res.Created {
			t.Errorf("Created = false, want true")
		}
		if len(res.Superseded) != 0 {
			t.Errorf("Superseded = %v, want none", ids(res.Superseded))
		}
		requireSameProposal(t, res.Proposal, want)

		got := fx.get(sent)
		requireSameProposal(t, got, want)
		requireTime(t, "CreatedAt", got.CreatedAt, now)
		requireTime(t, "UpdatedAt", got.UpdatedAt, now)
		requireTime(t, "ExpiresAt", got.ExpiresAt, want.ExpiresAt)
		if len(got.Decisions) != 0 || got.Outcome != nil || got.Lease != nil || got.Attempt != 0 ||
			got.NextAttemptAt != nil || got.ConsumedBy != "" {
			t.Errorf("a new proposal carries execution state: %+v", got)
		}

		byCall, err := fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{
			Tenant: tenant, ThreadID: thread, ToolCallID: sent.ToolCallID,
		})
		if err != nil {
			t.Fatalf("GetProposalByToolCall: %v", err)
		}
		requireSameProposal(t, byCall, want)

		byConf, err := fx.store.GetProposalByConfirmation(fx.ctx, &store.GetProposalByConfirmationParams{
			Tenant: tenant, ConfirmationID: sent.ConfirmationID,
		})
		if err != nil {
			t.Fatalf("GetProposalByConfirmation: %v", err)
		}
		requireSameProposal(t, byConf, want)

		page := fx.list(store.ListProposalsParams{})
		if len(page.Proposals) != 1 {
			t.Fatalf("ListProposals: %d proposals, want 1", len(page.Proposals))
		}
		requireSameProposal(t, page.Proposals[0], want)
	})

	t.Run("RuleAppliedSurvivesChanges", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		// The rule that applied is written once, at creation: every later
		// write of the row (a decision, a claim, a settlement) keeps it.
		p := fx.createNew(func(p *store.Proposal) {
			p.RuleMatch, p.RuleWhen = "payments.refund", "input.amount > 1000.5 || actor.id == \"o'brien\""
			p.Notify, p.StepUp = []string{"email"}, "passkey"
			p.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
		})
		fx.decide(p, "bob", store.VerdictApproved)
		fx.claim(p, time.Minute)
		fx.succeed(fx.get(p))
		got := fx.get(p)
		requireStatus(t, got, store.StatusSucceeded)
		if got.RuleMatch != "payments.refund" || got.RuleWhen != "input.amount > 1000.5 || actor.id == \"o'brien\"" {
			t.Errorf("after decide, claim and settle: rule %q when %q, want payments.refund when the condition written at creation", got.RuleMatch, got.RuleWhen)
		}
		if !slices.Equal(got.Notify, []string{"email"}) || got.StepUp != "passkey" {
			t.Errorf("after decide, claim and settle: notify %q step_up %q, want [email] and passkey as written at creation", got.Notify, got.StepUp)
		}
		// The caller's trace context is written once too: the worker that
		// executes, in any process, continues that trace from it.
		if got.TraceParent != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00" {
			t.Errorf("after decide, claim and settle: trace_parent %q, want the one written at creation", got.TraceParent)
		}
		// A proposal no rule applied to records none.
		q := fx.createNew()
		if got := fx.get(q); got.RuleMatch != "" || got.RuleWhen != "" || got.Notify != nil || got.StepUp != "" || got.TraceParent != "" {
			t.Errorf("proposal without a rule: rule %q when %q notify %q step_up %q trace_parent %q, want all empty", got.RuleMatch, got.RuleWhen, got.Notify, got.StepUp, got.TraceParent)
		}
	})

	t.Run("DriverStampsState", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		// The engine leaves these to the driver; whatever the caller sent is
		// overwritten.
		p := fx.proposal(thread, func(p *store.Proposal) {
			p.Status = store.StatusApproved
			p.Version = 7
			p.Decisions = []store.Decision{{Actor: "mallory", Decision: store.VerdictApproved, Via: "api", At: fx.clock.Now()}}
			p.Outcome = &store.Outcome{Status: store.StatusSucceeded}
			p.Lease = &store.Lease{Owner: "x", Token: "y", Generation: 9, ExpiresAt: fx.clock.Now().Add(time.Hour)}
			p.Attempt = 3
			p.CreatedAt = fx.clock.Now().Add(-time.Hour)
			p.UpdatedAt = fx.clock.Now().Add(-time.Hour)
		})
		got := fx.create(p).Proposal
		requireStatus(t, got, store.StatusPending)
		if got.Version != 1 || len(got.Decisions) != 0 || got.Outcome != nil || got.Lease != nil || got.Attempt != 0 {
			t.Errorf("created proposal = version %d, decisions %v, outcome %v, lease %v, attempt %d; want 1, none, nil, nil, 0",
				got.Version, got.Decisions, got.Outcome, got.Lease, got.Attempt)
		}
		requireTime(t, "CreatedAt", got.CreatedAt, fx.clock.Now())
		requireTime(t, "UpdatedAt", got.UpdatedAt, fx.clock.Now())
	})

	t.Run("ReplayReturnsExisting", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := fx.create(fx.proposal(thread, withKey("c_9"))).Proposal

		fx.clock.Advance(time.Minute)
		// A replay of the same (tenant, thread, tool call) by its requester
		// with every other field different.
		replay := NewProposal(tenant, thread, first.ToolCallID,
			withAction("files.delete"), withMode(store.ModeIndependent),
			withKey("c_9"), withInput(`{"path":"/"}`), withExpiresAt(fx.clock.Now().Add(time.Hour)))
		res := fx.create(replay)
		if res.Created {
			t.Errorf("replay: Created = true, want false")
		}
		if len(res.Superseded) != 0 {
			t.Errorf("replay: Superseded = %v, want none", ids(res.Superseded))
		}
		requireSameProposal(t, res.Proposal, first)
		requireSameProposal(t, fx.get(first), first)

		_, err := fx.store.GetProposal(fx.ctx, &store.GetProposalParams{Tenant: tenant, ID: replay.ID})
		requireErrorIs(t, err, store.ErrNotFound)
		if all, _ := fx.listAll(store.ListProposalsParams{}); len(all) != 1 {
			t.Errorf("ListProposals after a replay: %d proposals, want 1", len(all))
		}
	})

	t.Run("TakenIDRefused", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := fx.createNew()
		// Another call whose proposal comes with an id already taken.
		other := fx.proposal(thread, func(p *store.Proposal) { p.ID = first.ID })
		res, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: other})
		if !errors.Is(err, store.ErrInvalidParams) || res != nil {
			t.Fatalf("CreateProposal with a taken id = %+v, %v; want nil, ErrInvalidParams", res, err)
		}
		requireSameProposal(t, fx.get(first), first)
		if _, err := fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{
			Tenant: tenant, ThreadID: thread, ToolCallID: other.ToolCallID}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the refused call's tool call: %v, want ErrNotFound", err)
		}
		if all, _ := fx.listAll(store.ListProposalsParams{}); len(all) != 1 {
			t.Errorf("ListProposals after a refused creation: %d proposals, want 1", len(all))
		}
	})

	t.Run("ReplayAfterDecision", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved()
		res := fx.create(NewProposal(tenant, thread, p.ToolCallID, withExpiresAt(fx.clock.Now().Add(time.Hour))))
		if res.Created {
			t.Errorf("replay: Created = true, want false")
		}
		requireStatus(t, res.Proposal, store.StatusApproved)
		requireSameProposal(t, res.Proposal, p)
	})

	t.Run("ToolCallScopedByThreadAndTenant", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const call = "call_shared"
		exp := withExpiresAt(fx.clock.Now().Add(time.Hour))
		a := fx.create(NewProposal(tenant, "t1", call, exp))
		b := fx.create(NewProposal(tenant, "t2", call, exp))
		c := fx.create(NewProposal(otherTenant, "t1", call, exp))
		for _, r := range []*store.CreateProposalResult{a, b, c} {
			if !r.Created {
				t.Errorf("proposal %s in %s/%s: Created = false, want true", r.Proposal.ID, r.Proposal.Tenant, r.Proposal.ThreadID)
			}
		}
		if a.Proposal.ID == b.Proposal.ID || a.Proposal.ID == c.Proposal.ID || b.Proposal.ID == c.Proposal.ID {
			t.Fatalf("ids %s, %s, %s: want three proposals", a.Proposal.ID, b.Proposal.ID, c.Proposal.ID)
		}
		for _, want := range []*store.Proposal{a.Proposal, b.Proposal, c.Proposal} {
			got, err := fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{
				Tenant: want.Tenant, ThreadID: want.ThreadID, ToolCallID: call,
			})
			if err != nil {
				t.Fatalf("GetProposalByToolCall(%s, %s): %v", want.Tenant, want.ThreadID, err)
			}
			if got.ID != want.ID {
				t.Errorf("GetProposalByToolCall(%s, %s) = %s, want %s", want.Tenant, want.ThreadID, got.ID, want.ID)
			}
		}
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name string
			edit func(*store.Proposal)
		}{
			{"MissingID", func(p *store.Proposal) { p.ID = "" }},
			{"MissingTenant", func(p *store.Proposal) { p.Tenant = "" }},
			{"MissingThread", func(p *store.Proposal) { p.ThreadID = "" }},
			{"MissingToolCall", func(p *store.Proposal) { p.ToolCallID = "" }},
			{"MissingAction", func(p *store.Proposal) { p.Action = "" }},
			{"EmptyMode", func(p *store.Proposal) { p.Mode = "" }},
			{"BadMode", func(p *store.Proposal) { p.Mode = "sometimes" }},
			{"ZeroExpiresAt", func(p *store.Proposal) { p.ExpiresAt = time.Time{} }},
			{"MissingOperationID", func(p *store.Proposal) { p.OperationID = "" }},
			// Only an allowed write's record has nobody to ask.
			{"NoApprovers", func(p *store.Proposal) { p.Approvers = nil }},
			{"EmptyApprovers", func(p *store.Proposal) { p.Approvers = []string{} }},
			{"ZeroQuorum", func(p *store.Proposal) { p.Quorum = 0 }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				fx := setup(t, newStore)
				p := fx.proposal(thread, tc.edit)
				_, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: p})
				requireErrorIs(t, err, store.ErrInvalidParams)
				if all, _ := fx.listAll(store.ListProposalsParams{}); len(all) != 0 {
					t.Errorf("an invalid proposal was stored: %v", ids(all))
				}
			})
		}
		t.Run("NilProposal", func(t *testing.T) {
			t.Parallel()
			fx := setup(t, newStore)
			_, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{})
			requireErrorIs(t, err, store.ErrInvalidParams)
		})
	})

	t.Run("ThreadOwnedByFirstRequester", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		createdAt := fx.clock.Now()
		fx.createNew(withRequester("alice"))
		fx.clock.Advance(time.Second)
		fx.createNew(withRequester("alice"))

		th, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: thread})
		if err != nil {
			t.Fatalf("GetThread: %v", err)
		}
		if th.ID != thread || th.Owner != "alice" {
			t.Errorf("thread = %s owned by %q, want %s owned by alice", th.ID, th.Owner, thread)
		}
		requireTime(t, "thread CreatedAt", th.CreatedAt, createdAt)

		_, err = fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: otherTenant, ID: thread})
		requireErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("NoAliasing", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		sent := fx.proposal(thread)
		params := &store.CreateProposalParams{Proposal: sent}
		res, err := fx.store.CreateProposal(fx.ctx, params)
		if err != nil {
			t.Fatalf("CreateProposal: %v", err)
		}
		want := res.Proposal.Clone()

		// Neither the caller's proposal nor a returned one may share memory
		// with what the store keeps.
		sent.Approvers[0] = "actor:mallory"
		sent.Input[2] = 'X'
		res.Proposal.Approvers[0] = "actor:mallory"
		res.Proposal.Channels[0] = "mallory"
		res.Proposal.Input[2] = 'X'
		got := fx.get(want)
		got.Approvers[0] = "actor:eve"
		requireSameProposal(t, fx.get(want), want)
	})
}

func testReplacement(t *testing.T, newStore Factory) {
	t.Run("SupersedesPending", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		old := fx.createNew(withKey("c_9"))
		// A pending proposal with part of its quorum is still pending.
		partial := fx.createNew(withKey("c_9"), withQuorum(2))
		// partial superseded old already; check that below and make partial
		// half-approved before the next one arrives.
		if res := fx.decide(partial, approver, store.VerdictApproved); res.Proposal.Status != store.StatusPending {
			t.Fatalf("half-approved proposal: status %s, want pending", res.Proposal.Status)
		}
		fx.clock.Advance(time.Second)
		now := fx.clock.Now()
		res := fx.create(fx.proposal(thread, withKey("c_9")))
		if !res.Created {
			t.Fatal("Created = false, want true")
		}
		requireStatus(t, res.Proposal, store.StatusPending)
		if len(res.Superseded) != 1 || res.Superseded[0].ID != partial.ID {
			t.Fatalf("Superseded = %v, want [%s]", ids(res.Superseded), partial.ID)
		}
		requireStatus(t, res.Superseded[0], store.StatusSuperseded)

		for _, p := range []*store.Proposal{old, partial} {
			got := fx.get(p)
			requireStatus(t, got, store.StatusSuperseded)
			if got.Outcome == nil {
				t.Fatalf("superseded proposal %s has no outcome", p.ID)
			}
			if got.Outcome.Status != store.StatusSuperseded || got.Outcome.Executed == nil || *got.Outcome.Executed ||
				got.Outcome.ProposalID != p.ID || got.Outcome.Summary == "" {
				t.Errorf("outcome of %s = %+v, want status superseded, executed false, a summary", p.ID, got.Outcome)
			}
			evs := fx.events(p.ID)
			if len(evs) == 0 || evs[len(evs)-1].Type != store.EventSuperseded {
				t.Errorf("events of %s end %v, want %s", p.ID, eventTypes(evs), store.EventSuperseded)
			}
		}
		requireTime(t, "superseded outcome At", fx.get(partial).Outcome.At, now)

		msgs := fx.messages(thread)
		if len(msgs) != 2 {
			t.Fatalf("thread has %d messages, want 2 (one per superseded proposal)", len(msgs))
		}
		for i, p := range []*store.Proposal{old, partial} {
			m := msgs[i]
			if m.ProposalID != p.ID || m.Role != "assistant" || m.Outcome == nil || m.Outcome.Status != store.StatusSuperseded || m.Text == "" {
				t.Errorf("message %d = %+v, want the superseded outcome of %s", i, m, p.ID)
			}
		}
	})

	t.Run("SupersedesNothing", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name      string
			old, next []func(*store.Proposal)
			nextTh    string
			nextOther bool // the next proposal is another tenant's
		}{
			{name: "OtherKey", old: opts(withKey("c_9")), next: opts(withKey("c_10"))},
			{name: "OtherThread", old: opts(withKey("c_9")), next: opts(withKey("c_9")), nextTh: "t2"},
			{name: "OtherAction", old: opts(withKey("c_9")), next: opts(withKey("c_9"), withAction("payments.charge"))},
			{name: "OtherTenant", old: opts(withKey("c_9")), next: opts(withKey("c_9")), nextOther: true},
			{name: "EmptyKeys", old: opts(withKey("")), next: opts(withKey(""))},
			{name: "NewKeyEmpty", old: opts(withKey("c_9")), next: opts(withKey(""))},
			{name: "OldKeyEmpty", old: opts(withKey("")), next: opts(withKey("c_9"))},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				fx := setup(t, newStore)
				old := fx.createNew(tc.old...)
				next := fx.proposal(cmp.Or(tc.nextTh, thread), tc.next...)
				if tc.nextOther {
					next.Tenant = otherTenant
				}
				res := fx.create(next)
				if !res.Created {
					t.Fatal("Created = false, want true")
				}
				if len(res.Superseded) != 0 {
					t.Errorf("Superseded = %v, want none", ids(res.Superseded))
				}
				requireStatus(t, fx.get(old), store.StatusPending)
				if msgs := fx.messages(thread); len(msgs) != 0 {
					t.Errorf("thread has %d messages, want none", len(msgs))
				}
			})
		}
	})

	t.Run("ApprovedNotSuperseded", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		old := fx.approved(withKey("c_9"))
		res := fx.create(fx.proposal(thread, withKey("c_9")))
		if len(res.Superseded) != 0 {
			t.Errorf("Superseded = %v, want none", ids(res.Superseded))
		}
		requireStatus(t, fx.get(old), store.StatusApproved)
	})

	t.Run("ReplayedOlderCreationSupersedesNothing", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		older := fx.createNew(withKey("c_9"))
		newer := fx.create(fx.proposal(thread, withKey("c_9")))
		if len(newer.Superseded) != 1 || newer.Superseded[0].ID != older.ID {
			t.Fatalf("Superseded = %v, want [%s]", ids(newer.Superseded), older.ID)
		}
		// The older call is retried: it gets its superseded proposal back and
		// the newer one stays pending.
		replay := fx.create(NewProposal(tenant, thread, older.ToolCallID, withKey("c_9"),
			withExpiresAt(fx.clock.Now().Add(time.Hour))))
		if replay.Created || len(replay.Superseded) != 0 || replay.Proposal.ID != older.ID {
			t.Errorf("replay: Created %t, Superseded %v, id %s; want false, none, %s",
				replay.Created, ids(replay.Superseded), replay.Proposal.ID, older.ID)
		}
		requireStatus(t, replay.Proposal, store.StatusSuperseded)
		requireStatus(t, fx.get(newer.Proposal), store.StatusPending)
		if msgs := fx.messages(thread); len(msgs) != 1 {
			t.Errorf("thread has %d messages, want 1", len(msgs))
		}
	})
}

func testGet(t *testing.T, newStore Factory) {
	t.Run("CountByStatus", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		// The counts cover every tenant: a store may hold rows before the
		// test's (one upgraded with data does); the test's add 2 pending
		// and 1 approved.
		before, err := fx.store.CountByStatus(fx.ctx)
		if err != nil {
			t.Fatal(err)
		}
		fx.createNew()
		fx.createNew()
		fx.approved()
		got, err := fx.store.CountByStatus(fx.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for st, n := range before {
			got[st] -= n
			if got[st] == 0 {
				delete(got, st)
			}
		}
		if got[store.StatusPending] != 2 || got[store.StatusApproved] != 1 || len(got) != 2 {
			t.Fatalf("CountByStatus added %v; want 2 pending and 1 approved", got)
		}
	})
	t.Run("ProposalTenant", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		got, err := fx.store.ProposalTenant(fx.ctx, p.ID)
		if err != nil || got != p.Tenant {
			t.Fatalf("ProposalTenant(%s) = %q, %v; want %q", p.ID, got, err, p.Tenant)
		}
		if _, err := fx.store.ProposalTenant(fx.ctx, "prp_missing"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ProposalTenant(missing) = %v, want ErrNotFound", err)
		}
	})
	t.Run("ByIDToolCallAndConfirmation", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		fx.createNew() // a neighbour that must not be returned

		byID := fx.get(p)
		byCall, err := fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{Tenant: tenant, ThreadID: thread, ToolCallID: p.ToolCallID})
		if err != nil {
			t.Fatalf("GetProposalByToolCall: %v", err)
		}
		byConf, err := fx.store.GetProposalByConfirmation(fx.ctx, &store.GetProposalByConfirmationParams{Tenant: tenant, ConfirmationID: p.ConfirmationID})
		if err != nil {
			t.Fatalf("GetProposalByConfirmation: %v", err)
		}
		for _, got := range []*store.Proposal{byID, byCall, byConf} {
			requireSameProposal(t, got, p)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		calls := []struct {
			name string
			call func() (*store.Proposal, error)
		}{
			{"OtherTenantID", func() (*store.Proposal, error) {
				return fx.store.GetProposal(fx.ctx, &store.GetProposalParams{Tenant: otherTenant, ID: p.ID})
			}},
			{"MissingID", func() (*store.Proposal, error) {
				return fx.store.GetProposal(fx.ctx, &store.GetProposalParams{Tenant: tenant, ID: "prp_missing"})
			}},
			{"OtherTenantToolCall", func() (*store.Proposal, error) {
				return fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{Tenant: otherTenant, ThreadID: thread, ToolCallID: p.ToolCallID})
			}},
			{"OtherThreadToolCall", func() (*store.Proposal, error) {
				return fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{Tenant: tenant, ThreadID: "t2", ToolCallID: p.ToolCallID})
			}},
			{"MissingToolCall", func() (*store.Proposal, error) {
				return fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{Tenant: tenant, ThreadID: thread, ToolCallID: "call_missing"})
			}},
			{"OtherTenantConfirmation", func() (*store.Proposal, error) {
				return fx.store.GetProposalByConfirmation(fx.ctx, &store.GetProposalByConfirmationParams{Tenant: otherTenant, ConfirmationID: p.ConfirmationID})
			}},
			{"MissingConfirmation", func() (*store.Proposal, error) {
				return fx.store.GetProposalByConfirmation(fx.ctx, &store.GetProposalByConfirmationParams{Tenant: tenant, ConfirmationID: "cnf_missing"})
			}},
		}
		for _, c := range calls {
			got, err := c.call()
			if !errorsIsNotFound(err) {
				t.Errorf("%s: got %v, %v; want ErrNotFound", c.name, got, err)
			}
		}
	})
}

func testThreads(t *testing.T, newStore Factory) {
	t.Run("EnsureThread", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		createdAt := fx.clock.Now()
		th, err := fx.store.EnsureThread(fx.ctx, &store.EnsureThreadParams{Tenant: tenant, ID: "t9", Owner: "alice"})
		if err != nil {
			t.Fatalf("EnsureThread: %v", err)
		}
		if th.ID != "t9" || th.Owner != "alice" {
			t.Errorf("EnsureThread = %+v, want t9 owned by alice", th)
		}
		fx.clock.Advance(time.Second)
		again, err := fx.store.EnsureThread(fx.ctx, &store.EnsureThreadParams{Tenant: tenant, ID: "t9", Owner: "bob"})
		if err != nil {
			t.Fatalf("EnsureThread again: %v", err)
		}
		if again.Owner != "alice" {
			t.Errorf("EnsureThread by bob: owner %q, want alice", again.Owner)
		}
		requireTime(t, "thread CreatedAt", again.CreatedAt, createdAt)

		// Thread ids are namespaced by tenant.
		other, err := fx.store.EnsureThread(fx.ctx, &store.EnsureThreadParams{Tenant: otherTenant, ID: "t9", Owner: "zed"})
		if err != nil {
			t.Fatalf("EnsureThread (other tenant): %v", err)
		}
		if other.Owner != "zed" {
			t.Errorf("other tenant's t9: owner %q, want zed", other.Owner)
		}

		// A proposal in an existing thread keeps its owner; another actor's
		// is refused.
		fx.create(fx.proposal("t9", withRequester("alice")))
		_, err = fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: fx.proposal("t9", withRequester("carol"))})
		requireErrorIs(t, err, store.ErrNotThreadOwner)
		got, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: "t9"})
		if err != nil {
			t.Fatalf("GetThread: %v", err)
		}
		if got.Owner != "alice" {
			t.Errorf("owner after carol's proposal = %q, want alice", got.Owner)
		}
	})

	t.Run("GetMissing", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		_, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: "nope"})
		requireErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("DeleteThread", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		fx.decide(p, approver, store.VerdictRejected)
		if n := len(fx.messages(thread)); n != 1 {
			t.Fatalf("thread has %d messages, want 1", n)
		}
		if err := fx.store.DeleteThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: thread}); err != nil {
			t.Fatalf("DeleteThread: %v", err)
		}
		_, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: thread})
		requireErrorIs(t, err, store.ErrNotFound)
		if msgs := messagesOrNone(t, fx, thread); len(msgs) != 0 {
			t.Errorf("a deleted thread lists %d messages, want none", len(msgs))
		}
	})
}

// messagesOrNone lists a thread's messages, treating a missing thread as one
// without messages: the contract leaves open which of the two a deleted
// thread answers.
func messagesOrNone(t *testing.T, fx *fixture, th string) []*store.Message {
	t.Helper()
	msgs, err := fx.store.ListMessages(fx.ctx, &store.ListMessagesParams{Tenant: tenant, ThreadID: th})
	if err != nil && !errorsIsNotFound(err) {
		t.Fatalf("ListMessages(%s): %v", th, err)
	}
	return msgs
}

func opts(o ...func(*store.Proposal)) []func(*store.Proposal) { return o }

func eventTypes(evs []*store.Event) []store.EventType {
	out := make([]store.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
