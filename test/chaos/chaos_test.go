package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/servetest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
)

// Environment that sizes and enables the runs.
const (
	// envFull runs the full size (make chaos): 3,000 approved calls per store.
	envFull = "CS_CHAOS_FULL"
	// envRestart enables TestChaosPostgreSQLRestart, which restarts the
	// shared PostgreSQL server: make test runs it on its own, after every
	// other package (test-pg-restart), so that no other test loses its
	// connections.
	envRestart = "CS_CHAOS_PG_RESTART"
)

// size is how much a run does.
type size struct {
	items   int           // calls made (90 % approved, 10 % rejected)
	span    time.Duration // over which the calls are spread, under faults
	clients int           // concurrent clients
	drain   time.Duration // bound on the drain after the faults are healed
}

func runSize() size {
	if os.Getenv(envFull) != "" {
		return size{items: 3334, span: 4 * time.Minute, clients: 16, drain: 5 * time.Minute}
	}
	if testing.Short() { // make test-short: a taste, without the check that every kind of fault came up
		return size{items: 100, span: 12 * time.Second, clients: 4, drain: 2 * time.Minute}
	}
	return size{items: 400, span: 35 * time.Second, clients: 8, drain: 2 * time.Minute}
}

func TestChaosSQLite(t *testing.T) { testChaos(t, sqliteSetup(t), 0) }

func TestChaosPostgreSQL(t *testing.T) { testChaos(t, postgresSetup(t), 0) }

// TestChaosPostgreSQLRestart is TestChaosPostgreSQL with PostgreSQL itself
// restarted (pg_ctlcluster restart) during the run, besides the other faults.
func TestChaosPostgreSQLRestart(t *testing.T) {
	if os.Getenv(envRestart) == "" {
		t.Skipf("set %s=1 to restart the shared PostgreSQL server (make test does, on its own)", envRestart)
	}
	restarts := 1
	if os.Getenv(envFull) != "" {
		restarts = 2
	}
	testChaos(t, postgresSetup(t), restarts)
}

func testChaos(t *testing.T, st storeSetup, restarts int) {
	sz := runSize()
	began := time.Now()
	bin := servetest.Build(t)
	be := newBackend(t, []byte("chaos-webhook-secret"))
	c := newCluster(t, bin, st.serveURL, st.workerURL, be, st.proxy)
	c.start()
	if t.Failed() {
		return
	}
	a := newAPI(c.base)
	items := newItems(sz.items)

	ctx, cancel := context.WithTimeout(context.Background(), sz.span+sz.drain+5*time.Minute)
	defer cancel()
	faultCtx, stopFaults := context.WithCancel(ctx)
	f := newFaults(t, c, st, restarts)
	faulted := make(chan struct{})
	go func() { defer close(faulted); f.run(faultCtx, sz.span) }()
	loadStart := time.Now()
	errs := drive(ctx, t, a, items, sz.clients, sz.span)
	loaded := time.Since(loadStart)
	stopFaults()
	<-faulted // healed: no partition, nobody stopped, every process started again

	if gone := c.exited(); len(gone) > 0 {
		t.Errorf("processes exited by themselves: %v", gone)
	}
	s, err := workload.OpenStore(ctx, st.spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	drainStart := time.Now()
	left := waitDrained(ctx, t, s, sz.drain)
	drained := time.Since(drainStart)

	r := check(t, s, be, items)
	r.name, r.restarts = st.name, restarts
	r.loaded, r.drained, r.total = loaded, drained, time.Since(began)
	r.faults, r.starts, r.errorLines = f.summary(), c.starts, c.errorLines()
	r.stats = a.stats
	t.Log(r.String())
	if lines := c.errorSample(5); len(lines) > 0 {
		t.Logf("the processes' first ERROR lines (of %d):\n%s", r.errorLines, strings.Join(lines, "\n"))
	}

	if left != nil {
		t.Errorf("not drained %v after the faults were healed: %v", sz.drain, left)
	}
	if len(errs) > 0 {
		t.Errorf("%d requests failed for a reason other than a fault, e.g. %s", len(errs), strings.Join(errs[:min(5, len(errs))], "; "))
	}
	if n := a.stats.internal.Load(); n > 0 {
		t.Errorf("%d answers were 500, e.g. %v", n, a.stats.internalBodies[:min(5, len(a.stats.internalBodies))])
	}
	if len(a.stats.other) > 0 {
		t.Errorf("unexpected statuses: %v", a.stats.other)
	}
	everyKind := r.faults[killServe] > 0 && r.faults[killWorker] > 0 && r.faults[stopWorker] > 0 && r.faults[stopServe] > 0 &&
		(st.proxy == nil || r.faults[partition] > 0)
	if !everyKind && !testing.Short() || r.faults[restartPG] != restarts {
		t.Errorf("faults %v: want every kind at least once (and %d restarts)", r.faults, restarts)
	}
}

// waitDrained polls until no proposal is approved, executing or
// reconciling, or limit passes; it returns the last count of those left
// (nil once drained).
func waitDrained(ctx context.Context, t *testing.T, s store.Store, limit time.Duration) map[store.Status]int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		left := map[store.Status]int{}
		all, err := proposals(ctx, s)
		if err == nil {
			for _, p := range all {
				if p.Status == store.StatusApproved || p.Status == store.StatusExecuting || p.Status == store.StatusReconciling {
					left[p.Status]++
				}
			}
			if len(left) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				t.Errorf("read the proposals: %v", err)
			}
			return left
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// proposals lists every proposal of the tenant.
func proposals(ctx context.Context, s store.Store) ([]*store.Proposal, error) {
	var out []*store.Proposal
	params := &store.ListProposalsParams{Tenant: tenant}
	for {
		page, err := s.ListProposals(ctx, params)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Proposals...)
		if page.Next == "" {
			return out, nil
		}
		params.After = page.Next
	}
}

