package countersign_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// workLog is a WorkObserver that records what it hears.
type workLog struct {
	mu     sync.Mutex
	events []string
}

func (l *workLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, s)
}

func (l *workLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.events, s)
}

func (l *workLog) Transition(*cstype.Proposal, cstype.Status) {}
func (l *workLog) Executed(string, time.Duration, error)      {}
func (l *workLog) LeaseLost(string)                           {}
func (l *workLog) Claimed(action string)                      { l.add("claimed " + action) }
func (l *workLog) Retried(action string)                      { l.add("retried " + action) }
func (l *workLog) Reconciled(action, outcome string)          { l.add("reconciled " + action + " " + outcome) }
func (l *workLog) Decided(v countersign.Verdict, via string) {
	l.add("decided " + string(v) + " " + via)
}

// plainObserver implements Observer only, as observers written before
// WorkObserver do.
type plainObserver struct{ transitions atomic.Int32 }

func (o *plainObserver) Transition(*cstype.Proposal, cstype.Status) { o.transitions.Add(1) }
func (o *plainObserver) Executed(string, time.Duration, error)      {}
func (o *plainObserver) LeaseLost(string)                           {}

// An Observer that is a WorkObserver hears the worker's claims, idempotent
// retries, reconcile attempts with their outcome, and decisions with their
// channel; a plain Observer keeps working.
func TestWorkObserverHearsClaimsRetriesReconcilesAndDecisions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		for _, plain := range []bool{false, true} {
			log, old := &workLog{}, &plainObserver{}
			var tries atomic.Int32
			h := newHarness(t, harnessOpts{open: open,
				engineOpts: func(o *countersign.Options) {
					o.Observer = log
					if plain {
						o.Observer = old
					}
				},
				actions: func(b *backend) []*countersign.Action {
					idem := refundSpec(b)
					idem.Name, idem.Idempotent = "payments.idempotent", true
					idem.Hooks.Execute = func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
						if tries.Add(1) == 1 {
							return nil, errUncertain
						}
						return b.execute(req)
					}
					recon := refundSpec(b)
					recon.Name = "payments.reconciled"
					recon.Hooks.Execute = func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
						return nil, errUncertain
					}
					recon.Hooks.Reconcile = func(context.Context, *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
						return nil, errors.New("the backend is down")
					}
					return []*countersign.Action{mustAction(t, idem), mustAction(t, recon)}
				}})
			for i, action := range []string{"payments.idempotent", "payments.reconciled"} {
				c := refundCall("obs_"+action, countersign.ModeIndependent, `{"amount":40,"customer":"c_`+string(rune('a'+i))+`"}`)
				c.Action = action
				res := h.call(c)
				via := []string{"web", "cli"}[i]
				if _, err := h.engine.Decide(context.Background(), &countersign.Decision{Identity: tBob, ProposalID: res.ProposalID, Verdict: countersign.Approve, Via: via}); err != nil {
					t.Fatal(err)
				}
			}
			w, err := h.engine.NewWorker(countersign.WorkerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := w.RunOnce(context.Background()); err != nil || n != 2 {
				t.Fatalf("worker: %d, %v", n, err)
			}
			if plain {
				if old.transitions.Load() == 0 {
					t.Fatal("a plain Observer heard no transitions")
				}
				continue
			}
			for _, want := range []string{
				"decided approved web", "decided approved cli",
				"claimed payments.idempotent", "claimed payments.reconciled",
				"retried payments.idempotent", "reconciled payments.reconciled error",
			} {
				if !log.has(want) {
					t.Errorf("the observer did not hear %q: %v", want, log.events)
				}
			}
		}
	})
}
