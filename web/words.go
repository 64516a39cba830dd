package web

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
)

// The inbox's sentences about a proposal: what runs, what approving it does
// and until when, what became of it, and what remembering an approval
// covers. They are made here, from the proposal and the time, so that each
// is one tested function and the templates only place them.

// viaGrant is the channel of an approval a remembered approval gave.
const viaGrant = "grant"

// agent names the requester's agent: the caller that asked, and that runs
// a wait or two_phase proposal itself.
func agent(p *cstype.Proposal) string { return p.Requester + "'s agent" }

// executor says who executes p once it is approved.
func executor(p *cstype.Proposal) string {
	switch {
	case p.Mode.CallerExecutes():
		return agent(p)
	case grantApproved(p):
		// The calling agent claims a granted proposal at once; in
		// independent mode a worker may claim it first.
		return agent(p) + " or the Countersign worker, whichever claims it first"
	}
	return "the Countersign worker"
}

// grantApproved reports whether a remembered approval approved p.
func grantApproved(p *cstype.Proposal) bool {
	for _, d := range p.Decisions {
		if d.Via == viaGrant && d.Decision == cstype.VerdictApproved {
			return true
		}
	}
	return false
}

// whatRuns says in one sentence what runs, as whom, with which input, and
// who executes it.
func whatRuns(p *cstype.Proposal) string {
	return fmt.Sprintf("%s v%s runs as %s with the input below, executed by %s.", p.Action, p.ActionVersion, p.Requester, executor(p))
}

// clockTime is a deadline as the approver reads it: the time of day in UTC,
// with the date when it is not now's day. Seconds show only when there are
// some, so that "before 14:20 UTC" is never later than the deadline.
func clockTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	layout := "15:04 UTC"
	if t.Second() != 0 || t.Nanosecond() != 0 {
		layout = "15:04:05 UTC"
		t = t.Truncate(time.Second)
	}
	if ty, tm, td := t.Date(); ty != now.Year() || tm != now.Month() || td != now.Day() {
		layout = "2006-01-02 " + layout
	}
	return t.Format(layout)
}

// callsAgain is what the requester's agent must do to run an approved wait
// or two_phase proposal.
func callsAgain(p *cstype.Proposal) string {
	if p.Mode == cstype.ModeTwoPhase {
		return "confirms it by calling again"
	}
	return "calls again"
}

// didNotCall says that the agent did not do it (yet).
func didNotCall(p *cstype.Proposal) string {
	if p.Mode == cstype.ModeTwoPhase {
		return agent(p) + " did not confirm it"
	}
	return agent(p) + " did not call again"
}

// fate says what approving a pending proposal does and until when, or,
// once decided, which of the possible courses it took: queued, waiting for
// the agent, running, ran (and how that went), lapsed, or never to run.
func fate(p *cstype.Proposal, now time.Time) string {
	by := clockTime(p.ExpiresAt, now)
	late := !now.Before(p.ExpiresAt)
	var s string
	switch p.Status {
	case cstype.StatusPending:
		if late {
			return fmt.Sprintf("It was not approved before %s: it expires without running.", by)
		}
		lead := "Approving"
		if need := p.Quorum - p.Approvals(); need > 1 {
			lead = fmt.Sprintf("It needs %d more approvals; the last", need)
		}
		if p.Mode.CallerExecutes() {
			waiting := ""
			if p.Mode == cstype.ModeWait {
				waiting = " (at once, if it is still waiting)"
			}
			return fmt.Sprintf("%s lets it run when %s %s%s, before %s; otherwise it lapses and never runs.",
				lead, agent(p), callsAgain(p), waiting, by)
		}
		return fmt.Sprintf("%s queues it; %s runs it.", lead, executor(p))
	case cstype.StatusApproved:
		switch {
		case !p.Mode.CallerExecutes():
			s = fmt.Sprintf("Approved and queued: %s runs it. It has not run yet.", executor(p))
		case late:
			s = fmt.Sprintf("Approved, but %s before %s: it lapses without running.", didNotCall(p), by)
		default:
			s = fmt.Sprintf("Approved, not run yet: it runs when %s %s, before %s; otherwise it lapses.", agent(p), callsAgain(p), by)
		}
	case cstype.StatusExecuting:
		s = fmt.Sprintf("Running now, executed by %s.", executor(p))
	case cstype.StatusSucceeded, cstype.StatusFailed:
		s = settled(p)
	case cstype.StatusReconciling:
		s = "It ran, but its outcome is not known yet: Countersign is asking the system it changes what happened."
		if n := reconciles(p); n > 0 {
			s += " " + reconcileNote(p, n, now)
		}
	case cstype.StatusUnknown:
		s = "It ran, but its outcome is unknown: it may or may not have been applied. Do not retry automatically; an operator can check and record what happened."
	case cstype.StatusRejected:
		return "Rejected: it will not run."
	case cstype.StatusExpired:
		switch {
		case p.Outcome != nil && p.Outcome.Reason == cstype.ReasonNotCollected:
			// Approved, and only the agent's next call would have run it.
			return fmt.Sprintf("It lapsed: approved, but %s did not call again before %s, so it never ran.", agent(p), by)
		case p.Quorum > 0 && p.Approvals() >= p.Quorum:
			// Approved, and someone else was to run it (a waiting call, a
			// run), or it lapsed before outcomes had reasons.
			return fmt.Sprintf("It lapsed: approved, but it did not run before %s, so it never ran.", by)
		}
		return fmt.Sprintf("It expired: it was not approved before %s, so it never ran.", by)
	case cstype.StatusSuperseded:
		return fmt.Sprintf("Superseded by a newer request from %s: it will not run.", agent(p))
	case cstype.StatusCancelled:
		return "Cancelled: it will not run."
	default:
		return "Status " + string(p.Status) + "."
	}
	switch {
	case p.Quorum == 0:
		s = "The policy allowed it without a decision. " + s
	case grantApproved(p):
		s = "A remembered approval approved it. " + s
	}
	return s
}

