package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/sqlitestore"
)

// clock is a fake clock, in UTC without a monotonic reading.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// open opens the store at path, closing it when the test ends.
func open(t testing.TB, path string, c *clock) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, &sqlitestore.Options{Now: c.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fresh opens a store on a new file.
func fresh(t *testing.T) (*sqlitestore.Store, *clock, string) { return freshB(t) }

func freshB(t testing.TB) (*sqlitestore.Store, *clock, string) {
	t.Helper()
	c := newClock()
	path := filepath.Join(t.TempDir(), "countersign.db")
	return open(t, path, c), c, path
}

var seq atomic.Int64

// proposal returns a valid proposal with every field set.
func proposal(c *clock, tenant, thread string, opts ...func(*store.Proposal)) *store.Proposal {
	n := seq.Add(1)
	id := fmt.Sprintf("prp_%04d", n)
	p := &store.Proposal{
		ID:                 id,
		Tenant:             tenant,
		Requester:          "alice",
		RequesterRoles:     []string{"agent"},
		ThreadID:           thread,
		RunID:              "run_1",
		ToolCallID:         fmt.Sprintf("call_%04d", n),
		Action:             "payments.refund",
		ActionVersion:      "1",
		Input:              json.RawMessage(`{"amount":40,"customer":"c_9"}`),
		RawInput:           json.RawMessage(`{"customer": "c_9",  "amount": 40, "note": "<&>"}`),
		InputDigest:        "sha256:abc",
		Preview:            "Refund 40 EUR to c_9",
		StateVersion:       "state_1",
		Confirmation:       store.Confirmation{Title: "Refund 40 EUR", Verb: "Refund"},
		ConfirmationID:     "cnf_" + id,
		Mode:               store.ModeWait,
		Approvers:          []string{"requester"},
		Quorum:             1,
		ForbidSelfApproval: false,
		Channels:           []string{"api", "web"},
		RememberScopes:     []store.Scope{store.ScopeRun, store.ScopeThread},
		GrantAnyInput:      true,
		GrantTTL:           time.Hour,
		ExpiresAt:          c.Now().Add(10 * time.Minute),
		OperationID:        "op_" + id,
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func create(t *testing.T, s store.Store, p *store.Proposal) *store.CreateProposalResult {
	t.Helper()
	res, err := s.CreateProposal(context.Background(), &store.CreateProposalParams{Proposal: p})
	if err != nil {
		t.Fatalf("CreateProposal: %v", err)
	}
	return res
}

func approve(t *testing.T, s store.Store, p *store.Proposal, actor string) *store.DecideResult {
	t.Helper()
	res, err := s.Decide(context.Background(), &store.DecideParams{
		Tenant: p.Tenant, ID: p.ID, Actor: actor, Verdict: store.VerdictApproved, Via: "api",
	})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res
}

func TestOpenOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		path string
		opts *sqlitestore.Options
	}{
		{"empty path", "", nil},
		{"memory", ":memory:", nil},
		{"negative busy timeout", filepath.Join(dir, "a.db"), &sqlitestore.Options{BusyTimeout: -1}},
		{"negative read conns", filepath.Join(dir, "b.db"), &sqlitestore.Options{ReadConns: -1}},
	} {
		if s, err := sqlitestore.Open(ctx, tt.path, tt.opts); !errors.Is(err, store.ErrInvalidParams) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("%s: Open error %v, want ErrInvalidParams", tt.name, err)
		}
	}
	// Nil options are the defaults.
	s, err := sqlitestore.Open(ctx, filepath.Join(dir, "c.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t", ID: "x"}); err == nil {
		t.Error("GetProposal after Close succeeded")
	}
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, path := fresh(t)
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != sqlitestore.LatestSchemaVersion() || v < 1 {
		t.Fatalf("SchemaVersion = %d, want %d", v, sqlitestore.LatestSchemaVersion())
	}
	// Migrating again changes nothing.
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}

	// A page boundary before a restart...
	for range 3 {
		create(t, s, proposal(c, "t1", "th1"))
		c.Advance(time.Second)
	}
	page, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Proposals) != 2 || page.Next == "" {
		t.Fatalf("first page: %d proposals, next %q", len(page.Proposals), page.Next)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// ...is still valid after it: the key lives in the database.
	s2 := open(t, path, c)
	v2, err := s2.SchemaVersion(ctx)
	if err != nil || v2 != v {
		t.Fatalf("SchemaVersion after reopen = %d, %v; want %d", v2, err, v)
	}
	page2, err := s2.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", Limit: 2, After: page.Next})
	if err != nil {
		t.Fatalf("cursor from before the restart: %v", err)
	}
	if len(page2.Proposals) != 1 || page2.Next != "" {
		t.Fatalf("second page: %d proposals, next %q", len(page2.Proposals), page2.Next)
	}

	// Another database has another key.
	other, _, _ := fresh(t)
	if _, err := other.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", After: page.Next}); !errors.Is(err, store.ErrInvalidCursor) {
		t.Errorf("cursor from another database: %v, want ErrInvalidCursor", err)
	}
}

func TestSkipMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := sqlitestore.Open(ctx, path, &sqlitestore.Options{SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if v, err := s.SchemaVersion(ctx); err != nil || v != 0 {
		t.Fatalf("SchemaVersion of a new file = %d, %v; want 0", v, err)
	}
	// Several processes migrating at once must not trip over each other.
	others := make([]*sqlitestore.Store, 3)
	for i := range others {
		others[i], err = sqlitestore.Open(ctx, path, &sqlitestore.Options{SkipMigrations: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = others[i].Close() })
	}
	var wg sync.WaitGroup
	errs := make([]error, len(others)+1)
	for i, o := range append(others, s) {
		wg.Go(func() { errs[i] = o.Migrate(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlitestore.LatestSchemaVersion() {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, sqlitestore.LatestSchemaVersion())
	}
	if _, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t"}); err != nil {
		t.Fatalf("ListProposals after Migrate: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, _ := fresh(t)
	p := proposal(c, "t1", "th1", func(p *store.Proposal) { p.ReplacementKey = "refund:c_9" })
	res := create(t, s, p)
	if !res.Created || len(res.Superseded) != 0 {
		t.Fatalf("Create: created %v, superseded %d", res.Created, len(res.Superseded))
	}
	want := p.Clone()
	want.Status, want.Version = store.StatusPending, 1
	want.CreatedAt, want.UpdatedAt = c.Now(), c.Now()
	if !reflect.DeepEqual(res.Proposal, want) {
		t.Errorf("Create returned\n%+v\nwant\n%+v", res.Proposal, want)
	}
	got, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetProposal\n%+v\nwant\n%+v", got, want)
	}
	if string(got.RawInput) != string(p.RawInput) {
		t.Errorf("RawInput %s, want it verbatim: %s", got.RawInput, p.RawInput)
	}
	byCall, err := s.GetProposalByToolCall(ctx, &store.GetProposalByToolCallParams{Tenant: "t1", ThreadID: "th1", ToolCallID: p.ToolCallID})
	if err != nil || byCall.ID != p.ID {
		t.Errorf("GetProposalByToolCall = %v, %v", byCall, err)
	}
	byCnf, err := s.GetProposalByConfirmation(ctx, &store.GetProposalByConfirmationParams{Tenant: "t1", ConfirmationID: p.ConfirmationID})
	if err != nil || byCnf.ID != p.ID {
		t.Errorf("GetProposalByConfirmation = %v, %v", byCnf, err)
	}

	// Nil and empty slices survive; so does an absent input. (No approvers:
	// the record of an allowed write.)
	q := proposal(c, "t1", "th1", func(p *store.Proposal) {
		p.RequesterRoles, p.Approvers, p.Channels, p.RememberScopes = nil, []string{}, nil, []store.Scope{}
		p.Input, p.RawInput, p.ConfirmationID = nil, nil, ""
	})
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: q, Allowed: &store.AllowedExecution{Owner: "w", LeaseDuration: time.Minute}}); err != nil {
		t.Fatalf("CreateProposal: %v", err)
	}
	gq, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: q.ID})
	if err != nil {
		t.Fatal(err)
	}
	if gq.RequesterRoles != nil || gq.Approvers == nil || len(gq.Approvers) != 0 || gq.Channels != nil ||
		gq.RememberScopes == nil || gq.Input != nil || gq.RawInput != nil {
		t.Errorf("nil/empty round trip: %+v", gq)
	}
	if _, err := s.GetProposalByConfirmation(ctx, &store.GetProposalByConfirmationParams{Tenant: "t1"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("empty confirmation id: %v, want ErrNotFound", err)
	}

	// Other tenants see nothing.
	for name, err := range map[string]error{
		"get":     second(s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t2", ID: p.ID})),
		"by call": second(s.GetProposalByToolCall(ctx, &store.GetProposalByToolCallParams{Tenant: "t2", ThreadID: "th1", ToolCallID: p.ToolCallID})),
		"by cnf":  second(s.GetProposalByConfirmation(ctx, &store.GetProposalByConfirmationParams{Tenant: "t2", ConfirmationID: p.ConfirmationID})),
		"decide":  second(s.Decide(ctx, &store.DecideParams{Tenant: "t2", ID: p.ID, Actor: "alice", Verdict: store.VerdictApproved})),
		"cancel":  second(s.Cancel(ctx, &store.CancelParams{Tenant: "t2", ID: p.ID})),
		"thread":  second(s.GetThread(ctx, &store.GetThreadParams{Tenant: "t2", ID: "th1"})),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s in another tenant: %v, want ErrNotFound", name, err)
		}
	}

	// A replay returns the stored proposal and supersedes nothing.
	replay := p.Clone()
	replay.ID = "prp_other"
	rres := create(t, s, replay)
	if rres.Created || rres.Proposal.ID != p.ID || len(rres.Superseded) != 0 {
		t.Errorf("replay: created %v, id %s, superseded %d", rres.Created, rres.Proposal.ID, len(rres.Superseded))
	}
	// A new proposal under the same replacement key supersedes p.
	c.Advance(time.Second)
	n := proposal(c, "t1", "th1", func(x *store.Proposal) { x.ReplacementKey = "refund:c_9" })
	nres := create(t, s, n)
	if len(nres.Superseded) != 1 || nres.Superseded[0].ID != p.ID || nres.Superseded[0].Status != store.StatusSuperseded {
		t.Fatalf("supersede: %+v", nres.Superseded)
	}
	// A taken id is refused.
	dup := proposal(c, "t1", "th1", func(x *store.Proposal) { x.ID = p.ID })
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: dup}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("duplicate id: %v, want ErrInvalidParams", err)
	}
	// So is a taken confirmation id: it must name one proposal.
	dupCnf := proposal(c, "t1", "th1", func(x *store.Proposal) { x.ConfirmationID = p.ConfirmationID })
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: dupCnf}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("duplicate confirmation id: %v, want ErrInvalidParams", err)
	}
	if _, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: dupCnf.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused proposal was stored: %v", err)
	}
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: &store.Proposal{}}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("invalid proposal: %v, want ErrInvalidParams", err)
	}

	// The thread was created, owned by the requester, with the superseded
	// outcome in it.
	th, err := s.GetThread(ctx, &store.GetThreadParams{Tenant: "t1", ID: "th1"})
	if err != nil || th.Owner != "alice" {
		t.Fatalf("GetThread = %+v, %v", th, err)
	}
	msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: "t1", ThreadID: "th1"})
	if err != nil || len(msgs) != 1 || msgs[0].Outcome == nil || msgs[0].Outcome.Status != store.StatusSuperseded {
		t.Fatalf("ListMessages = %+v, %v", msgs, err)
	}
	evs, err := s.ListEvents(ctx, &store.ListEventsParams{Tenant: "t1", ProposalID: p.ID})
	if err != nil || len(evs) != 2 || evs[0].Type != store.EventCreated || evs[1].Type != store.EventSuperseded ||
		evs[1].Status != store.StatusSuperseded || !evs[1].At.Equal(c.Now()) {
		t.Fatalf("ListEvents = %+v, %v", evs, err)
	}
}

