package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// The names the suite uses. Every subtest has a store of its own, so they
// need not be unique across subtests.
const (
	tenant      = "acme"
	otherTenant = "globex"
	thread      = "t1"
	requester   = "alice"
	approver    = "bob"
	approver2   = "carol"
	worker      = "worker-1"
	worker2     = "worker-2"
)

// Lease durations. shortLease is long enough that a lease is still held a
// few calls after it was taken, even under -race on a slow machine, and short
// enough to wait out; elapse(shortLease + leaseSlack) outlives it.
const (
	shortLease = 300 * time.Millisecond
	leaseSlack = 150 * time.Millisecond
	longLease  = time.Hour
	// clockSkew bounds how far a time a driver takes from the database's
	// clock (a lease's expiry, a claim's stamp) may stray from the fake
	// clock, which starts at the real time and moves at most a minute ahead
	// of it before a claim.
	clockSkew = 2 * time.Minute
)

// fixture is one subtest's store, clock and context.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	clock *Clock
	store store.Store
}

// setup asks the factory for a fresh store on a fake clock that starts at the
// real time, so that drivers judging leases by the database's clock and
// drivers judging them by the injected one see nearly the same time.
func setup(t *testing.T, newStore Factory) *fixture {
	t.Helper()
	clock := NewClock(time.Now().Truncate(time.Millisecond))
	s := newStore(t, clock.Now)
	if s == nil {
		t.Fatal("factory returned a nil store")
	}
	return &fixture{t: t, ctx: t.Context(), clock: clock, store: s}
}

// elapse moves both clocks past d: the fake one by d at once, the real one by
// sleeping d.
func (fx *fixture) elapse(d time.Duration) {
	fx.clock.Advance(d)
	time.Sleep(d)
}

// proposal returns a new proposal of the default tenant in th, with a fresh
// tool call id and a deadline an hour from the fake clock's now.
func (fx *fixture) proposal(th string, opts ...func(*store.Proposal)) *store.Proposal {
	exp := fx.clock.Now().Add(time.Hour)
	return NewProposal(tenant, th, uniqueID("call"), append([]func(*store.Proposal){
		func(p *store.Proposal) { p.ExpiresAt = exp },
	}, opts...)...)
}

// create stores p (a copy of it, so the caller's value stays the one it
// asked for) and fails the test on error.
func (fx *fixture) create(p *store.Proposal) *store.CreateProposalResult {
	fx.t.Helper()
	res, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: p.Clone()})
	if err != nil {
		fx.t.Fatalf("CreateProposal(%s): %v", p.ID, err)
	}
	if res == nil || res.Proposal == nil {
		fx.t.Fatalf("CreateProposal(%s): nil result", p.ID)
	}
	return res
}

// createNew creates a new proposal in the default thread and requires that
// it was created.
func (fx *fixture) createNew(opts ...func(*store.Proposal)) *store.Proposal {
	fx.t.Helper()
	res := fx.create(fx.proposal(thread, opts...))
	if !res.Created {
		fx.t.Fatalf("CreateProposal(%s): Created = false, want true", res.Proposal.ID)
	}
	return res.Proposal
}

// get reloads a proposal.
func (fx *fixture) get(p *store.Proposal) *store.Proposal {
	fx.t.Helper()
	got, err := fx.store.GetProposal(fx.ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
	if err != nil {
		fx.t.Fatalf("GetProposal(%s): %v", p.ID, err)
	}
	return got
}

// decide records a decision and fails the test on error.
func (fx *fixture) decide(p *store.Proposal, actor string, v store.Verdict) *store.DecideResult {
	fx.t.Helper()
	res, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: p.Tenant, ID: p.ID, Actor: actor, Verdict: v, Via: "api"})
	if err != nil {
		fx.t.Fatalf("Decide(%s, %s, %s): %v", p.ID, actor, v, err)
	}
	return res
}

// approved creates a proposal in the default thread and approves it.
func (fx *fixture) approved(opts ...func(*store.Proposal)) *store.Proposal {
	fx.t.Helper()
	p := fx.createNew(opts...)
	res := fx.decide(p, approver, store.VerdictApproved)
	if res.Outcome != store.DecideApplied || res.Proposal.Status != store.StatusApproved {
		fx.t.Fatalf("approve %s: outcome %s, status %s; want applied, approved", p.ID, res.Outcome, res.Proposal.Status)
	}
	return res.Proposal
}

// claim claims an approved proposal for worker.
func (fx *fixture) claim(p *store.Proposal, lease time.Duration) *store.Proposal {
	fx.t.Helper()
	got, err := fx.store.Claim(fx.ctx, &store.ClaimParams{
		Tenant: p.Tenant, ID: p.ID, Owner: worker, LeaseDuration: lease, ConsumedBy: p.ToolCallID,
	})
	if err != nil {
		fx.t.Fatalf("Claim(%s): %v", p.ID, err)
	}
	if got.Lease == nil {
		fx.t.Fatalf("Claim(%s): no lease", p.ID)
	}
	return got
}