// listNote is what the list says of a proposal beside its status: for an
// approval that has not run, what it waits for, and for one that lapsed,
// that it never ran; "" otherwise, the status saying enough.
func listNote(p *cstype.Proposal, now time.Time) string {
	switch {
	case p.Status == cstype.StatusApproved,
		p.Status == cstype.StatusExpired && p.Quorum > 0 && p.Approvals() >= p.Quorum:
		return fate(p, now)
	case p.Status == cstype.StatusReconciling && reconciles(p) > 0:
		return reconcileNote(p, reconciles(p), now)
	}
	return ""
}

// reconciles is how many times the backend's Reconcile answered unknown (or
// failed) for a proposal still reconciling.
func reconciles(p *cstype.Proposal) int {
	if p.Status != cstype.StatusReconciling || p.Outcome == nil {
		return 0
	}
	return p.Outcome.Reconciles
}

// reconcileNote tells the operator how long the backend has not known: the
// attempts that answered unknown, and when the next one is due (the pause
// doubles each time, up to a cap).
func reconcileNote(p *cstype.Proposal, n int, now time.Time) string {
	times := "once"
	if n > 1 {
		times = fmt.Sprintf("%d times", n)
	}
	s := fmt.Sprintf("Asked %s, the system could not say whether it was applied", times)
	if p.NextAttemptAt != nil {
		return fmt.Sprintf("%s; next attempt at %s.", s, clockTime(*p.NextAttemptAt, now))
	}
	return s + "."
}

// settled says how a succeeded or failed proposal ended.
func settled(p *cstype.Proposal) string {
	o := p.Outcome
	ok := p.Status == cstype.StatusSucceeded
	switch {
	case o != nil && o.ResolvedBy != "":
		if ok {
			return fmt.Sprintf("Its outcome was uncertain; %s checked and recorded that it was applied (succeeded).", o.ResolvedBy)
		}
		return fmt.Sprintf("Its outcome was uncertain; %s checked and recorded that it was not applied (failed).", o.ResolvedBy)
	case ok:
		return "It ran and succeeded."
	case o != nil && o.Executed != nil && !*o.Executed:
		return "It did not run: a check before running it failed."
	}
	return "It ran and failed."
}

// rememberChoice is one option of the remember fieldset.
type rememberChoice struct {
	Value cstype.Scope
	Label string
}

// rememberChoices words each scope the rule lets an approval remember. A
// grant covers identical requests only (the same requester, action,
// version and input), unless the rule widens it to any input.
func rememberChoices(p *cstype.Proposal, scopes []cstype.Scope) []rememberChoice {
	var out []rememberChoice
	for _, sc := range scopes {
		what := fmt.Sprintf("identical requests from %s (same action, same input)", agent(p))
		if p.GrantAnyInput {
			what = fmt.Sprintf("every %s request from %s, with any input,", p.Action, agent(p))
		}
		out = append(out, rememberChoice{Value: sc, Label: fmt.Sprintf("This and %s for the rest of this %s", what, sc)})
	}
	return out
}

// rememberNote says when a remembered approval starts, and how long it lasts.
func rememberNote(p *cstype.Proposal) string {
	s := "A remembered approval takes effect once this request has run and succeeded, and lasts until it is revoked"
	if p.GrantTTL > 0 {
		s += ", for at most " + span(p.GrantTTL)
	}
	return s + "."
}

// span words a duration in whole units: "1 hour", "90 minutes", "2 days".
func span(d time.Duration) string {
	unit := func(n int64, name string) string {
		if n == 1 {
			return "1 " + name
		}
		return fmt.Sprintf("%d %ss", n, name)
	}
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return unit(int64(d/(24*time.Hour)), "day")
	case d >= time.Hour && d%time.Hour == 0:
		return unit(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return unit(int64(d/time.Minute), "minute")
	case d >= time.Second:
		return unit(int64(d.Round(time.Second)/time.Second), "second")
	}
	return d.String()
}
