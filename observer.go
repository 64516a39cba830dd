package countersign

import "time"

// WorkObserver is an Observer that also receives the worker's claims,
// idempotent retries, reconcile attempts and decisions. The engine calls
// these methods when its Options.Observer implements WorkObserver, so an
// Observer written before them keeps working. Like Observer's, they are
// called on the engine's paths: they must be fast and must not block.
type WorkObserver interface {
	Observer
	// Claimed reports a proposal of action that a worker claimed, to
	// execute it or to reconcile it.
	Claimed(action string)
	// Retried reports an idempotent action executed again, under the same
	// operation id, after an uncertain outcome.
	Retried(action string)
	// Reconciled reports one call of action's Reconcile hook and its
	// outcome: one of the ReconcileOutcome* values.
	Reconciled(action string, outcome string)
	// Decided reports a decision that applied (a partial approval towards a
	// quorum too), with its verdict and channel ("api", "web", "cli", …).
	Decided(verdict Verdict, via string)
}

// The outcomes Reconciled reports: the hook's answer, or
// ReconcileOutcomeError when it failed.
const (
	ReconcileOutcomeApplied    = string(ReconcileApplied)
	ReconcileOutcomeNotApplied = string(ReconcileNotApplied)
	ReconcileOutcomeUnknown    = string(ReconcileUnknown)
	ReconcileOutcomeError      = "error"
)

// workObserver is the engine's Observer as a WorkObserver, or nil.
func (e *Engine) workObserver() WorkObserver {
	o, _ := e.observer.(WorkObserver)
	return o
}

func (e *Engine) observeClaimed(action string) {
	if o := e.workObserver(); o != nil {
		o.Claimed(action)
	}
}

func (e *Engine) observeRetried(action string) {
	if o := e.workObserver(); o != nil {
		o.Retried(action)
	}
}

// observeReconciled reports a Reconcile call's answer r, or its error.
func (e *Engine) observeReconciled(action string, r *Reconciliation, err error) {
	o := e.workObserver()
	if o == nil {
		return
	}
	outcome := ReconcileOutcomeError
	if err == nil && r != nil {
		switch r.Status {
		case ReconcileApplied, ReconcileNotApplied:
			outcome = string(r.Status)
		default:
			outcome = ReconcileOutcomeUnknown
		}
	}
	o.Reconciled(action, outcome)
}

func (e *Engine) observeDecided(verdict Verdict, via string) {
	if o := e.workObserver(); o != nil {
		o.Decided(verdict, via)
	}
}

// SealObserver is an Observer that is also told when this process's audit
// sealer has chained every event committed so far (docs/audit.md). The
// engine calls it when its Options.Observer implements it; like
// Observer's methods, it must be fast and must not block.
type SealObserver interface {
	Observer
	// Sealed reports the time at which the audit chain held every event
	// committed until then. Only the process holding the sealing lease
	// reports it; the age of the newest report, across processes, is how
	// far the chain lags.
	Sealed(at time.Time)
}

func (e *Engine) observeSealed(at time.Time) {
	if o, ok := e.observer.(SealObserver); ok {
		o.Sealed(at)
	}
}
