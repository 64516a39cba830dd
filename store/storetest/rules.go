package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// Rule names one of the selection rules of store/transition.go that a
// durable driver restates in SQL, to find the rows a sweep or a claim works
// on without reading them all.
type Rule string

// The rules a driver restates, each with the operation whose selection it
// is.
const (
	// RuleDue is store.Due: the proposals ExpireDue expires.
	RuleDue Rule = "due"
	// RuleClaimable is store.Claimable: the proposals ClaimBatch claims.
	RuleClaimable Rule = "claimable"
	// RuleEscalatable is store.Escalatable: the proposals EscalateDue
	// escalates.
	RuleEscalatable Rule = "escalatable"
	// RuleRemindable is store.Remindable: the proposals RemindDue reminds
	// of.
	RuleRemindable Rule = "remindable"
)

// Rules lists every Rule.
var Rules = []Rule{RuleDue, RuleClaimable, RuleEscalatable, RuleRemindable}

// Accepts applies the Go rule r names to p at now.
func (r Rule) Accepts(p *store.Proposal, now time.Time) bool {
	switch r {
	case RuleDue:
		return store.Due(p, now)
	case RuleClaimable:
		return store.Claimable(p, now)
	case RuleEscalatable:
		return store.Escalatable(p, now)
	case RuleRemindable:
		return store.Remindable(p, now)
	}
	panic(fmt.Sprintf("storetest: unknown rule %q", r))
}

// RuleQuery runs, changing nothing, the query by which a driver selects
// the proposals rule accepts at now (the application's clock; a driver that
// judges leases by the database's clock keeps doing so), and returns the ids
// of every row it selects, in any order, without the limit a sweep puts on
// it.
//
// It must not filter the rows through the Go rule: the drivers' sweeps do,
// which hides a query that selects too much from any test of the sweeps
// alone, while the rows it wrongly selects still take the places of a
// bounded batch (a sweep whose batch is all such rows makes no progress).
// A driver whose SQL restates a rule passes its RuleQuery to Run with
// WithRuleQuery.
type RuleQuery func(ctx context.Context, s store.Store, rule Rule, now time.Time) ([]string, error)

// Option adjusts Run.
type Option func(*options)

type options struct {
	ruleQuery RuleQuery
}

// WithRuleQuery has Run check the driver's queries themselves against the
// rules they restate (see RuleQuery), besides the sweeps and claims that
// every driver is checked on.
func WithRuleQuery(q RuleQuery) Option {
	return func(o *options) { o.ruleQuery = q }
}

// Offsets from the instant the rules are judged at (ruleBase) of the times
// the proposals are given: on both sides, and on it, at the precision of
// each driver (PostgreSQL keeps microseconds, SQLite nanoseconds).
var ruleOffsets = []time.Duration{-time.Minute, -time.Microsecond, -time.Nanosecond, 0, time.Nanosecond, time.Microsecond, time.Minute}

// The instants, around ruleBase, at which a query is compared with its
// rule: each offset above that a comparison can tell apart.
var ruleNows = []time.Duration{-time.Microsecond, -time.Nanosecond, 0, time.Nanosecond, time.Microsecond}

// ruleAhead is how far ahead of the fake clock's start the rules are
// judged. The proposals are made at the start, so that their deadlines
// around ruleBase lie ahead of it (a proposal past its deadline cannot be
// approved); it also outlasts building them, so that a lease taken for a
// microsecond while building has run out by ruleBase on the database's
// clock too, and one taken for longLease has not.
const ruleAhead = 10 * time.Minute

// ruleState is how far a proposal of the population went through the
// state machine, and how: which lease it holds, and whether it waits for a
// next attempt.
type ruleState int

const (
	rsPending             ruleState = iota
	rsPendingPartial                // quorum 2, one approval
	rsApproved                      // quorum 1
	rsExecutingHeld                 // claimed under longLease
	rsExecutingLapsed               // claimed under a microsecond's lease
	rsExecutingReleased             // released to its caller: no lease, a next attempt
	rsReconcilingHeld               // settled reconciling, keeping longLease
	rsReconcilingLapsed             // settled reconciling, keeping a lapsed lease
	rsReconcilingReleased           // settled reconciling, its lease released
	rsRejected                      // decided so
	rsCancelled                     // withdrawn
	rsExpired                       // expired at a deadline before the start, whatever expires says
	rsSucceeded                     // settled so
	rsFailed                        // settled so
	rsUnknown                       // settled so
	rsSuperseded                    // replaced by a later proposal (itself pending)
	ruleStateCount
)

var ruleStateNames = [...]string{
	"pending", "pending 1 of 2", "approved", "executing (lease held)", "executing (lease lapsed)",
	"executing (released)", "reconciling (lease held)", "reconciling (lease lapsed)", "reconciling (lease released)",
	"rejected", "cancelled", "expired", "succeeded", "failed", "unknown", "superseded",
}

