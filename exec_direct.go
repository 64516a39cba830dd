package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// executeDirect runs an allowed call that is not recorded (a read): no
// proposal, nothing settles. Authorization already ran; preflight and
// prepare still run. An uncertain outcome is routed as on every path (see
// routeUncertain); with nothing stored, a reconciliation that cannot tell
// answers unknown at once.
func (e *Engine) executeDirect(ctx context.Context, c *Call, a *Action, input json.RawMessage) (*Result, error) {
	var stateVersion string
	if _, done, err := e.preflight(ctx, c.Identity, a, input); err != nil || done != nil {
		return done, err
	}
	if a.hooks.Prepare != nil {
		prep, err := a.hooks.Prepare(ctx, &PrepareRequest{Identity: c.Identity, Action: a.name, Input: input})
		if err != nil {
			return nil, prepareErr(a, err)
		}
		stateVersion = prep.StateVersion
	}
	req := &ExecuteRequest{Identity: c.Identity, Action: a.name, ActionVersion: a.version, Input: input, OperationID: "op_" + newID(), StateVersion: stateVersion}
	succeeded := func(receipt string, result json.RawMessage) (*Result, error) {
		return &Result{Status: ResultSucceeded, Executed: ptr(true), Receipt: receipt, Result: result,
			Summary: store.DefaultSummary(a.name, cstype.StatusSucceeded, receiptDetail(receipt))}, nil
	}
	failed := func(executed bool, reason string) (*Result, error) {
		return &Result{Status: ResultFailed, Executed: ptr(executed), Error: reason,
			Summary: store.DefaultSummary(a.name, cstype.StatusFailed, reason)}, nil
	}
	for req.Attempt = 1; ; req.Attempt++ {
		began := time.Now()
		rec, err := a.hooks.Execute(ctx, req)
		if e.observer != nil {
			e.observer.Executed(a.name, time.Since(began), err)
		}
		var ne *notExecuted
		switch {
		case err == nil:
			if rec == nil {
				rec = &Receipt{}
			}
			return succeeded(rec.ID, rec.Result)
		case errors.As(err, &ne):
			return failed(false, ne.Error())
		case errors.Is(err, ErrNotApplied):
			return failed(true, err.Error())
		}
		switch routeUncertain(a, req.Attempt, e.maxAttempts) {
		case routeRetry:
			if ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(e.retryPause(req.Attempt)):
				}
			}
			if ctx.Err() == nil {
				e.observeRetried(a.name)
				continue
			}
			// The caller is gone: nobody waits for another attempt.
		case routeReconcile:
			r, rerr := a.hooks.Reconcile(context.WithoutCancel(ctx), &ReconcileRequest{Identity: c.Identity, Action: a.name, OperationID: req.OperationID})
			e.observeReconciled(a.name, r, rerr)
			switch {
			case rerr != nil:
			case r.Status == ReconcileApplied:
				return succeeded(r.Receipt, r.Result)
			case r.Status == ReconcileNotApplied:
				return failed(true, "reconciled: the operation was not applied")
			}
		}
		return &Result{Status: ResultUnknown, Error: err.Error(), Summary: store.DefaultSummary(a.name, cstype.StatusUnknown, "")}, nil
	}
}

func receiptDetail(id string) string {
	if id == "" {
		return ""
	}
	return "Receipt: " + id + "."
}