// second returns the error of a two-result call.
func second[T any](_ T, err error) error { return err }

func TestDecideExecuteSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, _ := fresh(t)
	p := create(t, s, proposal(c, "t1", "th1")).Proposal

	exp := c.Now().Add(24 * time.Hour)
	dres, err := s.Decide(ctx, &store.DecideParams{
		Tenant: "t1", ID: p.ID, Actor: "alice", Verdict: store.VerdictApproved, Via: "web", Reason: "ok",
		Remember: store.ScopeThread,
		Grant: &store.Grant{
			Requester: "alice", Scope: store.ScopeThread, ThreadID: "th1", Action: p.Action,
			ActionVersion: p.ActionVersion, InputDigest: p.InputDigest, GrantedBy: "alice", ExpiresAt: &exp,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if dres.Outcome != store.DecideApplied || dres.From != store.StatusPending || dres.To != store.StatusApproved {
		t.Fatalf("Decide = %+v", dres)
	}
	if d := dres.Proposal.Decisions; len(d) != 1 || d[0].Actor != "alice" || d[0].Remember != store.ScopeThread || !d[0].At.Equal(c.Now()) {
		t.Fatalf("decisions %+v", d)
	}
	if again := approve(t, s, p, "alice"); again.Outcome != store.DecideUnchanged || again.Proposal.Version != dres.Proposal.Version {
		t.Errorf("second approval = %+v", again)
	}
	find := &store.FindGrantParams{Tenant: "t1", Requester: "alice", ThreadID: "th1", RunID: "run_9",
		Action: p.Action, ActionVersion: p.ActionVersion, InputDigest: p.InputDigest}
	if _, err := s.FindGrant(ctx, find); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FindGrant before execution: %v, want ErrNotFound", err)
	}

	cl, err := s.Claim(ctx, &store.ClaimParams{Tenant: "t1", ID: p.ID, Owner: "w1", LeaseDuration: time.Minute, ConsumedBy: "call_x"})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Status != store.StatusExecuting || cl.Lease == nil || cl.Lease.Owner != "w1" || cl.Attempt != 1 || cl.ConsumedBy != "call_x" {
		t.Fatalf("Claim = %+v", cl)
	}
	if _, err := s.Claim(ctx, &store.ClaimParams{Tenant: "t1", ID: p.ID, Owner: "w2", LeaseDuration: time.Minute}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second Claim: %v, want ErrConflict", err)
	}
	fence := store.Fence{Token: cl.Lease.Token, Generation: cl.Lease.Generation}
	c.Advance(10 * time.Second)
	l, err := s.RenewLease(ctx, &store.RenewLeaseParams{Tenant: "t1", ID: p.ID, Fence: fence, LeaseDuration: time.Minute})
	if err != nil || !l.ExpiresAt.Equal(c.Now().Add(time.Minute)) || l.Token != fence.Token {
		t.Fatalf("RenewLease = %+v, %v", l, err)
	}
	stale := store.Fence{Token: "nope", Generation: fence.Generation}
	if _, err := s.RenewLease(ctx, &store.RenewLeaseParams{Tenant: "t1", ID: p.ID, Fence: stale, LeaseDuration: time.Minute}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("stale RenewLease: %v, want ErrLeaseLost", err)
	}
	rp, err := s.BeginRetry(ctx, &store.BeginRetryParams{Tenant: "t1", ID: p.ID, Fence: fence, LeaseDuration: time.Minute})
	if err != nil || rp.Attempt != 2 {
		t.Fatalf("BeginRetry = %+v, %v", rp, err)
	}

	yes := true
	result := json.RawMessage(`{ "refund":  "re_1", "html": "<b>" }`)
	sres, err := s.Settle(ctx, &store.SettleParams{Tenant: "t1", ID: p.ID, Fence: stale, Status: store.StatusSucceeded})
	if !errors.Is(err, store.ErrLeaseLost) || sres == nil || sres.Changed {
		t.Errorf("stale Settle = %+v, %v; want ErrLeaseLost and the unchanged proposal", sres, err)
	}
	sres, err = s.Settle(ctx, &store.SettleParams{
		Tenant: "t1", ID: p.ID, Fence: fence, Status: store.StatusSucceeded, Executed: &yes,
		Receipt: "re_1", Result: result, Presentation: "Refunded 40 EUR.",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sres.Changed || sres.From != store.StatusExecuting || sres.Proposal.Status != store.StatusSucceeded || sres.Proposal.Lease != nil {
		t.Fatalf("Settle = %+v", sres)
	}
	got, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sres.Proposal) {
		t.Errorf("stored\n%+v\nreturned\n%+v", got, sres.Proposal)
	}
	if o := got.Outcome; o == nil || string(o.Result) != string(result) || o.Receipt != "re_1" || !*o.Executed || o.Error != nil {
		t.Errorf("outcome %+v, result %s", o, o.Result)
	}
	msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: "t1", ThreadID: "th1"})
	if err != nil || len(msgs) != 1 || msgs[0].Text != "Refunded 40 EUR." || msgs[0].ProposalID != p.ID ||
		!reflect.DeepEqual(msgs[0].Outcome, got.Outcome) {
		t.Fatalf("ListMessages = %+v, %v", msgs, err)
	}

	// The grant went live with the success.
	g, err := s.FindGrant(ctx, find)
	if err != nil {
		t.Fatalf("FindGrant: %v", err)
	}
	if g.Tenant != "t1" || g.OriginProposalID != p.ID || g.ActivatedAt == nil || !g.ActivatedAt.Equal(c.Now()) ||
		g.ExpiresAt == nil || !g.ExpiresAt.Equal(exp) || g.ID == "" {
		t.Errorf("grant %+v", g)
	}
	for name, f := range map[string]func(*store.FindGrantParams){
		"other digest":  func(f *store.FindGrantParams) { f.InputDigest = "other" },
		"other thread":  func(f *store.FindGrantParams) { f.ThreadID = "th2" },
		"other version": func(f *store.FindGrantParams) { f.ActionVersion = "2" },
		"other actor":   func(f *store.FindGrantParams) { f.Requester = "bob" },
		"other tenant":  func(f *store.FindGrantParams) { f.Tenant = "t2" },
	} {
		fp := *find
		f(&fp)
		if _, err := s.FindGrant(ctx, &fp); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FindGrant, %s: %v, want ErrNotFound", name, err)
		}
	}
	c.Advance(25 * time.Hour)
	if _, err := s.FindGrant(ctx, find); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FindGrant after expiry: %v, want ErrNotFound", err)
	}
	gs, err := s.ListGrants(ctx, &store.ListGrantsParams{Tenant: "t1", Requester: "alice"})
	if err != nil || len(gs) != 1 || gs[0].ID != g.ID {
		t.Fatalf("ListGrants = %+v, %v", gs, err)
	}
	if gs, _ := s.ListGrants(ctx, &store.ListGrantsParams{Tenant: "t1", ThreadID: "th2"}); len(gs) != 0 {
		t.Errorf("ListGrants other thread = %+v", gs)
	}
	rg, err := s.RevokeGrant(ctx, &store.RevokeGrantParams{Tenant: "t1", ID: g.ID, Actor: "admin"})
	if err != nil || rg.RevokedAt == nil || rg.RevokedBy != "admin" {
		t.Fatalf("RevokeGrant = %+v, %v", rg, err)
	}
	c.Advance(time.Second)
	rg2, err := s.RevokeGrant(ctx, &store.RevokeGrantParams{Tenant: "t1", ID: g.ID, Actor: "other"})
	if err != nil || !rg2.RevokedAt.Equal(*rg.RevokedAt) || rg2.RevokedBy != "admin" {
		t.Errorf("second RevokeGrant = %+v, %v; want the first revocation", rg2, err)
	}
	if _, err := s.RevokeGrant(ctx, &store.RevokeGrantParams{Tenant: "t2", ID: g.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeGrant in another tenant: %v", err)
	}

	evs, err := s.ListEvents(ctx, &store.ListEventsParams{Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	var types []store.EventType
	for i, e := range evs {
		types = append(types, e.Type)
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Errorf("event ids not increasing: %+v", evs)
		}
	}
	wantTypes := []store.EventType{store.EventCreated, store.EventDecided, store.EventClaimed, store.EventRetried, store.EventSettled}
	if !reflect.DeepEqual(types, wantTypes) {
		t.Errorf("events %v, want %v", types, wantTypes)
	}
	if after, _ := s.ListEvents(ctx, &store.ListEventsParams{Tenant: "t1", AfterID: evs[1].ID, Limit: 2}); len(after) != 2 || after[0].ID != evs[2].ID {
		t.Errorf("ListEvents after %d = %+v", evs[1].ID, after)
	}
}

func TestRejectCancelExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, _ := fresh(t)

	r := create(t, s, proposal(c, "t1", "th1")).Proposal
	dres, err := s.Decide(ctx, &store.DecideParams{Tenant: "t1", ID: r.ID, Actor: "alice", Verdict: store.VerdictRejected, Reason: "no"})
	if err != nil || dres.Outcome != store.DecideApplied || dres.To != store.StatusRejected || dres.Proposal.Outcome == nil {
		t.Fatalf("reject = %+v, %v", dres, err)
	}
	if again := approve(t, s, r, "bob"); again.Outcome != store.DecideConflict {
		t.Errorf("approve after reject = %v", again.Outcome)
	}

	x := create(t, s, proposal(c, "t1", "th1")).Proposal
	cres, err := s.Cancel(ctx, &store.CancelParams{Tenant: "t1", ID: x.ID, Actor: "alice", Via: "cli"})
	if err != nil || !cres.Changed || cres.Proposal.Status != store.StatusCancelled {
		t.Fatalf("Cancel = %+v, %v", cres, err)
	}
	if cres, err := s.Cancel(ctx, &store.CancelParams{Tenant: "t1", ID: x.ID}); err != nil || cres.Changed {
		t.Errorf("Cancel again = %+v, %v; want unchanged", cres, err)
	}
	if cres, err := s.Cancel(ctx, &store.CancelParams{Tenant: "t1", ID: r.ID}); !errors.Is(err, store.ErrConflict) || cres == nil || cres.Changed {
		t.Errorf("Cancel rejected = %+v, %v; want a conflict with the proposal", cres, err)
	}

	e := create(t, s, proposal(c, "t1", "th1")).Proposal
	if _, err := s.Expire(ctx, &store.ExpireParams{Tenant: "t1", ID: e.ID}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Expire before the deadline: %v, want ErrConflict", err)
	}

	// An approved wait-mode proposal lapses at the deadline; an approved
	// independent one does not.
	a := create(t, s, proposal(c, "t1", "th1")).Proposal
	approve(t, s, a, "alice")
	ind := create(t, s, proposal(c, "t1", "th1", func(p *store.Proposal) { p.Mode = store.ModeIndependent })).Proposal
	approve(t, s, ind, "alice")
	late := create(t, s, proposal(c, "t1", "th1", func(p *store.Proposal) { p.ExpiresAt = c.Now().Add(time.Hour) })).Proposal

	c.Advance(11 * time.Minute)
	eres, err := s.Expire(ctx, &store.ExpireParams{Tenant: "t1", ID: e.ID})
	if err != nil || !eres.Changed || eres.Proposal.Status != store.StatusExpired {
		t.Fatalf("Expire = %+v, %v", eres, err)
	}
	if eres, err := s.Expire(ctx, &store.ExpireParams{Tenant: "t1", ID: e.ID}); err != nil || eres.Changed {
		t.Errorf("Expire again = %+v, %v", eres, err)
	}
	if _, err := s.ExpireDue(ctx, &store.ExpireDueParams{}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("ExpireDue without a limit: %v", err)
	}
	due, err := s.ExpireDue(ctx, &store.ExpireDueParams{Limit: 10})
	if err != nil || len(due) != 1 || due[0].ID != a.ID || due[0].Status != store.StatusExpired {
		t.Fatalf("ExpireDue = %+v, %v; want only %s", due, err, a.ID)
	}
	for _, id := range []string{ind.ID, late.ID} {
		if p, _ := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: id}); p.Status == store.StatusExpired {
			t.Errorf("%s expired", id)
		}
	}

	// A decision after the deadline expires the proposal and says so.
	c.Advance(time.Hour)
	if d := approve(t, s, late, "alice"); d.Outcome != store.DecideExpired || d.To != store.StatusExpired {
		t.Errorf("late decision = %+v", d)
	}

	// A claim of a lapsed approval writes the expiry and fails.
	b := create(t, s, proposal(c, "t1", "th1")).Proposal
	approve(t, s, b, "alice")
	c.Advance(time.Hour)
	if _, err := s.Claim(ctx, &store.ClaimParams{Tenant: "t1", ID: b.ID, Owner: "w", LeaseDuration: time.Minute}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Claim of a lapsed approval: %v, want ErrConflict", err)
	}
	if got, _ := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: b.ID}); got.Status != store.StatusExpired || got.Outcome == nil {
		t.Errorf("after the refused claim: %+v, want it expired", got)
	}
}

func TestClaimBatchReconcileResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, _ := fresh(t)
	ind := func(p *store.Proposal) { p.Mode = store.ModeIndependent }

	if _, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w", LeaseDuration: time.Minute}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("ClaimBatch without a limit: %v", err)
	}
	var ids []string
	for range 3 {
		p := create(t, s, proposal(c, "t1", "th1", ind)).Proposal
		c.Advance(time.Second)
		approve(t, s, p, "alice")
		ids = append(ids, p.ID)
	}
	wait := create(t, s, proposal(c, "t1", "th1")).Proposal
	approve(t, s, wait, "alice") // the caller executes it, not a worker

	got, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w1", LeaseDuration: time.Minute, Limit: 2})
	if err != nil || len(got) != 2 {
		t.Fatalf("ClaimBatch = %+v, %v", got, err)
	}
	for i, cl := range got {
		if cl.Proposal.ID != ids[i] || cl.From != store.StatusApproved || cl.Proposal.Status != store.StatusExecuting || cl.Proposal.Lease.Owner != "w1" {
			t.Errorf("claimed[%d] = %+v from %s", i, cl.Proposal, cl.From)
		}
	}
	rest, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w2", LeaseDuration: time.Minute, Limit: 10})
	if err != nil || len(rest) != 1 || rest[0].Proposal.ID != ids[2] {
		t.Fatalf("second ClaimBatch = %+v, %v", rest, err)
	}

	// An expired lease is recovered, keeping its attempt.
	c.Advance(2 * time.Minute)
	rec, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w3", LeaseDuration: time.Minute, Limit: 1})
	if err != nil || len(rec) != 1 || rec[0].From != store.StatusExecuting || rec[0].Proposal.Attempt != 1 || rec[0].Proposal.Lease.Owner != "w3" {
		t.Fatalf("recovery = %+v, %v", rec, err)
	}
	old := got[0].Proposal.Lease
	if rec[0].Proposal.ID == got[0].Proposal.ID {
		_, err := s.Settle(ctx, &store.SettleParams{Tenant: "t1", ID: got[0].Proposal.ID, Fence: store.Fence{Token: old.Token, Generation: old.Generation}, Status: store.StatusSucceeded})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("settle by the previous holder: %v, want ErrLeaseLost", err)
		}
	}

	// Reconciling, lease released until the next attempt.
	p := rec[0].Proposal
	next := c.Now().Add(time.Minute)
	sres, err := s.Settle(ctx, &store.SettleParams{
		Tenant: "t1", ID: p.ID, Fence: store.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation},
		Status: store.StatusReconciling, ReleaseLease: true, NextAttemptAt: &next,
	})
	if err != nil || sres.Proposal.Status != store.StatusReconciling || sres.Proposal.Lease != nil || !sres.Proposal.NextAttemptAt.Equal(next) {
		t.Fatalf("Settle reconciling = %+v, %v", sres, err)
	}
	early, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w4", LeaseDuration: time.Hour, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range early {
		if cl.Proposal.ID == p.ID {
			t.Errorf("reconciling proposal claimed before its next attempt")
		}
	}
	c.Advance(time.Minute)
	due, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w5", LeaseDuration: time.Minute, Limit: 10})
	if err != nil || len(due) != 1 || due[0].Proposal.ID != p.ID || due[0].From != store.StatusReconciling {
		t.Fatalf("ClaimBatch of a due reconciliation = %+v, %v", due, err)
	}

	// An operator resolves it.
	if _, err := s.Resolve(ctx, &store.ResolveParams{Tenant: "t1", ID: ids[2], Status: store.StatusSucceeded}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Resolve of an executing proposal: %v, want ErrConflict", err)
	}
	rres, err := s.Resolve(ctx, &store.ResolveParams{Tenant: "t1", ID: p.ID, Actor: "ops", Via: "cli", Status: store.StatusFailed, Note: "checked"})
	if err != nil || rres.Proposal.Status != store.StatusFailed || rres.Proposal.Outcome.ResolvedBy != "ops" || rres.Proposal.Lease != nil {
		t.Fatalf("Resolve = %+v, %v", rres, err)
	}
	if _, err := s.Resolve(ctx, &store.ResolveParams{Tenant: "t1", ID: p.ID, Status: store.StatusExecuting}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("Resolve to executing: %v, want ErrInvalidParams", err)
	}
}

func TestThreadsAndMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, _ := fresh(t)
	if _, err := s.EnsureThread(ctx, &store.EnsureThreadParams{Tenant: "t1"}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("EnsureThread without id: %v", err)
	}
	th, err := s.EnsureThread(ctx, &store.EnsureThreadParams{Tenant: "t1", ID: "th1", Owner: "bob"})
	if err != nil || th.Owner != "bob" || !th.CreatedAt.Equal(c.Now()) {
		t.Fatalf("EnsureThread = %+v, %v", th, err)
	}
	c.Advance(time.Second)
	again, err := s.EnsureThread(ctx, &store.EnsureThreadParams{Tenant: "t1", ID: "th1", Owner: "carol"})
	if err != nil || !reflect.DeepEqual(again, th) {
		t.Errorf("EnsureThread again = %+v, %v; want %+v", again, err, th)
	}
	if msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: "t1", ThreadID: "th1"}); err != nil || len(msgs) != 0 {
		t.Errorf("ListMessages of an empty thread = %+v, %v", msgs, err)
	}
	// A proposal in bob's thread keeps bob as the owner.
	p := proposal(c, "t1", "th1")
	p.Requester = "bob"
	p = create(t, s, p).Proposal
	if th, _ := s.GetThread(ctx, &store.GetThreadParams{Tenant: "t1", ID: "th1"}); th.Owner != "bob" {
		t.Errorf("owner %s, want bob", th.Owner)
	}
	if err := s.DeleteThread(ctx, &store.GetThreadParams{Tenant: "t1", ID: "th1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteThread(ctx, &store.GetThreadParams{Tenant: "t1", ID: "th1"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteThread again: %v", err)
	}
	if _, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: "t1", ThreadID: "th1"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListMessages of a deleted thread: %v", err)
	}
	// The outcome of a proposal whose thread is gone is dropped.
	if _, err := s.Cancel(ctx, &store.CancelParams{Tenant: "t1", ID: p.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureThread(ctx, &store.EnsureThreadParams{Tenant: "t1", ID: "th1", Owner: "bob"}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: "t1", ThreadID: "th1"}); err != nil || len(msgs) != 0 {
		t.Errorf("messages after a settlement into a deleted thread = %+v, %v", msgs, err)
	}
}

