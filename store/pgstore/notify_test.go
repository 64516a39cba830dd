package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// received is one notification and when it arrived.
type received struct {
	store.Notification
	at time.Time
}

// listener collects the notifications of a Store's Listen.
type listener struct {
	mu   sync.Mutex
	got  []received
	more chan struct{} // signalled on every notification
}

func (l *listener) notify(n store.Notification) {
	l.mu.Lock()
	l.got = append(l.got, received{n, time.Now()})
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
}

func (l *listener) all() []received {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]received(nil), l.got...)
}

// waitFor waits up to 10s for a notification that ok accepts.
func (l *listener) waitFor(t *testing.T, what string, ok func(received) bool) received {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, r := range l.all() {
			if ok(r) {
				return r
			}
		}
		select {
		case <-l.more:
		case <-deadline:
			t.Fatalf("no %s notification within 10s; got %+v", what, l.all())
		}
	}
}

// listen starts s.Listen until the test ends, and waits until it listens.
func listen(t *testing.T, s *pgstore.Store, dsn string) *listener {
	t.Helper()
	l := &listener{more: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, l.notify) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	})
	waitListening(t, dsn, s.Schema(), 0)
	return l
}

// waitListening waits until a listener backend other than pid LISTENs on
// the schema's channel, and returns its pid.
func waitListening(t *testing.T, dsn, schema string, pid int) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for range 1000 {
		var got int
		err := conn.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN%' AND state = 'idle' AND pid <> $2`,
			"cs_listen_"+schema, pid).Scan(&got)
		if err == nil {
			return got
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the listener never LISTENed")
	return 0
}

func TestListen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dsn := openTestStore(t, nil)
	l := listen(t, s, dsn)

	// An independent approval: work, and the proposal's change.
	p := create(t, s, newProposal(time.Now(), independent), nil)
	if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: p.ID, Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "work", func(r received) bool { return r.Work })
	l.waitFor(t, "p:"+p.ID, func(r received) bool { return r.ProposalID == p.ID && r.Tenant == tenant })

	// A creation approved by a grant is work too.
	before := len(l.all())
	create(t, s, newProposal(time.Now(), independent), grant)
	l.waitFor(t, "work after a granted creation", func(r received) bool { return r.Work && len(l.all()) > before })

	// A rejection is a change, and no work.
	q := create(t, s, newProposal(time.Now()), nil)
	mark := time.Now()
	if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: q.ID, Actor: "bob", Verdict: store.VerdictRejected, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "p:"+q.ID, func(r received) bool { return r.ProposalID == q.ID })
	time.Sleep(100 * time.Millisecond)
	for _, r := range l.all() {
		if r.Work && r.at.After(mark) {
			t.Errorf("a rejection announced work")
		}
	}

	// A claim moves approved to executing: a change.
	claimed, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w", LeaseDuration: time.Minute, Limit: 10})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("ClaimBatch = %v, %v", claimed, err)
	}
	n := 0
	for _, r := range l.all() {
		if r.ProposalID == p.ID {
			n++
		}
	}
	l.waitFor(t, "p:"+p.ID+" after the claim", func(r received) bool {
		if r.ProposalID != p.ID {
			return false
		}
		n--
		return n < 0
	})
}

// TestWorkNotifyRateLimit: a burst of approvals costs a few NOTIFYs, and
// the last approval is announced.
func TestWorkNotifyRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const interval = 100 * time.Millisecond
	s, dsn := openTestStore(t, &pgstore.Options{NotifyInterval: interval})
	l := listen(t, s, dsn)

	const n = 100
	var ps []*store.Proposal
	for range n {
		ps = append(ps, create(t, s, newProposal(time.Now(), independent), nil))
	}
	start := time.Now()
	var (
		mu        sync.Mutex
		lastBegun time.Time
		wg        sync.WaitGroup
	)
	for w := range 10 {
		wg.Go(func() {
			for i := w; i < n; i += 10 {
				mu.Lock()
				lastBegun = time.Now()
				mu.Unlock()
				if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: ps[i].ID, Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	burst := time.Since(start)
	// Every approval is announced by a notification sent after it began.
	last := l.waitFor(t, "work after the last approval", func(r received) bool { return r.Work && r.at.After(lastBegun) })
	time.Sleep(3 * interval)
	work := 0
	for _, r := range l.all() {
		if r.Work {
			work++
		}
	}
	// About two per interval: one in a transaction, one trailing.
	limit := 2*int(burst/interval) + 3
	t.Logf("%d approvals in %v: %d work notifications (limit %d); the last %v after the last approval began",
		n, burst, work, limit, last.at.Sub(lastBegun))
	if work == 0 || work > limit || work >= n/4 {
		t.Errorf("%d work notifications for %d approvals in %v, want 1..%d", work, n, burst, min(limit, n/4-1))
	}
}

// TestListenReconnects: the listener's backend is terminated; Listen
// reconnects, says so with a work notification, and receives again.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, dsn := openTestStore(t, nil)
	l := listen(t, s, dsn)
	pid := waitListening(t, dsn, s.Schema(), 0)
	exec(t, dsn, `SELECT pg_terminate_backend($1)`, pid)

	l.waitFor(t, "work after the reconnection", func(r received) bool { return r.Work })
	waitListening(t, dsn, s.Schema(), pid)

	p := create(t, s, newProposal(time.Now()), nil)
	if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: p.ID, Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "p:"+p.ID+" after the reconnection", func(r received) bool { return r.ProposalID == p.ID })
}
