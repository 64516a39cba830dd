package maintenance_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The services' tests drive each service through its test hook (Trigger)
// on real stores, and seed them through the engine, the way proposals are
// made in production.

var (
	alice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	bob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
)

// opener opens an empty store on a clock, closed when t ends.
type opener = teststores.Opener

// eachStore runs test on memory, SQLite and PostgreSQL, in parallel.
func eachStore(t *testing.T, test func(t *testing.T, open opener)) {
	t.Helper()
	teststores.Each(t, test)
}

func newClock() *storetest.Clock {
	return storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

type refundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

// newEngine is an engine on st and clock whose payments.refund asks
// finance under rules.
func newEngine(t *testing.T, st store.Store, clock *storetest.Clock, rules ...countersign.Rule) *countersign.Engine {
	t.Helper()
	a, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name:         "payments.refund",
		Confirmation: countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		Execute: func(context.Context, *countersign.ExecuteRequest, refundInput) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "rf"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		rules = []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			TTL: time.Hour, Mode: countersign.ModeIndependent}}
	}
	e, err := countersign.New(countersign.Options{Store: st, Now: clock.Now, Logger: discard(),
		Actions: []*countersign.Action{a}, Policy: &countersign.Policy{Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// propose makes a pending refund and returns it.
func propose(t *testing.T, e *countersign.Engine, toolCall string) *store.Proposal {
	t.Helper()
	res, err := e.Call(t.Context(), &countersign.Call{
		Identity: alice, ThreadID: "t1", ToolCallID: toolCall, Action: "payments.refund",
		Input: []byte(`{"amount": 40, "customer": "` + toolCall + `"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Proposal == nil || res.Proposal.Status != store.StatusPending {
		t.Fatalf("call: %+v; want a pending proposal", res)
	}
	return res.Proposal
}

func get(t *testing.T, st store.Store, id string) *store.Proposal {
	t.Helper()
	p, err := st.GetProposal(t.Context(), &store.GetProposalParams{Tenant: "acme", ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// triggered is a service with the test hook.
type triggered interface {
	maintenance.Service
	Trigger() <-chan error
}

// start runs s until the test ends, or until the function it returns is
// called, which waits for Run to return. It returns once s's first run is
// over.
func start(t *testing.T, s maintenance.Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("%s: Run returned %v, want context.Canceled", s.Name(), err)
		}
	})
	t.Cleanup(stop)
	if tr, ok := s.(triggered); ok {
		// The loop's first run comes at once; once a triggered run is over
		// it is too (a Reset timer delivers no stale tick), so the test's
		// own triggers are the only runs until the interval passes.
		_ = trigger(t, tr)
	}
	return stop
}

// trigger makes a running s run now and returns the run's error.
func trigger(t *testing.T, s triggered) error {
	t.Helper()
	select {
	case err := <-s.Trigger():
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: a triggered run did not finish within 30s", s.Name())
		return nil
	}
}

// changes records what a service reports through its Changed callback.
type changes struct {
	mu  sync.Mutex
	got []change
}

type change struct {
	id        string
	status    store.Status
	from      store.Status
	approvers []string
}

func (c *changes) changed(_ context.Context, p *store.Proposal, from store.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, change{id: p.ID, status: p.Status, from: from, approvers: p.Approvers})
}

// take returns the changes recorded since the last take.
func (c *changes) take() []change {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.got
	c.got = nil
	return got
}

// eventually polls cond until it holds, failing the test after 30s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("within 30s: %s", what)
		}
	}
}