func (s ruleState) String() string { return ruleStateNames[s] }

// carriesNext reports whether a proposal in s may hold a NextAttemptAt.
func (s ruleState) carriesNext() bool {
	return s == rsExecutingReleased || s == rsReconcilingHeld || s == rsReconcilingLapsed || s == rsReconcilingReleased
}

// remindSpec is a reminder schedule: RemindAt (nil: none) and RemindEvery.
type remindSpec struct {
	at    *time.Duration
	every time.Duration
}

// ruleSpec describes one proposal of the population; times are offsets
// from ruleBase.
type ruleSpec struct {
	state    ruleState
	mode     store.Mode
	tenant   string
	expires  time.Duration
	next     *time.Duration // for states that carry one; required by rsExecutingReleased
	escalate *time.Duration
	remind   remindSpec
}

func (s *ruleSpec) String() string {
	opt := func(d *time.Duration) string {
		if d == nil {
			return "none"
		}
		return fmt.Sprintf("%+v", *d)
	}
	return fmt.Sprintf("%s, %s, tenant %s, expires %+v, next attempt %s, escalate %s, remind %s every %v",
		s.state, s.mode, s.tenant, s.expires, opt(s.next), opt(s.escalate), opt(s.remind.at), s.remind.every)
}

// ruleSpecs returns the population: for every state and mode, one proposal
// per value of the widest dimension, the value of each dimension cycling
// through its list (shifted per state and mode) so that every state and mode
// meets every value of every dimension. Each rule reads the status, the mode
// and the fields of its own dimensions, so every combination a rule tells
// apart is in the population; the other fields vary beside it, so that a
// query that reads a field its rule does not is caught too.
func ruleSpecs() []*ruleSpec {
	opt := func(d time.Duration) *time.Duration { return &d }
	var (
		nexts      = []*time.Duration{nil}
		escalates  = []*time.Duration{nil}
		reminds    = []remindSpec{{nil, 0}, {nil, time.Minute}, {opt(-time.Minute), 0}, {opt(0), 0}, {opt(0), -time.Minute}}
		modes      = []store.Mode{store.ModeWait, store.ModeTwoPhase, store.ModeIndependent}
		tenants    = []string{tenant, otherTenant}
		releasedAt = ruleOffsets // a released execution always has a next attempt
	)
	for _, o := range ruleOffsets {
		nexts = append(nexts, opt(o))
		escalates = append(escalates, opt(o))
		reminds = append(reminds, remindSpec{opt(o), time.Minute})
	}
	width := max(len(ruleOffsets), len(nexts), len(escalates), len(reminds))
	var out []*ruleSpec
	for st := range ruleStateCount {
		for mi, mode := range modes {
			shift := int(st)*len(modes) + mi
			for i := range width {
				s := &ruleSpec{
					state:    st,
					mode:     mode,
					tenant:   tenants[(i+shift)%len(tenants)],
					expires:  ruleOffsets[i%len(ruleOffsets)],
					escalate: escalates[(i+shift)%len(escalates)],
					remind:   reminds[(i+2*shift)%len(reminds)],
				}
				switch {
				case st == rsExecutingReleased:
					s.next = opt(releasedAt[i%len(releasedAt)])
				case st.carriesNext():
					s.next = nexts[i%len(nexts)]
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// ruleCase is one proposal of the population and the spec it was built to.
type ruleCase struct {
	spec *ruleSpec
	id   string
}

// buildRuleCase makes, through the store, a proposal to s with times
// relative to base, and returns its id (and, for a superseded one, its
// pending successor's).
func (fx *fixture) buildRuleCase(s *ruleSpec, base time.Time) []string {
	fx.t.Helper()
	at := func(d *time.Duration) *time.Time {
		if d == nil {
			return nil
		}
		t := base.Add(*d)
		return &t
	}
	lapsed := time.Microsecond
	key := uniqueID("key")
	newProposal := func() *store.Proposal {
		return NewProposal(s.tenant, thread, uniqueID("call"), func(p *store.Proposal) {
			p.Mode = s.mode
			p.ExpiresAt = base.Add(s.expires)
			p.Approvers, p.Quorum = []string{approver}, 1
			p.EscalateAt, p.EscalateTo = at(s.escalate), []string{approver2}
			p.RemindAt, p.RemindEvery = at(s.remind.at), s.remind.every
			switch s.state {
			case rsPendingPartial:
				p.Approvers, p.Quorum = []string{approver, approver2}, 2
			case rsExpired:
				// Past its deadline now, so that it can be expired.
				p.ExpiresAt = fx.clock.Now().Add(-time.Second)
			case rsSuperseded:
				p.ReplacementKey = key
			}
		})
	}
	p := fx.create(newProposal()).Proposal
	made := []string{p.ID}
	approve := func() *store.Proposal {
		res := fx.decide(p, approver, store.VerdictApproved)
		if res.Proposal.Status != store.StatusApproved {
			fx.t.Fatalf("approve %s (%s): status %s", p.ID, s, res.Proposal.Status)
		}
		return res.Proposal
	}
	settleTo := func(p *store.Proposal, status store.Status, release bool) {
		sp := settleParams(p, status)
		sp.ReleaseLease = release
		sp.NextAttemptAt = at(s.next)
		if status != store.StatusReconciling && status != store.StatusExecuting {
			sp.Executed = ptr(status != store.StatusUnknown)
		}
		fx.settle(sp)
	}
	switch s.state {
	case rsPending:
	case rsPendingPartial:
		if res := fx.decide(p, approver, store.VerdictApproved); res.Proposal.Status != store.StatusPending {
			fx.t.Fatalf("one of two approvals of %s: status %s", p.ID, res.Proposal.Status)
		}
	case rsApproved:
		approve()
	case rsExecutingHeld:
		fx.claim(approve(), longLease)
	case rsExecutingLapsed:
		fx.claim(approve(), lapsed)
	case rsExecutingReleased:
		settleTo(fx.claim(approve(), longLease), store.StatusExecuting, true)
	case rsReconcilingHeld:
		settleTo(fx.claim(approve(), longLease), store.StatusReconciling, false)
	case rsReconcilingLapsed:
		settleTo(fx.claim(approve(), lapsed), store.StatusReconciling, false)
	case rsReconcilingReleased:
		settleTo(fx.claim(approve(), longLease), store.StatusReconciling, true)
	case rsRejected:
		fx.decide(p, approver, store.VerdictRejected)
	case rsCancelled:
		if _, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: p.Tenant, ID: p.ID, Actor: requester, Via: "api"}); err != nil {
			fx.t.Fatalf("Cancel(%s): %v", p.ID, err)
		}
	case rsExpired:
		if _, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID}); err != nil {
			fx.t.Fatalf("Expire(%s): %v", p.ID, err)
		}
	case rsSucceeded:
		settleTo(fx.claim(approve(), longLease), store.StatusSucceeded, false)
	case rsFailed:
		settleTo(fx.claim(approve(), longLease), store.StatusFailed, false)
	case rsUnknown:
		settleTo(fx.claim(approve(), longLease), store.StatusUnknown, false)
	case rsSuperseded:
		res := fx.create(newProposal())
		if !res.Created || len(res.Superseded) != 1 || res.Superseded[0].ID != p.ID {
			fx.t.Fatalf("the successor of %s: created %v, superseded %v", p.ID, res.Created, ids(res.Superseded))
		}
		made = append(made, res.Proposal.ID)
	}
	return made
}

// ruleSnapshot reads every proposal of the population as stored now.
func (fx *fixture) ruleSnapshot(cases map[string]*ruleCase) map[string]*store.Proposal {
	fx.t.Helper()
	out := make(map[string]*store.Proposal, len(cases))
	for _, tn := range []string{tenant, otherTenant} {
		all, _ := fx.listAll(store.ListProposalsParams{Tenant: tn})
		for _, p := range all {
			out[p.ID] = p
		}
	}
	if len(out) != len(cases) {
		fx.t.Fatalf("%d proposals listed, want the population's %d", len(out), len(cases))
	}
	for id := range cases {
		if out[id] == nil {
			fx.t.Fatalf("proposal %s (%s) is not listed", id, cases[id].spec)
		}
	}
	return out
}

// testRulesMatchQueries pins every selection a driver makes by a rule of
// store/transition.go to the Go rule itself, over a population of proposals
// made through the store in every state the rules tell apart, with
// deadlines, next attempts, escalations and reminders on both sides of the
// instant judged and on it, and leases held, lapsed and absent:
//
//   - with q (a driver whose SQL restates the rules), each query, run as is
//     at instants a nanosecond and a microsecond on either side of that
//     instant and at it, selects exactly the proposals its rule accepts;
//   - ClaimBatch, ExpireDue, EscalateDue and RemindDue, each with a limit
//     above the population, act on exactly the proposals their rule accepts
//     at that instant, as the store holds them just before.
func testRulesMatchQueries(t *testing.T, newStore Factory, q RuleQuery) {
	fx := setup(t, newStore)
	start := fx.clock.Now()
	base := start.Add(ruleAhead)
	cases := map[string]*ruleCase{}
	for _, s := range ruleSpecs() {
		for _, id := range fx.buildRuleCase(s, base) {
			cases[id] = &ruleCase{spec: s, id: id}
		}
	}
	if took := time.Since(start); took > ruleAhead/2 {
		t.Fatalf("building the population took %v: a lapsed lease may not have run out by the instant judged", took)
	}
	limit := len(cases) + 1

	if q != nil {
		snap := fx.ruleSnapshot(cases)
		for _, off := range ruleNows {
			now := base.Add(off)
			for _, r := range Rules {
				got, err := q(fx.ctx, fx.store, r, now)
				if err != nil {
					t.Fatalf("query of %s at %+v: %v", r, off, err)
				}
				compareRule(t, fmt.Sprintf("the query of %s at %+v", r, off), r, now, cases, snap, got)
			}
		}
	}

	// The operations, at base on the fake clock, in turn: each acts on
	// the store as the one before left it.
	fx.clock.Advance(base.Sub(fx.clock.Now()))
	now := fx.clock.Now()
	snap := fx.ruleSnapshot(cases)
	claimed := fx.claimBatch(worker2, longLease, limit)
	var got []string
	for _, c := range claimed {
		got = append(got, c.Proposal.ID)
		if before := snap[c.Proposal.ID]; before != nil && c.From != before.Status {
			t.Errorf("ClaimBatch claimed %s from %s; it was %s", c.Proposal.ID, c.From, before.Status)
		}
	}
	compareRule(t, "ClaimBatch", RuleClaimable, now, cases, snap, got)

	for _, op := range []struct {
		rule  Rule
		name  string
		sweep func(context.Context, *store.ExpireDueParams) ([]*store.Proposal, error)
	}{
		{RuleDue, "ExpireDue", fx.store.ExpireDue},
		{RuleEscalatable, "EscalateDue", fx.store.EscalateDue},
		{RuleRemindable, "RemindDue", fx.store.RemindDue},
	} {
		snap := fx.ruleSnapshot(cases)
		swept, err := op.sweep(fx.ctx, &store.ExpireDueParams{Limit: limit})
		if err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		compareRule(t, op.name, op.rule, now, cases, snap, ids(swept))
	}
}

// compareRule fails the test unless got (ids) is exactly the set of
// proposals in snap that rule accepts at now, and unless that set and its
// complement are both non-empty, so that the comparison is not of two
// empty or two full answers.
func compareRule(t *testing.T, what string, r Rule, now time.Time, cases map[string]*ruleCase, snap map[string]*store.Proposal, got []string) {
	t.Helper()
	gotSet := map[string]bool{}
	var problems []string
	for _, id := range got {
		if gotSet[id] {
			problems = append(problems, "selected twice: "+id)
		}
		gotSet[id] = true
		if snap[id] == nil {
			problems = append(problems, "selected a proposal not in the population: "+id)
		}
	}
	accepted := 0
	for id, p := range snap {
		want := r.Accepts(p, now)
		if want {
			accepted++
		}
		switch {
		case want && !gotSet[id]:
			problems = append(problems, "missed, though the rule accepts it: "+describeRuleCase(cases[id], p, now))
		case !want && gotSet[id]:
			problems = append(problems, "selected, though the rule rejects it: "+describeRuleCase(cases[id], p, now))
		}
	}
	if accepted == 0 || accepted == len(snap) {
		problems = append(problems, fmt.Sprintf("the rule accepts %d of the %d proposals: the population does not tell a query apart", accepted, len(snap)))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		const most = 20
		if len(problems) > most {
			problems = append(problems[:most], fmt.Sprintf("… and %d more", len(problems)-most))
		}
		t.Errorf("%s disagrees with store.%s (%d selected, %d accepted by the rule):\n\t%s",
			what, ruleFunc[r], len(gotSet), accepted, strings.Join(problems, "\n\t"))
	}
}

var ruleFunc = map[Rule]string{RuleDue: "Due", RuleClaimable: "Claimable", RuleEscalatable: "Escalatable", RuleRemindable: "Remindable"}

// describeRuleCase says what a proposal was built as and, relative to now,
// what the store holds of the fields the rules read.
func describeRuleCase(c *ruleCase, p *store.Proposal, now time.Time) string {
	rel := func(t *time.Time) string {
		if t == nil {
			return "none"
		}
		return fmt.Sprintf("now%+v", t.Sub(now))
	}
	lease := "none"
	if p.Lease != nil {
		lease = "until " + rel(&p.Lease.ExpiresAt)
	}
	return fmt.Sprintf("%s [built as %s]: %s, %s, expires %s, lease %s, next attempt %s, escalate %s, remind %s every %v",
		p.ID, c.spec, p.Status, p.Mode, rel(&p.ExpiresAt), lease, rel(p.NextAttemptAt), rel(p.EscalateAt), rel(p.RemindAt), p.RemindEvery)
}