// claimed creates, approves and claims a proposal under a long lease.
func (fx *fixture) claimed(opts ...func(*store.Proposal)) *store.Proposal {
	fx.t.Helper()
	return fx.claim(fx.approved(opts...), longLease)
}

// claimBatch claims work for owner and fails the test on error.
func (fx *fixture) claimBatch(owner string, lease time.Duration, limit int) []*store.Claimed {
	fx.t.Helper()
	got, err := fx.store.ClaimBatch(fx.ctx, &store.ClaimBatchParams{Owner: owner, LeaseDuration: lease, Limit: limit})
	if err != nil {
		fx.t.Fatalf("ClaimBatch(%s): %v", owner, err)
	}
	return got
}

// settleParams returns the parameters of a settlement under p's lease.
func settleParams(p *store.Proposal, status store.Status) *store.SettleParams {
	sp := &store.SettleParams{Tenant: p.Tenant, ID: p.ID, Status: status}
	if p.Lease != nil {
		sp.Fence = fenceOf(p)
	}
	return sp
}

// settle settles p under its lease and fails the test on error.
func (fx *fixture) settle(sp *store.SettleParams) *store.TransitionResult {
	fx.t.Helper()
	res, err := fx.store.Settle(fx.ctx, sp)
	if err != nil {
		fx.t.Fatalf("Settle(%s, %s): %v", sp.ID, sp.Status, err)
	}
	return res
}

// succeed settles p as succeeded under its lease.
func (fx *fixture) succeed(p *store.Proposal) *store.TransitionResult {
	fx.t.Helper()
	sp := settleParams(p, store.StatusSucceeded)
	sp.Executed = ptr(true)
	sp.Receipt = "rcpt_" + p.ID
	return fx.settle(sp)
}

// messages lists a thread's messages of the default tenant.
func (fx *fixture) messages(th string) []*store.Message {
	fx.t.Helper()
	msgs, err := fx.store.ListMessages(fx.ctx, &store.ListMessagesParams{Tenant: tenant, ThreadID: th})
	if err != nil {
		fx.t.Fatalf("ListMessages(%s): %v", th, err)
	}
	return msgs
}

// events lists a proposal's audit trail.
func (fx *fixture) events(proposalID string) []*store.Event {
	fx.t.Helper()
	evs, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant, ProposalID: proposalID})
	if err != nil {
		fx.t.Fatalf("ListEvents(%s): %v", proposalID, err)
	}
	return evs
}

// list returns one page of the default tenant's proposals.
func (fx *fixture) list(params store.ListProposalsParams) *store.ProposalPage {
	fx.t.Helper()
	if params.Tenant == "" {
		params.Tenant = tenant
	}
	page, err := fx.store.ListProposals(fx.ctx, &params)
	if err != nil {
		fx.t.Fatalf("ListProposals: %v", err)
	}
	return page
}

// listAll follows a listing's cursors to the end.
func (fx *fixture) listAll(params store.ListProposalsParams) (all []*store.Proposal, pages int) {
	fx.t.Helper()
	for {
		page := fx.list(params)
		all = append(all, page.Proposals...)
		pages++
		if page.Next == "" {
			return all, pages
		}
		if pages > 10_000 {
			fx.t.Fatal("ListProposals: the cursor never ends")
		}
		params.After = page.Next
	}
}

func fenceOf(p *store.Proposal) store.Fence {
	return store.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}
}

func ptr[T any](v T) *T { return &v }

// Options for NewProposal.

func withMode(m store.Mode) func(*store.Proposal) {
	return func(p *store.Proposal) { p.Mode = m }
}

func withQuorum(n int) func(*store.Proposal) {
	return func(p *store.Proposal) { p.Quorum = n }
}

func withKey(k string) func(*store.Proposal) {
	return func(p *store.Proposal) { p.ReplacementKey = k }
}

func withRequester(r string) func(*store.Proposal) {
	return func(p *store.Proposal) { p.Requester = r }
}

func withAction(a string) func(*store.Proposal) {
	return func(p *store.Proposal) { p.Action = a }
}

func withApprovers(a ...string) func(*store.Proposal) {
	return func(p *store.Proposal) { p.Approvers = a }
}

func withExpiresAt(at time.Time) func(*store.Proposal) {
	return func(p *store.Proposal) { p.ExpiresAt = at }
}

func withInput(input string) func(*store.Proposal) {
	return func(p *store.Proposal) {
		p.Input = json.RawMessage(input)
		p.RawInput = json.RawMessage(input)
		p.InputDigest = digest(p.Input)
	}
}

func independent(p *store.Proposal) { p.Mode = store.ModeIndependent }

// Assertions.

// requireStatus fails the test unless p is in status want.
func requireStatus(t *testing.T, p *store.Proposal, want store.Status) {
	t.Helper()
	if p == nil {
		t.Fatalf("proposal is nil, want status %s", want)
	}
	if p.Status != want {
		t.Fatalf("proposal %s: status %s, want %s", p.ID, p.Status, want)
	}
}

