package web

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
)

// wordsNow is the clock of the wording tests: 2026-12-01 14:05 UTC.
var wordsNow = time.Date(2026, 12, 1, 14, 5, 0, 0, time.UTC)

// proposalFor is a refund proposal by alice, expiring at 14:20 UTC.
func proposalFor(mode cstype.Mode, status cstype.Status, edit ...func(*cstype.Proposal)) *cstype.Proposal {
	p := &cstype.Proposal{
		ID: "prp_1", Tenant: "acme", Requester: "alice", ThreadID: "t1",
		Action: "payments.refund", ActionVersion: "1", Mode: mode, Status: status,
		Approvers: []string{"role:finance"}, Quorum: 1,
		ExpiresAt: time.Date(2026, 12, 1, 14, 20, 0, 0, time.UTC),
	}
	for _, e := range edit {
		e(p)
	}
	return p
}

var (
	approvedByBob = func(p *cstype.Proposal) {
		p.Decisions = append(p.Decisions, cstype.Decision{Actor: "bob", Decision: cstype.VerdictApproved, Via: "web"})
	}
	// notCollected: the approval lapsed waiting for the agent's next call.
	notCollected = func(p *cstype.Proposal) {
		p.Outcome = &cstype.Outcome{Status: cstype.StatusExpired, Executed: new(false), Reason: cstype.ReasonNotCollected}
	}
	executed = func(ran bool) func(*cstype.Proposal) {
		return func(p *cstype.Proposal) {
			p.Outcome = &cstype.Outcome{Status: p.Status, Executed: &ran}
		}
	}
)

// askedThrice: Reconcile answered unknown three times; the next attempt is
// due at 14:05:08 UTC.
func askedThrice(p *cstype.Proposal) {
	next := wordsNow.Add(8 * time.Second)
	p.Outcome, p.NextAttemptAt = &cstype.Outcome{Status: p.Status, Reconciles: 3}, &next
}

