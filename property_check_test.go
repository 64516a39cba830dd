package countersign_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// propEdges is the state machine of docs/design.md §3 (docs/state-machine.md).
// approved→expired holds only for modes whose caller executes;
// unknown→succeeded|failed only by an operator's resolution. A proposal
// starts pending ([*]→pending), or approved ([*]→approved) when a live grant
// approved its call: then it holds exactly that grant's decision.
var propEdges = map[cstype.Status][]cstype.Status{
	cstype.StatusPending:     {cstype.StatusApproved, cstype.StatusRejected, cstype.StatusExpired, cstype.StatusSuperseded, cstype.StatusCancelled},
	cstype.StatusApproved:    {cstype.StatusExecuting, cstype.StatusExpired},
	cstype.StatusExecuting:   {cstype.StatusSucceeded, cstype.StatusFailed, cstype.StatusReconciling, cstype.StatusUnknown, cstype.StatusExecuting},
	cstype.StatusReconciling: {cstype.StatusSucceeded, cstype.StatusFailed, cstype.StatusReconciling},
	cstype.StatusUnknown:     {cstype.StatusSucceeded, cstype.StatusFailed},
}

// propReachable reports whether to can follow from within one step, along
// the graph's edges.
func propReachable(from, to cstype.Status, mode cstype.Mode, resolving bool) bool {
	seen := map[cstype.Status]bool{from: true}
	queue := []cstype.Status{from}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s == to {
			return true
		}
		for _, n := range propEdges[s] {
			if s == cstype.StatusApproved && n == cstype.StatusExpired && !mode.CallerExecutes() {
				continue
			}
			if s == cstype.StatusUnknown && !resolving {
				continue
			}
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return false
}

// neverExecuted are the terminal statuses a proposal reaches without running.
var neverExecuted = []cstype.Status{cstype.StatusRejected, cstype.StatusExpired, cstype.StatusSuperseded, cstype.StatusCancelled}

// checkStep lists every proposal of the tenant from the store and checks:
//
//  1. every status change since the previous step is a path of the state
//     machine (docs/design.md §3), new proposals start pending, or approved by
//     exactly one grant decision (then never two_phase, and already claimed
//     by their caller), and decide, cancel, resolve, clock and revoke steps
//     change nothing but what they act on; the frozen fields of a proposal
//     never change;
//  2. no operation executes twice: a non-idempotent action's operation id
//     reaches Execute at most once, an idempotent one's at most MaxAttempts
//     times, and one tool call (thread, tool call id) never leads to two
//     operations; Execute runs only for an executing, approved proposal,
//     on behalf of the caller that owns it or by the worker (which never
//     runs a grant's approval first); nothing executes without a proposal;
//  3. terminal states stay terminal (row untouched), except unknown, which
//     only an operator's Resolve moves, to succeeded or failed;
//  4. every terminal proposal has one outcome of its status, and its thread
//     one outcome message per (proposal, status); rejected, expired,
//     superseded and cancelled proposals never ran; OnSettled ran exactly
//     once per terminal proposal and never for others (even though every
//     other invocation fails);
//  5. independent approvals never expire; wait and two-phase ones expire
//     only at or after ExpiresAt; after a sweep nothing is due;
//  6. an approved (or later) proposal has a quorum of distinct approvals by
//     allowed deciders, or (whatever the quorum) the decision of the grant
//     that approved its call, a rejected one a rejection by an allowed
//     decider, and no decision comes from anyone else; grants come from
//     such approvals, go live only when their proposal succeeded, approve
//     only matching calls while live, and approve every matching call while
//     live;
//  7. a reconciling proposal's n-th unknown answer is counted on its
//     outcome, and its next attempt is due ReconcileBackoff << (n-1) later,
//     and not reconciled before.
//
// doCall checks the answers: replays of settled tool calls answer the
// recorded outcome and run nothing, a caller-executes approval resumed after
// its deadline answers expired, and a grant's call answers the outcome of
// its proposal, naming the grant.
func (h *propHarness) checkStep(t *rapid.T) {
	if h.idle {
		return
	}
	ctx := context.Background()
	h.mu.Lock()
	violations := h.violations
	h.violations = nil
	execs := slices.Clone(h.execs[h.execsSeen:])
	h.execsSeen = len(h.execs)
	settled := make(map[string]int, len(h.settled))
	for k, v := range h.settled {
		settled[k] = v
	}
	h.mu.Unlock()
	for _, v := range violations {
		h.fatalf(t, "in a hook: %s", v)
	}

	cur := h.listAll(t)
	now := h.clock.Now()

	// New proposals, in first-seen order.
	for _, p := range cur {
		if _, ok := h.prev[p.ID]; !ok {
			h.order = append(h.order, p.ID)
		}
	}
	byID := make(map[string]*cstype.Proposal, len(cur))
	for _, p := range cur {
		byID[p.ID] = p
	}
	for id := range h.prev {
		if byID[id] == nil {
			h.fatalf(t, "proposal %s disappeared from the listing", id)
		}
	}

	for _, id := range h.order {
		p, old := byID[id], h.prev[id]
		h.checkTransition(t, old, p, now)
		h.checkOutcome(t, p)
		h.checkDecisions(t, p)
		if n := settled[id]; p.Status.Terminal() && n != 1 || !p.Status.Terminal() && n != 0 {
			h.fatalf(t, "proposal %s is %s (was %s) but OnSettled ran %d times", id, p.Status, statusOf(old), n)
		}
	}
	for _, x := range execs {
		who := "worker"
		if x.caller != nil {
			who = "caller"
		}
		if x.proposalID == "" {
			who = "direct"
		}
		h.cov.add(fmt.Sprintf("execute %s by %s", x.action, who))
	}
	h.checkExecutions(t, execs, byID)
	h.checkSupersede(t, cur)
	h.checkReconcileBackoff(t, cur)
	h.checkMessages(t, ctx, cur)
	h.checkGrants(t, ctx, byID)
	if h.stepName == "sweep" {
		for _, p := range cur {
			if store.Due(p, now) {
				h.fatalf(t, "after a sweep, proposal %s is still due (%s, expires %v, now %v)", p.ID, p.Status, p.ExpiresAt, now)
			}
		}
	}

	for _, p := range cur {
		if old := h.prev[p.ID]; old == nil || old.Status != p.Status {
			h.cov.add(fmt.Sprintf("%s→%s (%s)", statusOf(old), p.Status, p.Mode))
		}
		if old := h.prev[p.ID]; old == nil || old.Status != p.Status {
			h.reachedAt[p.ID] = h.step
		}
		if hs := h.history[p.ID]; len(hs) == 0 || hs[len(hs)-1] != p.Status {
			h.history[p.ID] = append(hs, p.Status)
		}
		h.prev[p.ID] = p
	}
}

func statusOf(p *cstype.Proposal) cstype.Status {
	if p == nil {
		return "(new)"
	}
	return p.Status
}

// listAll pages through the tenant's proposals, with a small page size to
// exercise the cursors.
func (h *propHarness) listAll(t *rapid.T) []*cstype.Proposal {
	var out []*cstype.Proposal
	seen := map[string]bool{}
	params := &store.ListProposalsParams{Tenant: propTenant, Limit: 3}
	for {
		page, err := h.st.ListProposals(context.Background(), params)
		if err != nil {
			h.fatalf(t, "ListProposals: %v", err)
		}
		for _, p := range page.Proposals {
			if seen[p.ID] {
				h.fatalf(t, "ListProposals returned %s twice", p.ID)
			}
			seen[p.ID] = true
			out = append(out, p)
		}
		if page.Next == "" {
			return out
		}
		params.After = page.Next
	}
}

// checkTransition checks invariants 1, 3 and 5 for one proposal.
func (h *propHarness) checkTransition(t *rapid.T, old, p *cstype.Proposal, now time.Time) {
	if old == nil {
		if h.stepName != "call" {
			h.fatalf(t, "proposal %s appeared in a %s step", p.ID, h.stepName)
		}
		if _, ok := grantOf(p); ok {
			// [*]→approved, by a grant; the caller claims it at once (it
			// may have settled, or be stuck executing after a stall).
			switch {
			case p.Mode == countersign.ModeTwoPhase:
				h.fatalf(t, "proposal %s approved by a grant is two_phase: nothing is left to confirm", p.ID)
			case p.Status == cstype.StatusApproved:
				h.fatalf(t, "proposal %s approved by a grant was left approved (version %d): its caller did not claim it", p.ID, p.Version)
			case !propReachable(cstype.StatusApproved, p.Status, p.Mode, false):
				h.fatalf(t, "proposal %s approved by a grant is %s", p.ID, p.Status)
			}
			return
		}
		if h.allowedRecord(p) {
			// [*]→executing: an allowed write is recorded under its
			// caller's lease, then run (it may have settled, or be stuck
			// executing after a stall).
			if !propReachable(cstype.StatusExecuting, p.Status, p.Mode, false) {
				h.fatalf(t, "allowed write %s is %s", p.ID, p.Status)
			}
			return
		}
		if p.Status != cstype.StatusPending || p.Version != 1 {
			h.fatalf(t, "new proposal %s is %s at version %d, want pending at 1 (or approved by a grant)", p.ID, p.Status, p.Version)
		}
		return
	}
	if p.Version < old.Version {
		h.fatalf(t, "proposal %s went back from version %d to %d", p.ID, old.Version, p.Version)
	}
	if p.Status != old.Status && p.Version == old.Version {
		h.fatalf(t, "proposal %s changed status %s→%s without a new version", p.ID, old.Status, p.Status)
	}
	// Frozen at creation.
	if p.OperationID != old.OperationID || p.ConfirmationID != old.ConfirmationID || p.InputDigest != old.InputDigest ||
		string(p.Input) != string(old.Input) || p.Mode != old.Mode || p.Quorum != old.Quorum ||
		!slices.Equal(p.Approvers, old.Approvers) || !p.ExpiresAt.Equal(old.ExpiresAt) || p.Requester != old.Requester ||
		p.ThreadID != old.ThreadID || p.ToolCallID != old.ToolCallID || p.Action != old.Action {
		h.fatalf(t, "proposal %s changed a frozen field", p.ID)
	}
	if len(p.Decisions) < len(old.Decisions) || !slices.EqualFunc(old.Decisions, p.Decisions[:min(len(old.Decisions), len(p.Decisions))], func(a, b cstype.Decision) bool {
		return a.Actor == b.Actor && a.Decision == b.Decision && a.At.Equal(b.At)
	}) {
		h.fatalf(t, "proposal %s rewrote its decisions: %+v → %+v", p.ID, old.Decisions, p.Decisions)
	}

	changed := p.Version != old.Version
	resolving := h.stepName == "resolve" && h.target == p.ID
	switch {
	case old.Status == cstype.StatusUnknown:
		if changed && !(resolving && (p.Status == cstype.StatusSucceeded || p.Status == cstype.StatusFailed)) {
			h.fatalf(t, "unknown proposal %s moved to %s (version %d→%d) in a %s step", p.ID, p.Status, old.Version, p.Version, h.stepName)
		}
	case old.Status.Terminal():
		if changed || p.Status != old.Status {
			h.fatalf(t, "terminal proposal %s (%s) changed to %s, version %d→%d, in a %s step", p.ID, old.Status, p.Status, old.Version, p.Version, h.stepName)
		}
	case !propReachable(old.Status, p.Status, p.Mode, resolving):
		h.fatalf(t, "illegal transition of %s proposal %s: %s→%s in a %s step", p.Mode, p.ID, old.Status, p.Status, h.stepName)
	}

	// Frame: steps that act on one proposal change no other; moving the
	// clock changes nothing; a sweep only expires.
	if changed {
		switch h.stepName {
		case "decide", "cancel", "resolve":
			if p.ID != h.target {
				h.fatalf(t, "a %s step on %s changed proposal %s (%s→%s)", h.stepName, h.target, p.ID, old.Status, p.Status)
			}
		case "clock", "revoke", "delete-thread", "zombie":
			h.fatalf(t, "a %s step changed proposal %s (%s→%s)", h.stepName, p.ID, old.Status, p.Status)
		case "sweep":
			if p.Status != cstype.StatusExpired {
				h.fatalf(t, "a sweep moved proposal %s %s→%s", p.ID, old.Status, p.Status)
			}
		}
	}

	// Expiry (invariant 5).
	if p.Status == cstype.StatusExpired && old.Status != cstype.StatusExpired {
		if old.Status == cstype.StatusApproved && !p.Mode.CallerExecutes() {
			h.fatalf(t, "independent approval %s expired", p.ID)
		}
		if p.Outcome != nil && p.Outcome.At.Before(p.ExpiresAt) {
			h.fatalf(t, "proposal %s expired at %v, before its deadline %v", p.ID, p.Outcome.At, p.ExpiresAt)
		}
		if now.Before(p.ExpiresAt) {
			h.fatalf(t, "proposal %s expired at clock %v, before its deadline %v", p.ID, now, p.ExpiresAt)
		}
	}
}

// checkOutcome checks invariant 4's outcome object for one proposal.
func (h *propHarness) checkOutcome(t *rapid.T, p *cstype.Proposal) {
	o := p.Outcome
	switch {
	case p.Status.Terminal() || p.Status == cstype.StatusReconciling:
		if o == nil {
			h.fatalf(t, "%s proposal %s has no outcome", p.Status, p.ID)
			return
		}
		if o.Status != p.Status || o.ProposalID != p.ID {
			h.fatalf(t, "%s proposal %s has the outcome of %s %s", p.Status, p.ID, o.Status, o.ProposalID)
		}
	default:
		if o != nil {
			h.fatalf(t, "%s proposal %s has an outcome (%s)", p.Status, p.ID, o.Status)
		}
		return
	}
	if slices.Contains(neverExecuted, p.Status) && (o.Executed == nil || *o.Executed) {
		h.fatalf(t, "%s proposal %s says executed=%v", p.Status, p.ID, fmtBool(o.Executed))
	}
	if slices.Contains(neverExecuted, p.Status) && h.opCounts[p.OperationID] > 0 {
		h.fatalf(t, "%s proposal %s was executed %d times", p.Status, p.ID, h.opCounts[p.OperationID])
	}
	if p.Status == cstype.StatusUnknown && o.Executed != nil {
		h.fatalf(t, "unknown proposal %s says executed=%v", p.ID, *o.Executed)
	}
	if p.Status.Terminal() && (p.Lease != nil || p.NextAttemptAt != nil) {
		h.fatalf(t, "terminal proposal %s still holds a lease or a next attempt", p.ID)
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}

// checkDecisions checks invariant 6 for one proposal.
func (h *propHarness) checkDecisions(t *rapid.T, p *cstype.Proposal) {
	if h.allowedRecord(p) {
		return // nobody decides an allowed write
	}
	rejections := 0
	_, byGrant := grantOf(p)
	if byGrant && len(p.Decisions) != 1 {
		// Approved at creation: later approvals are unchanged, rejections
		// conflicts; nothing is added to the grant's decision.
		h.fatalf(t, "proposal %s approved by a grant holds %d decisions: %+v", p.ID, len(p.Decisions), p.Decisions)
	}
	for i, d := range p.Decisions {
		if i == 0 && byGrant {
			if !d.At.Equal(p.CreatedAt) {
				h.fatalf(t, "proposal %s created at %v holds a grant decision taken at %v", p.ID, p.CreatedAt, d.At)
			}
			continue
		}
		if !mayDecide(p, d.Actor, d.Decision) {
			h.fatalf(t, "proposal %s holds a %s decision by %s via %q, who may not take it", p.ID, d.Decision, d.Actor, d.Via)
		}
		if d.Decision == cstype.VerdictRejected {
			rejections++
			if i != len(p.Decisions)-1 {
				h.fatalf(t, "proposal %s holds decisions after a rejection: %+v", p.ID, p.Decisions)
			}
		}
	}
	quorum := max(p.Quorum, 1)
	if want := max(h.rules[p.Action].Quorum, 1); quorum != want {
		h.fatalf(t, "proposal %s has quorum %d; its rule says %d", p.ID, quorum, want)
	}
	approvals := approvedBy(p)
	switch p.Status {
	case cstype.StatusApproved, cstype.StatusExecuting, cstype.StatusSucceeded, cstype.StatusFailed, cstype.StatusReconciling, cstype.StatusUnknown:
		if !quorumMet(p) {
			h.fatalf(t, "%s proposal %s has %d valid approvals, quorum %d, and no grant decision", p.Status, p.ID, approvals, quorum)
		}
		if rejections > 0 {
			h.fatalf(t, "%s proposal %s holds a rejection", p.Status, p.ID)
		}
	case cstype.StatusRejected:
		if rejections != 1 {
			h.fatalf(t, "rejected proposal %s holds %d rejections", p.ID, rejections)
		}
	case cstype.StatusPending:
		if approvals >= quorum || rejections > 0 || byGrant {
			h.fatalf(t, "pending proposal %s holds %d approvals (quorum %d), %d rejections, grant decision %v", p.ID, approvals, quorum, rejections, byGrant)
		}
	default: // superseded, cancelled, expired: never approved, or (expired) never claimed
		if byGrant {
			h.fatalf(t, "%s proposal %s was approved by a grant, and so claimed at once", p.Status, p.ID)
		}
	}
}

// checkExecutions checks invariant 2 over the Execute invocations of the step.
func (h *propHarness) checkExecutions(t *rapid.T, execs []execRec, byID map[string]*cstype.Proposal) {
	idempotent := map[string]bool{actTag: true}
	for _, x := range execs {
		h.opCounts[x.opID]++
		limit := 1
		if idempotent[x.action] {
			limit = propMaxAttempt
		}
		if n := h.opCounts[x.opID]; n > limit {
			h.fatalf(t, "operation %s of %s (proposal %q) executed %d times, limit %d", x.opID, x.action, x.proposalID, n, limit)
		}
		var key string
		if x.proposalID != "" {
			p := byID[x.proposalID]
			if p == nil {
				h.fatalf(t, "Execute for unlisted proposal %s", x.proposalID)
				continue
			}
			key = p.ThreadID + "/" + p.ToolCallID
		} else {
			// No rule allows an action outright, so nothing executes
			// without a proposal: not even a call a grant approved.
			h.fatalf(t, "operation %s of %s executed without a proposal", x.opID, x.action)
			if x.caller == nil {
				continue
			}
			key = x.caller.Thread + "/" + x.caller.Tool
		}
		ops := h.opsByCall[key]
		if ops == nil {
			ops = map[string]bool{}
			h.opsByCall[key] = ops
		}
		ops[x.opID] = true
		if len(ops) > 1 {
			h.fatalf(t, "tool call %s led to %d operations (%s): a repeated tool call executed again", key, len(ops), strings.Join(sortedKeys(ops), ", "))
		}
	}
	for _, p := range byID {
		if p.Status == cstype.StatusSucceeded && (p.Outcome == nil || p.Outcome.ResolvedBy == "") && h.opCounts[p.OperationID] == 0 {
			h.fatalf(t, "proposal %s succeeded without ever executing", p.ID)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkMessages checks invariant 4's outcome messages.
func (h *propHarness) checkMessages(t *rapid.T, ctx context.Context, cur []*cstype.Proposal) {
	type key struct {
		id     string
		status cstype.Status
	}
	count := map[key]int{}
	threads := map[string]bool{}
	for _, th := range []string{"t1", "t2"} {
		msgs, err := h.st.ListMessages(ctx, &store.ListMessagesParams{Tenant: propTenant, ThreadID: th})
		if errors.Is(err, cstype.ErrNotFound) {
			continue
		}
		if err != nil {
			h.fatalf(t, "ListMessages %s: %v", th, err)
		}
		threads[th] = true
		for _, m := range msgs {
			if m.Outcome == nil {
				h.fatalf(t, "message %s in %s carries no outcome", m.ID, th)
				continue
			}
			if m.Outcome.ProposalID != m.ProposalID || !m.Outcome.Status.Terminal() {
				h.fatalf(t, "message %s in %s carries outcome %s of %s", m.ID, th, m.Outcome.Status, m.Outcome.ProposalID)
			}
			count[key{m.ProposalID, m.Outcome.Status}]++
			if p := h.prevOrCur(cur, m.ProposalID); p == nil || p.ThreadID != th {
				h.fatalf(t, "message %s in %s for a proposal of another thread", m.ID, th)
			}
		}
	}
	for k, n := range count {
		if n > 1 {
			h.fatalf(t, "thread holds %d outcome messages for proposal %s %s", n, k.id, k.status)
		}
		p := h.prevOrCur(cur, k.id)
		if p == nil {
			continue
		}
		wasUnknown := slices.Contains(h.history[p.ID], cstype.StatusUnknown) || p.Status == cstype.StatusUnknown
		if k.status != p.Status && !(k.status == cstype.StatusUnknown && wasUnknown) {
			h.fatalf(t, "thread holds a %s outcome message for proposal %s, which is %s", k.status, p.ID, p.Status)
		}
	}
	// A thread deleted and created again holds the outcomes settled since.
	for _, th := range []string{"t1", "t2"} {
		if threads[th] && !h.threadAlive[th] {
			h.threadBorn[th] = h.step
		}
		h.threadAlive[th] = threads[th]
	}
	for _, p := range cur {
		if !p.Status.Terminal() || !threads[p.ThreadID] {
			continue
		}
		reached := h.reachedAt[p.ID]
		if old := h.prev[p.ID]; old == nil || old.Status != p.Status {
			reached = h.step
		}
		n, born := count[key{p.ID, p.Status}], h.threadBorn[p.ThreadID]
		switch {
		case reached > born && n != 1:
			h.fatalf(t, "%s proposal %s has %d outcome messages in its thread", p.Status, p.ID, n)
		case reached < born && n != 0:
			h.fatalf(t, "%s proposal %s, settled before its thread was deleted, has %d outcome messages in the new thread", p.Status, p.ID, n)
		}
	}
}

func (h *propHarness) prevOrCur(cur []*cstype.Proposal, id string) *cstype.Proposal {
	for _, p := range cur {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// checkGrants checks invariant 6's grants and the calls they approved.
func (h *propHarness) checkGrants(t *rapid.T, ctx context.Context, byID map[string]*cstype.Proposal) {
	gs, err := h.st.ListGrants(ctx, &store.ListGrantsParams{Tenant: propTenant})
	if err != nil {
		h.fatalf(t, "ListGrants: %v", err)
	}
	grants := map[string]*cstype.Grant{}
	for _, g := range gs {
		grants[g.ID] = g
		o := byID[g.OriginProposalID]
		if o == nil {
			h.fatalf(t, "grant %s originates in unknown proposal %s", g.ID, g.OriginProposalID)
			continue
		}
		if !slices.ContainsFunc(o.Decisions, func(d cstype.Decision) bool {
			return d.Actor == g.GrantedBy && d.Decision == cstype.VerdictApproved && d.Remember == g.Scope
		}) || !mayDecide(o, g.GrantedBy, countersign.Approve) || !slices.Contains(o.RememberScopes, g.Scope) {
			h.fatalf(t, "grant %s (%s by %s) has no matching allowed approval on %s", g.ID, g.Scope, g.GrantedBy, o.ID)
		}
		if g.ActivatedAt != nil && o.Status != cstype.StatusSucceeded {
			h.fatalf(t, "grant %s is active but its proposal %s is %s", g.ID, o.ID, o.Status)
		}
		if g.Requester != o.Requester || g.ThreadID != o.ThreadID || g.Action != o.Action || g.ActionVersion != o.ActionVersion ||
			(g.InputDigest != o.InputDigest && !(g.InputDigest == "" && o.GrantAnyInput)) ||
			(g.Scope == cstype.ScopeRun && g.RunID != o.RunID) {
			h.fatalf(t, "grant %s does not describe its proposal %s", g.ID, o.ID)
		}
	}
	// The calls of this step: a proposal created approved by a grant names a
	// grant that was live when it was created and matches its call; a
	// proposal created pending matches no grant that was live before the
	// step (and not revoked since).
	for _, p := range byID {
		if h.prev[p.ID] != nil {
			continue
		}
		if id, ok := grantOf(p); ok {
			g := grants[id]
			switch {
			case g == nil:
				h.fatalf(t, "proposal %s was approved by unknown grant %s", p.ID, id)
			case !g.Live(p.CreatedAt) || g.ActivatedAt.After(p.CreatedAt):
				h.fatalf(t, "proposal %s created at %v was approved by grant %s, not live then (activated %v, expires %v, revoked %v)",
					p.ID, p.CreatedAt, g.ID, g.ActivatedAt, g.ExpiresAt, g.RevokedAt)
			case !grantMatches(g, byID[g.OriginProposalID], p):
				h.fatalf(t, "proposal %s (%s %s %s/%s %s) was approved by grant %s that does not match it (%+v)",
					p.ID, p.Requester, p.Action, p.ThreadID, p.RunID, p.Input, g.ID, *g)
			}
			continue
		}
		for _, g := range h.grants {
			if g.Live(p.CreatedAt) && grants[g.ID] != nil && grants[g.ID].RevokedAt == nil && grantMatches(g, byID[g.OriginProposalID], p) {
				h.fatalf(t, "proposal %s was created %s, but grant %s was live and matches its call (%+v)", p.ID, p.Status, g.ID, *g)
			}
		}
	}
	h.grants = grants
}

// grantMatches reports whether grant g, which originates in proposal o,
// approves the call of proposal p (docs/design.md §5): same requester, thread,
// action and version; same run for a run grant; same input unless the rule
// let the grant cover any input.
func grantMatches(g *cstype.Grant, o, p *cstype.Proposal) bool {
	if g.Requester != p.Requester || g.ThreadID != p.ThreadID || g.Action != p.Action || g.ActionVersion != p.ActionVersion ||
		(g.Scope == cstype.ScopeRun && g.RunID != p.RunID) || (g.Scope != cstype.ScopeRun && g.Scope != cstype.ScopeThread) {
		return false
	}
	if g.InputDigest == "" {
		return o != nil && o.GrantAnyInput
	}
	return g.InputDigest == p.InputDigest && o != nil && string(o.Input) == string(p.Input)
}

// checkSupersede checks docs/design.md §2.7: a new proposal with a replacement key
// supersedes the pending proposals of the same requester, thread, action and
// key, and only those.
func (h *propHarness) checkSupersede(t *rapid.T, cur []*cstype.Proposal) {
	var created []*cstype.Proposal
	for _, p := range cur {
		if h.prev[p.ID] == nil {
			created = append(created, p)
		}
	}
	same := func(a, b *cstype.Proposal) bool {
		return a.ReplacementKey != "" && a.Requester == b.Requester && a.ThreadID == b.ThreadID &&
			a.Action == b.Action && a.ReplacementKey == b.ReplacementKey
	}
	for _, p := range cur {
		old := h.prev[p.ID]
		if old != nil && old.Status != cstype.StatusSuperseded && p.Status == cstype.StatusSuperseded &&
			!slices.ContainsFunc(created, func(n *cstype.Proposal) bool { return same(n, p) }) {
			h.fatalf(t, "proposal %s was superseded, but no proposal with its key %q was created", p.ID, p.ReplacementKey)
		}
		for _, n := range created {
			if n.ID != p.ID && same(n, p) && p.Status == cstype.StatusPending {
				h.fatalf(t, "new proposal %s left pending proposal %s with the same key %q", n.ID, p.ID, p.ReplacementKey)
			}
		}
	}
}

// checkReconcileBackoff checks Options.ReconcileBackoff: "the first pause
// before reconciling again after an unknown answer; it doubles". The outcome
// counts the unknown (or failed) answers, Outcome.Reconciles = n, and the next
// attempt is due ReconcileBackoff << (n-1) after the n-th (at most 2^10 times
// the first pause).
func (h *propHarness) checkReconcileBackoff(t *rapid.T, cur []*cstype.Proposal) {
	for _, p := range cur {
		old := h.prev[p.ID]
		if p.Status != cstype.StatusReconciling || p.NextAttemptAt == nil || p.Outcome == nil ||
			(old != nil && old.Version == p.Version) {
			continue
		}
		n := p.Outcome.Reconciles
		h.cov.add(fmt.Sprintf("reconcile unknown ×%d", n))
		if n < 1 {
			h.fatalf(t, "reconciling proposal %s waits for its next attempt, but its outcome counts %d unknown answers", p.ID, n)
			continue
		}
		if pause, want := p.NextAttemptAt.Sub(p.Outcome.At), propReconcileBackoff<<min(n-1, 10); pause != want {
			h.fatalf(t, "reconciling proposal %s waits %v after its unknown answer #%d, want %v", p.ID, pause, n, want)
		}
		if old == nil || old.Status != cstype.StatusReconciling || old.NextAttemptAt == nil || old.Outcome == nil {
			continue
		}
		if n <= old.Outcome.Reconciles {
			h.fatalf(t, "reconciling proposal %s counts %d unknown answers after another; it counted %d before", p.ID, n, old.Outcome.Reconciles)
		}
		if p.Outcome.At.Before(*old.NextAttemptAt) {
			h.fatalf(t, "reconciling proposal %s was reconciled again at %v, before its next attempt was due at %v", p.ID, p.Outcome.At, *old.NextAttemptAt)
		}
	}
}