// requireErrorIs fails the test unless errors.Is(err, target).
func requireErrorIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want errors.Is(err, %v)", err, target)
	}
}

// requireConflict fails the test unless err is a *ConflictError about id
// with the given Got, Want (compared as sets; nil: not checked) and
// LeaseLost, and returns it.
func requireConflict(t *testing.T, err error, id string, got store.Status, want []store.Status, leaseLost bool) *store.ConflictError {
	t.Helper()
	var ce *store.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *store.ConflictError", err, err)
	}
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrConflict) = false", err)
	}
	if ce.ID != id {
		t.Errorf("ConflictError.ID = %q, want %q", ce.ID, id)
	}
	if ce.Got != got {
		t.Errorf("ConflictError.Got = %s, want %s", ce.Got, got)
	}
	if want != nil && !sameStatuses(ce.Want, want) {
		t.Errorf("ConflictError.Want = %v, want %v", ce.Want, want)
	}
	if ce.LeaseLost != leaseLost {
		t.Errorf("ConflictError.LeaseLost = %t, want %t", ce.LeaseLost, leaseLost)
	}
	if errors.Is(err, store.ErrLeaseLost) != leaseLost {
		t.Errorf("errors.Is(%v, ErrLeaseLost) = %t, want %t", err, !leaseLost, leaseLost)
	}
	return ce
}

// requireLeaseLost fails the test unless err is a fence failure.
func requireLeaseLost(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("error %v, want errors.Is(err, ErrLeaseLost)", err)
	}
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrConflict) = false, want true", err)
	}
	var ce *store.ConflictError
	if !errors.As(err, &ce) {
		t.Errorf("error %v (%T), want a *store.ConflictError", err, err)
	}
}

func errorsIsNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

func sameStatuses(a, b []store.Status) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// requireTime fails the test unless got is the instant want, in UTC.
func requireTime(t *testing.T, name string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
	if got.Location() != time.UTC {
		t.Errorf("%s = %v, want it in UTC", name, got)
	}
}

// requireNear fails the test unless got is within tolerance of want. It is
// for lease expiries, which a driver may compute from the database's clock.
func requireNear(t *testing.T, name string, got, want time.Time, tolerance time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tolerance || d > tolerance {
		t.Errorf("%s = %v, want %v ± %v", name, got, want, tolerance)
	}
}

// requireSameProposal fails the test when got differs from want in any field.
func requireSameProposal(t *testing.T, got, want *store.Proposal) {
	t.Helper()
	if diffs := diffProposal(want, got); len(diffs) > 0 {
		t.Errorf("proposal %s differs:\n  %s", want.ID, joinLines(diffs))
	}
}

func joinLines(lines []string) string {
	s := ""
	for i, l := range lines {
		if i > 0 {
			s += "\n  "
		}
		s += l
	}
	return s
}

// diffProposal compares every field of two proposals, by reflection so that
// a field added to store.Proposal is compared without editing the suite.
// JSON is compared by value, times by instant, and a nil slice equals an
// empty one.
func diffProposal(want, got *store.Proposal) []string {
	if want == nil || got == nil {
		if want == got {
			return nil
		}
		return []string{fmt.Sprintf("got %v, want %v", got, want)}
	}
	var diffs []string
	wv, gv := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	for i := range wv.NumField() {
		f := wv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if !equalValue(wv.Field(i), gv.Field(i)) {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", f.Name, show(gv.Field(i)), show(wv.Field(i))))
		}
	}
	return diffs
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
)

func equalValue(a, b reflect.Value) bool {
	switch a.Type() {
	case rawMessageType:
		return jsonEqual(a.Bytes(), b.Bytes())
	case timeType:
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalValue(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if !equalValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
}

// show prints a field's value for a diff: JSON as text, structs (outcomes,
// leases, decisions) as JSON so that their pointer fields show their values.
func show(v reflect.Value) string {
	switch {
	case v.Type() == rawMessageType:
		return string(v.Bytes())
	case v.Type() == timeType:
		return v.Interface().(time.Time).String()
	case v.Kind() == reflect.Pointer && !v.IsNil():
		return "&" + show(v.Elem())
	case v.Kind() == reflect.Struct, v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		if b, err := json.Marshal(v.Interface()); err == nil {
			return string(b)
		}
	}
	return fmt.Sprintf("%+v", v.Interface())
}

// jsonEqual reports whether two JSON texts hold the same value; empty text
// counts as null.
func jsonEqual(a, b []byte) bool {
	var av, bv any
	if len(a) > 0 {
		if err := json.Unmarshal(a, &av); err != nil {
			return false
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &bv); err != nil {
			return false
		}
	}
	return reflect.DeepEqual(av, bv)
}

// concurrently runs fn(0) … fn(n-1) in n goroutines released together by a
// start barrier, and waits for all of them.
func concurrently(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// ids returns the ids of proposals, in order.
func ids(ps []*store.Proposal) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func isInvalidParams(err error) bool { return errors.Is(err, store.ErrInvalidParams) }

func isInvalidCursor(err error) bool { return errors.Is(err, store.ErrInvalidCursor) }