func TestFate(t *testing.T) {
	t.Parallel()
	late := wordsNow.Add(20 * time.Minute)
	for _, tc := range []struct {
		name string
		p    *cstype.Proposal
		now  time.Time
		want string
	}{
		{"wait pending", proposalFor(cstype.ModeWait, cstype.StatusPending), wordsNow,
			"Approving lets it run when alice's agent calls again (at once, if it is still waiting), before 14:20 UTC; otherwise it lapses and never runs."},
		{"two_phase pending", proposalFor(cstype.ModeTwoPhase, cstype.StatusPending), wordsNow,
			"Approving lets it run when alice's agent confirms it by calling again, before 14:20 UTC; otherwise it lapses and never runs."},
		{"independent pending", proposalFor(cstype.ModeIndependent, cstype.StatusPending), wordsNow,
			"Approving queues it; the Countersign worker runs it."},
		{"quorum of three, none yet", proposalFor(cstype.ModeIndependent, cstype.StatusPending, func(p *cstype.Proposal) { p.Quorum = 3 }), wordsNow,
			"It needs 3 more approvals; the last queues it; the Countersign worker runs it."},
		{"quorum of two, one in", proposalFor(cstype.ModeWait, cstype.StatusPending, approvedByBob, func(p *cstype.Proposal) { p.Quorum = 2 }), wordsNow,
			"Approving lets it run when alice's agent calls again (at once, if it is still waiting), before 14:20 UTC; otherwise it lapses and never runs."},
		{"pending past the deadline", proposalFor(cstype.ModeWait, cstype.StatusPending), late,
			"It was not approved before 14:20 UTC: it expires without running."},
		{"deadline with seconds, tomorrow", proposalFor(cstype.ModeTwoPhase, cstype.StatusPending, func(p *cstype.Proposal) {
			p.ExpiresAt = time.Date(2026, 12, 2, 9, 3, 7, 500, time.UTC)
		}), wordsNow,
			"Approving lets it run when alice's agent confirms it by calling again, before 2026-12-02 09:03:07 UTC; otherwise it lapses and never runs."},

		{"wait approved, agent not back", proposalFor(cstype.ModeWait, cstype.StatusApproved, approvedByBob), wordsNow,
			"Approved, not run yet: it runs when alice's agent calls again, before 14:20 UTC; otherwise it lapses."},
		{"two_phase approved", proposalFor(cstype.ModeTwoPhase, cstype.StatusApproved, approvedByBob), wordsNow,
			"Approved, not run yet: it runs when alice's agent confirms it by calling again, before 14:20 UTC; otherwise it lapses."},
		{"wait approved past the deadline", proposalFor(cstype.ModeWait, cstype.StatusApproved, approvedByBob), late,
			"Approved, but alice's agent did not call again before 14:20 UTC: it lapses without running."},
		{"independent approved", proposalFor(cstype.ModeIndependent, cstype.StatusApproved, approvedByBob), late,
			"Approved and queued: the Countersign worker runs it. It has not run yet."},
		{"wait executing", proposalFor(cstype.ModeWait, cstype.StatusExecuting, approvedByBob), wordsNow,
			"Running now, executed by alice's agent."},
		{"independent executing", proposalFor(cstype.ModeIndependent, cstype.StatusExecuting, approvedByBob), wordsNow,
			"Running now, executed by the Countersign worker."},
		{"succeeded", proposalFor(cstype.ModeWait, cstype.StatusSucceeded, approvedByBob, executed(true)), late,
			"It ran and succeeded."},
		{"failed after running", proposalFor(cstype.ModeIndependent, cstype.StatusFailed, approvedByBob, executed(true)), wordsNow,
			"It ran and failed."},
		{"failed before running", proposalFor(cstype.ModeIndependent, cstype.StatusFailed, approvedByBob, executed(false)), wordsNow,
			"It did not run: a check before running it failed."},
		{"resolved by an operator", proposalFor(cstype.ModeIndependent, cstype.StatusSucceeded, approvedByBob, func(p *cstype.Proposal) {
			p.Outcome = &cstype.Outcome{Status: cstype.StatusSucceeded, ResolvedBy: "olga"}
		}), wordsNow,
			"Its outcome was uncertain; olga checked and recorded that it was applied (succeeded)."},
		{"reconciling", proposalFor(cstype.ModeIndependent, cstype.StatusReconciling, approvedByBob), wordsNow,
			"It ran, but its outcome is not known yet: Countersign is asking the system it changes what happened."},
		{"reconciling, asked three times", proposalFor(cstype.ModeIndependent, cstype.StatusReconciling, approvedByBob, askedThrice), wordsNow,
			"It ran, but its outcome is not known yet: Countersign is asking the system it changes what happened. " +
				"Asked 3 times, the system could not say whether it was applied; next attempt at 14:05:08 UTC."},
		{"unknown", proposalFor(cstype.ModeIndependent, cstype.StatusUnknown, approvedByBob), wordsNow,
			"It ran, but its outcome is unknown: it may or may not have been applied. Do not retry automatically; an operator can check and record what happened."},
		{"wait lapsed", proposalFor(cstype.ModeWait, cstype.StatusExpired, approvedByBob, notCollected), late,
			"It lapsed: approved, but alice's agent did not call again before 14:20 UTC, so it never ran."},
		{"two_phase lapsed", proposalFor(cstype.ModeTwoPhase, cstype.StatusExpired, approvedByBob, notCollected), late,
			"It lapsed: approved, but alice's agent did not call again before 14:20 UTC, so it never ran."},
		{"lapsed, a run's (not awaiting the agent)", proposalFor(cstype.ModeWait, cstype.StatusExpired, approvedByBob), late,
			"It lapsed: approved, but it did not run before 14:20 UTC, so it never ran."},
		{"expired undecided", proposalFor(cstype.ModeWait, cstype.StatusExpired), late,
			"It expired: it was not approved before 14:20 UTC, so it never ran."},
		{"expired short of its quorum", proposalFor(cstype.ModeWait, cstype.StatusExpired, approvedByBob, func(p *cstype.Proposal) { p.Quorum = 2 }), late,
			"It expired: it was not approved before 14:20 UTC, so it never ran."},
		{"rejected", proposalFor(cstype.ModeWait, cstype.StatusRejected), wordsNow, "Rejected: it will not run."},
		{"superseded", proposalFor(cstype.ModeWait, cstype.StatusSuperseded), wordsNow,
			"Superseded by a newer request from alice's agent: it will not run."},
		{"cancelled", proposalFor(cstype.ModeWait, cstype.StatusCancelled), wordsNow, "Cancelled: it will not run."},
		{"allowed write", proposalFor(cstype.ModeWait, cstype.StatusSucceeded, executed(true), func(p *cstype.Proposal) {
			p.Quorum, p.Approvers = 0, []string{}
		}), wordsNow,
			"The policy allowed it without a decision. It ran and succeeded."},
		{"granted, independent, executing", proposalFor(cstype.ModeIndependent, cstype.StatusExecuting, func(p *cstype.Proposal) {
			p.Decisions = []cstype.Decision{{Actor: "grant:g1", Decision: cstype.VerdictApproved, Via: viaGrant}}
		}), wordsNow,
			"A remembered approval approved it. Running now, executed by alice's agent or the Countersign worker, whichever claims it first."},
	} {
		if got := fate(tc.p, tc.now); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestWhatRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode cstype.Mode
		want string
	}{
		{cstype.ModeIndependent, "payments.refund v1 runs as alice with the input below, executed by the Countersign worker."},
		{cstype.ModeWait, "payments.refund v1 runs as alice with the input below, executed by alice's agent."},
		{cstype.ModeTwoPhase, "payments.refund v1 runs as alice with the input below, executed by alice's agent."},
	} {
		if got := whatRuns(proposalFor(tc.mode, cstype.StatusPending)); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.mode, got, tc.want)
		}
	}
}

