package countersign_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/testlog"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// downStore is a store that, while down is set, answers the calls of the
// worker's loops (claims, expiry and escalation sweeps, session sweeps, the
// sealer) as a store that cannot be reached does, and counts them.
type downStore struct {
	store.Store
	down  atomic.Bool
	calls atomic.Int64 // calls refused while down
}

var errDown = store.Unavailable(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))

func (d *downStore) refuse() bool {
	if d.down.Load() {
		d.calls.Add(1)
		return true
	}
	return false
}

func (d *downStore) ClaimBatch(ctx context.Context, p *store.ClaimBatchParams) ([]*store.Claimed, error) {
	if d.refuse() {
		return nil, errDown
	}
	return d.Store.ClaimBatch(ctx, p)
}

func (d *downStore) ExpireDue(ctx context.Context, p *store.ExpireDueParams) ([]*cstype.Proposal, error) {
	if d.refuse() {
		return nil, errDown
	}
	return d.Store.ExpireDue(ctx, p)
}

func (d *downStore) EscalateDue(ctx context.Context, p *store.ExpireDueParams) ([]*cstype.Proposal, error) {
	if d.refuse() {
		return nil, errDown
	}
	return d.Store.EscalateDue(ctx, p)
}

func (d *downStore) RemindDue(ctx context.Context, p *store.ExpireDueParams) ([]*cstype.Proposal, error) {
	if d.refuse() {
		return nil, errDown
	}
	return d.Store.RemindDue(ctx, p)
}

func (d *downStore) DeleteExpiredSessions(ctx context.Context, p *store.DeleteExpiredSessionsParams) (int, error) {
	if d.refuse() {
		return 0, errDown
	}
	return d.Store.DeleteExpiredSessions(ctx, p)
}

func (d *downStore) AcquireSealLease(ctx context.Context, p *store.AcquireSealLeaseParams) (*store.SealLease, error) {
	if d.refuse() {
		return nil, errDown
	}
	return d.Store.AcquireSealLease(ctx, p)
}

func (d *downStore) SealEvents(ctx context.Context, p *store.SealEventsParams) (*store.SealResult, error) {
	if d.refuse() {
		return nil, errDown
	}
	return d.Store.SealEvents(ctx, p)
}

// TestWorkerBacksOffDuringOutage runs a worker polling every 10ms through a
// 2s store outage: its loops (claims, and the periodic jobs: expiry,
// escalation, reminders, sessions, sealer) back off instead of asking at
// every poll, each logs the outage once and the return once, and once the
// store is back the work approved meanwhile is executed without a restart.
func TestWorkerBacksOffDuringOutage(t *testing.T) {
	t.Parallel()
	ds := &downStore{Store: memstore.New(nil)}
	var logs testlog.Buffer
	n := &noopAction{calls: map[string]int{}}
	e, err := countersign.New(countersign.Options{
		Store: ds, Actions: []*countersign.Action{n.action(t, "noop", false)}, Policy: independentRule(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond, LeaseDuration: 5 * time.Second,
		Sealer: countersign.SealerOptions{Interval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	ds.down.Store(true)
	const outage = 2 * time.Second
	time.Sleep(outage)
	// Approved while the worker's loops cannot reach the store (the calls
	// themselves go through: only the loops' calls are refused here).
	ids := approveMany(t, e, "noop", 3)
	time.Sleep(200 * time.Millisecond)
	refused := ds.calls.Load()
	ds.down.Store(false)
	back := time.Now()

	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, id := range ids {
		p, err := e.Wait(wctx, tAlice, id)
		if err != nil || p.Status != cstype.StatusSucceeded {
			t.Fatalf("proposal %s after the outage: %v, %v", id, p, err)
		}
	}
	resumed := time.Since(back)
	// Every loop notices the return within the backoff's cap.
	loops := []string{"worker", "expiry", "escalation", "reminders", "sessions", "sealer"}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && strings.Count(logs.String(), "the store is reachable again") < len(loops); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Without backing off, six loops polling every 10ms would have asked
	// some 6×2200/10 = 1,320 times. Doubling from 100ms to the 2s cap asks
	// about 6 times each.
	t.Logf("%d calls refused in %v of outage; work resumed %v after the store came back", refused, outage+200*time.Millisecond, resumed.Round(time.Millisecond))
	if refused > 10*int64(len(loops)) {
		t.Errorf("%d calls during the outage: the loops did not back off", refused)
	}
	out := logs.String()
	for _, loop := range loops {
		if c := strings.Count(out, "the store cannot be reached; backing off until it is back\" loop="+loop); c != 1 {
			t.Errorf("loop %s logged the outage %d times, want once:\n%s", loop, c, out)
		}
		if c := strings.Count(out, "the store is reachable again\" loop="+loop); c != 1 {
			t.Errorf("loop %s logged the return %d times, want once:\n%s", loop, c, out)
		}
	}
	if strings.Contains(out, "claim failed") || strings.Contains(out, " failed\" ") {
		t.Errorf("an outage was logged per attempt:\n%s", out)
	}
	if _, _, most := n.counts(); most != 1 {
		t.Errorf("an operation executed %d times", most)
	}
}