// report is what a run did and found.
type report struct {
	name                    string
	restarts                int
	loaded, drained, total  time.Duration
	calls, approved, reject int // calls made; of them planned approved, rejected
	approvals               int // decisions answered applied (or unchanged, after a retry)
	waits                   int // approved calls in wait mode, executed by serve for the repeated call
	answers                 map[string]int
	statuses                map[store.Status]int
	unknownByAction         map[string]int
	unknownApplied          int // unknown proposals the backend did apply
	executions              int // operations the backend applied
	executes, replays       int64
	doubles                 int
	cancelled, late         int64    // executes cancelled before the effect; refused after a not_applied reconcile
	reconciles              [4]int64 // asked, applied, not applied, unknown
	faults                  map[string]int
	starts, errorLines      int
	stats                   *clientStats
}

func (r *report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos %s: %d calls (%d to approve, %d of them in wait mode, %d to reject), %d approvals stand (answers %v); load %v, drain %v, run %v\n",
		r.name, r.calls, r.approved, r.waits, r.reject, r.approvals, r.answers, r.loaded.Round(time.Millisecond), r.drained.Round(time.Millisecond), r.total.Round(time.Second))
	fmt.Fprintf(&b, "  statuses: %v; unknown by action: %v, of them applied by the backend: %d\n", r.statuses, r.unknownByAction, r.unknownApplied)
	fmt.Fprintf(&b, "  backend: %d executes received, %d applied, %d replays of the idempotent action, %d double executions, %d cancelled before the effect, %d refused as reconciled not applied; reconcile %d (applied %d, not applied %d, unknown %d)\n",
		r.executes, r.executions, r.replays, r.doubles, r.cancelled, r.late, r.reconciles[0], r.reconciles[1], r.reconciles[2], r.reconciles[3])
	fmt.Fprint(&b, "  faults:")
	for _, k := range sortedKeys(r.faults) {
		fmt.Fprintf(&b, " %s %d;", k, r.faults[k])
	}
	fmt.Fprintf(&b, " process starts %d, ERROR log lines (but 503s) %d\n", r.starts, r.errorLines)
	s := r.stats
	fmt.Fprintf(&b, "  clients: %d requests, %d 503, %d refused/reset, %d timed out, %d 429, %d 500",
		s.requests.Load(), s.unavailable.Load(), s.connErrors.Load(), s.timeouts.Load(), s.tooMany.Load(), s.internal.Load())
	return b.String()
}