func TestRememberChoices(t *testing.T) {
	t.Parallel()
	scopes := func(p *cstype.Proposal) { p.RememberScopes = []cstype.Scope{cstype.ScopeRun, cstype.ScopeThread} }
	choices := func(p *cstype.Proposal) []rememberChoice { return rememberChoices(p, p.RememberScopes) }
	got := choices(proposalFor(cstype.ModeWait, cstype.StatusPending, scopes))
	want := []rememberChoice{
		{cstype.ScopeRun, "This and identical requests from alice's agent (same action, same input) for the rest of this run"},
		{cstype.ScopeThread, "This and identical requests from alice's agent (same action, same input) for the rest of this thread"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("identical input only:\n got %q\nwant %q", got, want)
	}
	wide := choices(proposalFor(cstype.ModeWait, cstype.StatusPending, scopes, func(p *cstype.Proposal) { p.GrantAnyInput = true }))
	if w := "This and every payments.refund request from alice's agent, with any input, for the rest of this thread"; len(wide) != 2 || wide[1].Label != w {
		t.Errorf("a rule that widens grants to any input:\n got %q\nwant %q", wide, w)
	}
	for _, c := range wide {
		if strings.Contains(c.Label, "identical") {
			t.Errorf("a grant of any input called identical: %q", c.Label)
		}
	}
	if got := choices(proposalFor(cstype.ModeWait, cstype.StatusPending)); len(got) != 0 {
		t.Errorf("a rule without remember scopes offers %q", got)
	}
}

func TestRememberNote(t *testing.T) {
	t.Parallel()
	for ttl, want := range map[time.Duration]string{
		0:                       "A remembered approval takes effect once this request has run and succeeded, and lasts until it is revoked.",
		time.Hour:               "A remembered approval takes effect once this request has run and succeeded, and lasts until it is revoked, for at most 1 hour.",
		90 * time.Minute:        "A remembered approval takes effect once this request has run and succeeded, and lasts until it is revoked, for at most 90 minutes.",
		48 * time.Hour:          "A remembered approval takes effect once this request has run and succeeded, and lasts until it is revoked, for at most 2 days.",
		1500 * time.Millisecond: "A remembered approval takes effect once this request has run and succeeded, and lasts until it is revoked, for at most 2 seconds.",
	} {
		if got := rememberNote(proposalFor(cstype.ModeWait, cstype.StatusPending, func(p *cstype.Proposal) { p.GrantTTL = ttl })); got != want {
			t.Errorf("TTL %v:\n got %q\nwant %q", ttl, got, want)
		}
	}
}

func TestClockTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 12, 1, 14, 20, 0, 0, time.UTC), "14:20 UTC"},
		{time.Date(2026, 12, 1, 14, 20, 45, 900, time.UTC), "14:20:45 UTC"},
		{time.Date(2026, 12, 1, 15, 20, 0, 0, time.FixedZone("CET", 3600)), "14:20 UTC"},
		{time.Date(2026, 12, 2, 0, 1, 0, 0, time.UTC), "2026-12-02 00:01 UTC"},
		{time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC), "2026-11-30 23:59:59 UTC"},
	} {
		if got := clockTime(tc.at, wordsNow); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.at, got, tc.want)
		}
	}
}

func TestListNote(t *testing.T) {
	t.Parallel()
	late := wordsNow.Add(20 * time.Minute)
	for _, tc := range []struct {
		name string
		p    *cstype.Proposal
		now  time.Time
		want string
	}{
		{"pending: the countdown says enough", proposalFor(cstype.ModeWait, cstype.StatusPending), wordsNow, ""},
		{"wait approved", proposalFor(cstype.ModeWait, cstype.StatusApproved, approvedByBob), wordsNow,
			"Approved, not run yet: it runs when alice's agent calls again, before 14:20 UTC; otherwise it lapses."},
		{"independent approved", proposalFor(cstype.ModeIndependent, cstype.StatusApproved, approvedByBob), wordsNow,
			"Approved and queued: the Countersign worker runs it. It has not run yet."},
		{"lapsed", proposalFor(cstype.ModeTwoPhase, cstype.StatusExpired, approvedByBob, notCollected), late,
			"It lapsed: approved, but alice's agent did not call again before 14:20 UTC, so it never ran."},
		{"expired undecided", proposalFor(cstype.ModeWait, cstype.StatusExpired), late, ""},
		{"succeeded", proposalFor(cstype.ModeWait, cstype.StatusSucceeded, approvedByBob, executed(true)), late, ""},
		{"reconciling, not asked yet", proposalFor(cstype.ModeIndependent, cstype.StatusReconciling, approvedByBob), wordsNow, ""},
		{"reconciling, asked once", proposalFor(cstype.ModeIndependent, cstype.StatusReconciling, approvedByBob, func(p *cstype.Proposal) {
			p.Outcome = &cstype.Outcome{Status: cstype.StatusReconciling, Reconciles: 1}
		}), wordsNow, "Asked once, the system could not say whether it was applied."},
		{"reconciling, asked three times", proposalFor(cstype.ModeIndependent, cstype.StatusReconciling, approvedByBob, askedThrice), wordsNow,
			"Asked 3 times, the system could not say whether it was applied; next attempt at 14:05:08 UTC."},
		{"unknown: the attempts are over", proposalFor(cstype.ModeIndependent, cstype.StatusUnknown, approvedByBob, askedThrice), wordsNow, ""},
	} {
		if got := listNote(tc.p, tc.now); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