func TestListProposals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, _ := fresh(t)
	// Two share a timestamp, so the id breaks the tie.
	var all []*store.Proposal
	for i := range 7 {
		thread := "th1"
		opts := []func(*store.Proposal){}
		if i%2 == 1 {
			thread = "th2"
			opts = append(opts, func(p *store.Proposal) {
				p.Requester, p.Approvers, p.Action = "bob", []string{"role:finance", "actor:carol"}, "files.delete"
			})
		}
		all = append(all, create(t, s, proposal(c, "t1", thread, opts...)).Proposal)
		if i != 3 {
			c.Advance(time.Second)
		}
	}
	create(t, s, proposal(c, "t2", "th1"))
	approve(t, s, all[0], "alice")

	list := func(params store.ListProposalsParams) []string {
		t.Helper()
		params.Tenant = "t1"
		var ids []string
		for {
			page, err := s.ListProposals(ctx, &params)
			if err != nil {
				t.Fatalf("ListProposals(%+v): %v", params, err)
			}
			if len(page.Proposals) > max(params.Limit, 0) && params.Limit > 0 {
				t.Fatalf("page of %d over limit %d", len(page.Proposals), params.Limit)
			}
			for _, p := range page.Proposals {
				ids = append(ids, p.ID)
			}
			if page.Next == "" {
				return ids
			}
			params.After = page.Next
		}
	}
	newestFirst := func(keep func(*store.Proposal) bool) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- {
			if keep(all[i]) {
				ids = append(ids, all[i].ID)
			}
		}
		// The tie: all[3] and all[4] share created_at; the larger id first.
		return ids
	}
	everything := newestFirst(func(*store.Proposal) bool { return true })
	for _, limit := range []int{0, 1, 2, 3, 7, 8} {
		if got := list(store.ListProposalsParams{Limit: limit}); !reflect.DeepEqual(got, everything) {
			t.Errorf("limit %d: %v, want %v", limit, got, everything)
		}
	}
	if got, want := list(store.ListProposalsParams{ThreadID: "th2", Limit: 2}), newestFirst(func(p *store.Proposal) bool { return p.ThreadID == "th2" }); !reflect.DeepEqual(got, want) {
		t.Errorf("thread: %v, want %v", got, want)
	}
	if got, want := list(store.ListProposalsParams{Action: "files.delete"}), newestFirst(func(p *store.Proposal) bool { return p.Action == "files.delete" }); !reflect.DeepEqual(got, want) {
		t.Errorf("action: %v, want %v", got, want)
	}
	if got := list(store.ListProposalsParams{Statuses: []store.Status{store.StatusApproved, store.StatusRejected}}); !reflect.DeepEqual(got, []string{all[0].ID}) {
		t.Errorf("statuses: %v", got)
	}
	// Each thread is owned by its first requester: th1 by alice, th2 by
	// bob. Bob's proposals name role:finance and actor:carol.
	vis := func(actor string, principals ...string) []string {
		return list(store.ListProposalsParams{Visible: &store.Visibility{Actor: actor, Principals: principals}, Limit: 2})
	}
	th1 := newestFirst(func(p *store.Proposal) bool { return p.ThreadID == "th1" })
	th2 := newestFirst(func(p *store.Proposal) bool { return p.ThreadID == "th2" })
	for _, tt := range []struct {
		name string
		got  []string
		want []string
	}{
		{"owner alice", vis("alice"), th1},
		{"owner bob", vis("bob"), th2}, // th1's approver is "requester", and alice requested there
		{"carol", vis("carol", "actor:carol"), th2},
		{"finance", vis("dave", "role:finance", "role:x"), th2},
		{"substring is not a match", vis("dave", "role:fin", "actor:car"), nil},
		{"nobody", vis("eve"), nil},
	} {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("visible to %s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}

	for _, limit := range []int{-1, store.MaxPageSize + 1} {
		if _, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", Limit: limit}); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("limit %d: %v, want ErrInvalidParams", limit, err)
		}
	}
	page, _ := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", Limit: 1})
	for _, bad := range []string{"x", page.Next + "A", page.Next[:len(page.Next)-2]} {
		if _, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", After: bad}); !errors.Is(err, store.ErrInvalidCursor) {
			t.Errorf("cursor %q: %v, want ErrInvalidCursor", bad, err)
		}
	}
}