// check compares the store's proposals with what the clients were told and
// what the backend applied.
func check(t *testing.T, s store.Store, be *backend, items []*item) *report {
	t.Helper()
	ctx := context.Background()
	all, err := proposals(ctx, s)
	if err != nil {
		t.Fatalf("read the proposals: %v", err)
	}
	ledger, doubles, _ := be.ledger(t)
	r := &report{calls: len(items), statuses: map[store.Status]int{}, unknownByAction: map[string]int{}, answers: map[string]int{},
		executions: len(ledger), executes: be.executes.Load(), replays: be.replays.Load(), doubles: doubles,
		cancelled: be.cancelled.Load(), late: be.late.Load(),
		reconciles: [4]int64{be.reconciles.Load(), be.reconcileApplied.Load(), be.reconcileNot.Load(), be.reconcileUnknown.Load()}}
	byID := map[string]*store.Proposal{}
	byOp := map[string]*store.Proposal{}
	for _, p := range all {
		byID[p.ID] = p
		byOp[p.OperationID] = p
		r.statuses[p.Status]++
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if doubles != 0 || be.doubles.Load() != 0 {
		bad("%d double executions of non-idempotent actions", doubles)
	}
	if n := be.badSignatures.Load() + be.badRequests.Load(); n != 0 {
		bad("%d requests to the backend with a bad signature or body", n)
	}
	if len(all) != len(items) {
		bad("%d proposals stored for %d calls", len(all), len(items))
	}
	for _, it := range items {
		if it.proposal == "" {
			continue // its call failed; counted with the errors
		}
		p := byID[it.proposal]
		if p == nil {
			bad("proposal %s of call %d is lost", it.proposal, it.n)
			continue
		}
		if it.plan == reject {
			r.reject++
			for _, answer := range it.answers {
				r.answers["reject "+answer]++
			}
			if p.Status != store.StatusRejected {
				bad("%s: %s, want rejected", p.ID, p.Status)
			}
			continue
		}
		r.approved++
		if it.wait {
			r.waits++
			switch {
			case it.seen == "":
				bad("%s: the waiting caller was never told an outcome", p.ID)
			case string(p.Status) != it.seen:
				bad("%s: the waiting caller was told %s, the proposal is %s", p.ID, it.seen, p.Status)
			case it.seen == "succeeded" && it.seenReceipt != ledger[p.OperationID].receipt:
				bad("%s: the waiting caller was told receipt %q, the backend's is %q", p.ID, it.seenReceipt, ledger[p.OperationID].receipt)
			}
		}
		for who, answer := range it.answers {
			r.answers[answer]++
			if answer != "applied" && answer != "unchanged" {
				bad("%s: %s's approval answered %s", p.ID, who, answer)
				continue
			}
			r.approvals++
			found := false
			for _, d := range p.Decisions {
				found = found || d.Actor == who && d.Decision == store.VerdictApproved
			}
			if !found {
				bad("%s: %s's approval (answered %s) is lost: decisions %+v", p.ID, who, answer, p.Decisions)
			}
		}
		if len(it.answers) == len(it.deciders) {
			switch p.Status {
			case store.StatusPending, store.StatusRejected, store.StatusExpired, store.StatusCancelled, store.StatusSuperseded:
				bad("%s: %s after %d approvals", p.ID, p.Status, len(it.answers))
			}
		}
	}
	for _, p := range all {
		e, executed := ledger[p.OperationID]
		switch p.Status {
		case store.StatusSucceeded:
			switch {
			case !executed:
				bad("%s (%s) succeeded, but the backend never applied %s", p.ID, p.Action, p.OperationID)
			case p.Outcome == nil || p.Outcome.Receipt != e.receipt:
				bad("%s (%s) succeeded with outcome %+v, the backend's receipt is %s", p.ID, p.Action, p.Outcome, e.receipt)
			}
		case store.StatusFailed, store.StatusRejected:
			if executed {
				bad("%s (%s) is %s, but the backend applied %s", p.ID, p.Action, p.Status, p.OperationID)
			}
		case store.StatusUnknown:
			r.unknownByAction[p.Action]++
			if executed {
				r.unknownApplied++
			}
		default:
			bad("%s (%s) left %s", p.ID, p.Action, p.Status)
		}
	}
	for op, e := range ledger {
		if byOp[op] == nil || byOp[op].ID != e.proposal {
			bad("the backend applied %s for %s, which no proposal holds", op, e.proposal)
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d problems, e.g.:\n%s", len(problems), strings.Join(problems[:min(20, len(problems))], "\n"))
	}
	return r
}