// TestTwoProcesses opens two Stores on one file, as two processes would,
// and has them write concurrently and see each other's writes.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, c, path := fresh(t)
	b := open(t, path, c)

	p := create(t, a, proposal(c, "t1", "th1"))
	if got, err := b.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: p.Proposal.ID}); err != nil || got.Status != store.StatusPending {
		t.Fatalf("B reads A's proposal: %+v, %v", got, err)
	}
	approve(t, b, p.Proposal, "alice")
	if got, err := a.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: p.Proposal.ID}); err != nil || got.Status != store.StatusApproved {
		t.Fatalf("A reads B's decision: %+v, %v", got, err)
	}
	if r := create(t, b, p.Proposal.Clone()); r.Created {
		t.Error("B re-created A's tool call")
	}

	// Many writers in both: creations, and racing claims of one row.
	target := create(t, a, proposal(c, "t1", "th1", func(p *store.Proposal) { p.Mode = store.ModeIndependent })).Proposal
	approve(t, a, target, "alice")
	const n = 20
	var (
		wg      sync.WaitGroup
		claimed atomic.Int64
		errs    = make(chan error, 2*n)
	)
	for i := range n {
		s := []*sqlitestore.Store{a, b}[i%2]
		wg.Go(func() {
			if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: proposal(c, "t1", "th2")}); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			_, err := s.Claim(ctx, &store.ClaimParams{Tenant: "t1", ID: target.ID, Owner: fmt.Sprint("w", i), LeaseDuration: time.Minute})
			switch {
			case err == nil:
				claimed.Add(1)
			case !errors.Is(err, store.ErrConflict):
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if claimed.Load() != 1 {
		t.Errorf("%d claims won, want 1", claimed.Load())
	}
	for _, s := range []*sqlitestore.Store{a, b} {
		page, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", ThreadID: "th2"})
		if err != nil || len(page.Proposals) != n {
			t.Errorf("th2 holds %d proposals, %v; want %d", len(page.Proposals), err, n)
		}
	}
	// Events from both form one gap-free stream.
	evs, err := b.ListEvents(ctx, &store.ListEventsParams{Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID != evs[i-1].ID+1 {
			t.Errorf("event ids jump from %d to %d", evs[i-1].ID, evs[i].ID)
		}
	}
}

// TestDecideRace has many goroutines in two stores approve one proposal
// that needs two approvals: exactly the first two distinct approvers apply.
func TestDecideRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, c, path := fresh(t)
	b := open(t, path, c)
	p := create(t, a, proposal(c, "t1", "th1", func(p *store.Proposal) {
		p.Approvers, p.Quorum = []string{"role:ops"}, 2
	})).Proposal
	var (
		wg      sync.WaitGroup
		applied atomic.Int64
	)
	for i := range 16 {
		s := []*sqlitestore.Store{a, b}[i%2]
		wg.Go(func() {
			res, err := s.Decide(ctx, &store.DecideParams{Tenant: "t1", ID: p.ID, Actor: fmt.Sprint("op", i%4), Verdict: store.VerdictApproved})
			if err != nil {
				t.Error(err)
				return
			}
			if res.Outcome == store.DecideApplied {
				applied.Add(1)
			}
		})
	}
	wg.Wait()
	got, err := a.GetProposal(ctx, &store.GetProposalParams{Tenant: "t1", ID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusApproved || got.Approvals() != 2 || applied.Load() != 2 {
		t.Errorf("status %s, %d approvals, %d applied; want approved, 2, 2", got.Status, got.Approvals(), applied.Load())
	}
}

func TestTimeRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, _ := fresh(t)
	p := proposal(c, "t1", "th1", func(p *store.Proposal) { p.ExpiresAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) })
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("expires_at in 3000: %v, want ErrInvalidParams", err)
	}
}
