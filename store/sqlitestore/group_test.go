package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	sqlite "modernc.org/sqlite"
)

// metaWrite is a write that stores key in the meta table, then answers with
// the error ret returns (nil, an error, or a *commitErr).
func metaWrite(key string, ret func() error) func(tx *wtx, now time.Time) error {
	return func(tx *wtx, now time.Time) error {
		if _, err := tx.ExecContext(context.Background(), `INSERT INTO meta (key, value) VALUES (?, x'00')`, key); err != nil {
			return err
		}
		return ret()
	}
}

func hasMeta(t *testing.T, s *Store, key string) bool {
	t.Helper()
	var v []byte
	err := s.r.QueryRow(`SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// queueBehind holds the writer with a write that waits for release, so that
// the writes started next queue up and run as one group.
func queueBehind(t *testing.T, s *Store) (release func(), wait func()) {
	t.Helper()
	held, rel := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.write(context.Background(), func(tx *wtx, now time.Time) error {
			close(held)
			<-rel
			return nil
		})
	}()
	<-held
	return func() { close(rel) }, func() {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

// waitQueued waits until n writes are queued behind the leader.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.queue.mu.Lock()
		got := len(s.queue.pending)
		s.queue.mu.Unlock()
		if got >= n {
			return
		}
	}
	t.Fatalf("fewer than %d writes queued", n)
}

// TestGroupCommitIsolatesWrites checks that the writes of one group stand
// or fall alone: a failed write rolls back only its own changes, a
// *commitErr write commits and reports its error, and a write whose context
// ended while it was queued neither runs nor blocks the others.
func TestGroupCommitIsolatesWrites(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	boom := errors.New("boom")
	kept := errors.New("kept")
	cancelled, cancel := context.WithCancel(context.Background())
	type result struct {
		key string
		err error
	}
	writes := []struct {
		key string
		ctx context.Context
		ret func() error
	}{
		{"ok1", context.Background(), func() error { return nil }},
		{"failed", context.Background(), func() error { return boom }},
		{"kept", context.Background(), func() error { return &commitErr{kept} }},
		{"cancelled", cancelled, func() error { return nil }},
		{"ok2", context.Background(), func() error { return nil }},
	}
	results := make(chan result, len(writes))
	for i, w := range writes {
		go func() {
			results <- result{w.key, s.write(w.ctx, metaWrite(w.key, w.ret))}
		}()
		waitQueued(t, s, i+1)
	}
	cancel()
	release()
	wait()
	got := map[string]error{}
	for range writes {
		r := <-results
		got[r.key] = r.err
	}
	for key, want := range map[string]struct {
		err    error
		stored bool
	}{
		"ok1": {nil, true}, "failed": {boom, false}, "kept": {kept, true}, "cancelled": {context.Canceled, false}, "ok2": {nil, true},
	} {
		if !errors.Is(got[key], want.err) || (want.err == nil && got[key] != nil) {
			t.Errorf("write %s: err %v, want %v", key, got[key], want.err)
		}
		if stored := hasMeta(t, s, key); stored != want.stored {
			t.Errorf("write %s: stored %v, want %v", key, stored, want.stored)
		}
	}
}

// TestGroupCommitRerun checks when a group runs again with savepoints: a
// group runs its writes bare, and only a write that fails after it changed
// rows (which only a savepoint could undo alone) makes the group roll back
// and run every write again, each in a savepoint. The writes that stand are
// stored once whichever way, and the failed write's rows are not.
func TestGroupCommitRerun(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, c := range []struct {
		name   string
		schema bool // the failing write is a writeSchema
		fail   func(tx *wtx) error
		reruns int64
	}{
		{"refused before any change", false, func(*wtx) error { return boom }, 0},
		{"failed on a constraint", false, func(tx *wtx) error {
			// ok1's key: the statement fails and changes nothing.
			_, err := tx.ExecContext(context.Background(), `INSERT INTO meta (key, value) VALUES ('ok1', x'00')`)
			return err
		}, 0},
		{"failed after a change", false, func(tx *wtx) error {
			if _, err := tx.ExecContext(context.Background(), `INSERT INTO meta (key, value) VALUES ('failed', x'00')`); err != nil {
				return err
			}
			return boom
		}, 1},
		{"panicked after a change", false, func(tx *wtx) error {
			if _, err := tx.ExecContext(context.Background(), `INSERT INTO meta (key, value) VALUES ('failed', x'00')`); err != nil {
				return err
			}
			panic(boom)
		}, 1},
		{"failed after a read", false, func(tx *wtx) error {
			var n int
			if err := tx.QueryRowContext(context.Background(), `SELECT count(*) FROM meta`).Scan(&n); err != nil {
				return err
			}
			return boom
		}, 0},
		{"failed after an update of no row", false, func(tx *wtx) error {
			if _, err := tx.ExecContext(context.Background(), `UPDATE meta SET value = x'01' WHERE key = 'none'`); err != nil {
				return err
			}
			return boom
		}, 0},
		{"failed after an update that returns its rows", false, func(tx *wtx) error {
			// A query that changes rows: wtx cannot read how many, and
			// counts it as a change.
			var key string
			if err := tx.QueryRowContext(context.Background(), `UPDATE meta SET value = x'01' WHERE key = 'ok1' RETURNING key`).Scan(&key); err != nil {
				return err
			}
			return boom
		}, 1},
		{"failed after two statements in one text", false, func(tx *wtx) error {
			// The second statement changes no row, and SQLite reports the
			// rows of the last: the first one's insert must count all the
			// same.
			if _, err := tx.ExecContext(context.Background(), `INSERT INTO meta (key, value) VALUES ('failed', x'00'); UPDATE meta SET value = x'01' WHERE key = 'none'`); err != nil {
				return err
			}
			return boom
		}, 1},
		{"schema write failed after its DDL", true, func(tx *wtx) error {
			// A CREATE TABLE changes no row, so the group could not tell
			// it from a refusal: the write's own savepoint undoes it.
			if _, err := tx.ExecContext(context.Background(), `CREATE TABLE failed_table (x INTEGER)`); err != nil {
				return err
			}
			return boom
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openInternal(t)
			release, wait := queueBehind(t, s)
			var runs sync.Map // key → *atomic.Int64
			counted := func(key string, fn func(tx *wtx, now time.Time) error) func(tx *wtx, now time.Time) error {
				n, _ := runs.LoadOrStore(key, new(atomic.Int64))
				return func(tx *wtx, now time.Time) error {
					n.(*atomic.Int64).Add(1)
					return fn(tx, now)
				}
			}
			ok := func() error { return nil }
			failing := counted("failed", func(tx *wtx, _ time.Time) error { return c.fail(tx) })
			writes := []func() error{
				func() error { return s.write(context.Background(), counted("ok1", metaWrite("ok1", ok))) },
				func() (err error) {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("panicked: %v", r)
						}
					}()
					if c.schema {
						return s.writeSchema(context.Background(), failing)
					}
					return s.write(context.Background(), failing)
				},
				func() error { return s.write(context.Background(), counted("ok2", metaWrite("ok2", ok))) },
			}
			errs := make([]chan error, len(writes))
			for i, w := range writes {
				errs[i] = make(chan error, 1)
				go func() { errs[i] <- w() }()
				waitQueued(t, s, i+1)
			}
			release()
			wait()
			for i, want := range []bool{true, false, true} {
				if err := <-errs[i]; (err == nil) != want {
					t.Errorf("write %d: err %v, want success %v", i, err, want)
				}
			}
			for _, key := range []string{"ok1", "ok2"} {
				if !hasMeta(t, s, key) {
					t.Errorf("%s not stored", key)
				}
			}
			if hasMeta(t, s, "failed") {
				t.Error("the failed write's row stands")
			}
			var tables int
			if err := s.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'failed_table'`).Scan(&tables); err != nil || tables != 0 {
				t.Errorf("the failed schema write's table: %d, %v", tables, err)
			}
			if got := s.groupReruns.Load(); got != c.reruns {
				t.Errorf("group reruns %d, want %d", got, c.reruns)
			}
			// The group stops at the write that needs undoing: the writes
			// before it run twice, those after it once.
			for key, want := range map[string]int64{"ok1": 1 + c.reruns, "failed": 1 + c.reruns, "ok2": 1} {
				n, _ := runs.Load(key)
				if got := n.(*atomic.Int64).Load(); got != want {
					t.Errorf("write %s ran %d times, want %d", key, got, want)
				}
			}
		})
	}
}

// TestGroupCommitSeesEarlierWrites checks that a write sees the writes
// grouped before it, as if they had committed one by one: the second insert
// of the same key fails on the primary key and rolls back alone.
func TestGroupCommitSeesEarlierWrites(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() { errs <- s.write(context.Background(), metaWrite("same", func() error { return nil })) }()
		waitQueued(t, s, i+1)
	}
	release()
	wait()
	var failed int
	for range 2 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 1 || !hasMeta(t, s, "same") {
		t.Fatalf("%d of 2 writes of one key failed, want 1, with the key stored", failed)
	}
}

// TestGroupCommitRace decides many proposals from many goroutines at once,
// several decisions per proposal, and checks that exactly one decision per
// proposal applied, that every applied decision is stored, and that a
// missing proposal fails alone.
func TestGroupCommitRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	const proposals, deciders = 40, 4
	for i := range proposals {
		p := &store.Proposal{
			ID: fmt.Sprintf("prp_%d", i), Tenant: "t", ThreadID: "th", ToolCallID: fmt.Sprint("c", i), Action: "a", Mode: store.ModeIndependent,
			Requester: "alice", Approvers: []string{"actor:bob", "actor:carol", "actor:dave", "actor:erin"}, Quorum: 1, ActionVersion: "1",
			Input: []byte(`{}`), RawInput: []byte(`{}`), InputDigest: "sha256:x", ExpiresAt: time.Now().Add(time.Hour),
			OperationID: fmt.Sprint("op", i), ConfirmationID: fmt.Sprint("cnf", i),
		}
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
	}
	actors := []string{"bob", "carol", "dave", "erin"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := map[string]int{}
	for i := range proposals + 5 { // five proposals that do not exist
		for d := range deciders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("prp_%d", i)
				res, err := s.Decide(ctx, &store.DecideParams{Tenant: "t", ID: id, Actor: actors[d], Verdict: store.VerdictApproved, Via: "api"})
				if i >= proposals {
					if !errors.Is(err, store.ErrNotFound) {
						t.Errorf("decide missing %s: %v, want not found", id, err)
					}
					return
				}
				if err != nil {
					t.Errorf("decide %s: %v", id, err)
					return
				}
				if res.Outcome == store.DecideApplied {
					mu.Lock()
					applied[id]++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for i := range proposals {
		id := fmt.Sprintf("prp_%d", i)
		p, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t", ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if applied[id] != 1 || p.Status != store.StatusApproved || len(p.Decisions) != 1 {
			t.Errorf("%s: %d applied, status %s, %d decisions; want 1, approved, 1", id, applied[id], p.Status, len(p.Decisions))
		}
	}
}

// TestGroupCommitPanic checks that a write that panics inside a group
// panics in its own caller only, rolls back alone, and leaves the writer
// free.
func TestGroupCommitPanic(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	errs := make(chan error, 2)
	panics := make(chan any, 1)
	go func() { errs <- s.write(context.Background(), metaWrite("before", func() error { return nil })) }()
	waitQueued(t, s, 1)
	go func() {
		defer func() { panics <- recover() }()
		_ = s.write(context.Background(), metaWrite("panicked", func() error { panic("boom") }))
	}()
	waitQueued(t, s, 2)
	go func() { errs <- s.write(context.Background(), metaWrite("after", func() error { return nil })) }()
	waitQueued(t, s, 3)
	release()
	wait()
	if p := <-panics; p != "boom" {
		t.Fatalf("the panicking caller recovered %v, want boom", p)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !hasMeta(t, s, "before") || !hasMeta(t, s, "after") || hasMeta(t, s, "panicked") {
		t.Fatal("want the writes around the panic stored and the panicking one rolled back")
	}
	if err := s.write(context.Background(), metaWrite("later", func() error { return nil })); err != nil {
		t.Fatal(err)
	}
}

// startWrite runs metaWrite(key) in its own goroutine and waits until it is
// queued behind the writer held by queueBehind.
func startWrite(t *testing.T, s *Store, ctx context.Context, queued int, fn func(tx *wtx, now time.Time) error) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- s.write(ctx, fn) }()
	waitQueued(t, s, queued)
	return errc
}

// heldWrite stores key, tells started, and returns once proceed is closed:
// the group it belongs to stays open, at that write, until then.
func heldWrite(key string, started chan<- struct{}, proceed <-chan struct{}) func(tx *wtx, now time.Time) error {
	return func(tx *wtx, now time.Time) error {
		if _, err := tx.ExecContext(context.Background(), `INSERT INTO meta (key, value) VALUES (?, x'00')`, key); err != nil {
			return err
		}
		close(started)
		<-proceed
		return nil
	}
}

// cancelInGroup queues three writes that commit as one group (the oldest
// leads it, its own write first), cancels the one at index cancelled —
// while its write runs and holds the group open there, or while it is still
// queued — and checks that it alone fails with its context's error and
// leaves nothing, while the others commit and succeed.
func cancelInGroup(t *testing.T, cancelled int, whileRunning bool) {
	t.Helper()
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, proceed := make(chan struct{}), make(chan struct{})
	keys := []string{"w0", "w1", "w2"}
	errs := make([]<-chan error, len(keys))
	for i, key := range keys {
		wctx, w := context.Background(), metaWrite(key, func() error { return nil })
		if i == cancelled {
			wctx = ctx
			if whileRunning {
				w = heldWrite(key, started, proceed)
			}
		}
		errs[i] = startWrite(t, s, wctx, i+1, w)
	}
	if !whileRunning {
		cancel()
	}
	release()
	wait()
	if whileRunning {
		<-started
		cancel()
		close(proceed)
	}
	for i, key := range keys {
		err := <-errs[i]
		switch {
		case i == cancelled && !errors.Is(err, context.Canceled):
			t.Errorf("%s (cancelled): err %v, want %v", key, err, context.Canceled)
		case i == cancelled && hasMeta(t, s, key):
			t.Errorf("%s (cancelled) was committed", key)
		case i != cancelled && err != nil:
			t.Errorf("%s: %v, want success", key, err)
		case i != cancelled && !hasMeta(t, s, key):
			t.Errorf("%s succeeded but was not committed", key)
		}
	}
}

// TestGroupCommitLeaderCancelled cancels the leader of a group while its
// own write runs.
func TestGroupCommitLeaderCancelled(t *testing.T) {
	t.Parallel()
	cancelInGroup(t, 0, true)
}

// TestGroupCommitLeaderCancelledQueued cancels the next group's leader
// while it is still queued: it fails alone, without running, and the group
// it then leads commits the others.
func TestGroupCommitLeaderCancelledQueued(t *testing.T) {
	t.Parallel()
	cancelInGroup(t, 0, false)
}

// TestGroupCommitMemberCancelled cancels a member in the middle of a group
// while its write runs: its write is rolled back to its savepoint.
func TestGroupCommitMemberCancelled(t *testing.T) {
	t.Parallel()
	cancelInGroup(t, 1, true)
}

// TestGroupCommitAloneCancelled cancels a write that runs alone, while it
// runs: nothing of it is committed, and it fails with the context's error.
func TestGroupCommitAloneCancelled(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := s.write(ctx, metaWrite("alone", func() error { cancel(); return nil }))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want %v", err, context.Canceled)
	}
	if hasMeta(t, s, "alone") {
		t.Fatal("a write cancelled while it ran was committed")
	}
}

// TestGroupCommitCancelRace runs many writes at once, a third of them
// cancelled from another goroutine at an arbitrary moment and a third
// cancelling themselves after their first statement, and checks that every
// write either succeeded and is stored in full or failed with its context's
// error and left nothing: no cancellation fails or loses another's write.
func TestGroupCommitCancelRace(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	const writes = 300
	errs := make([]error, writes)
	var wg sync.WaitGroup
	for i := range writes {
		ctx, cancel := context.WithCancel(context.Background())
		key := fmt.Sprint("w", i)
		fn := func(tx *wtx, now time.Time) error {
			for part := range 2 {
				if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, x'00')`, fmt.Sprint(key, "/", part)); err != nil {
					return err
				}
				if i%3 == 1 {
					cancel()
				}
			}
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			errs[i] = s.write(ctx, fn)
		}()
		if i%3 == 2 {
			wg.Add(1)
			go func() { defer wg.Done(); cancel() }()
		}
	}
	wg.Wait()
	var ok int
	for i, err := range errs {
		key := fmt.Sprint("w", i)
		first, second := hasMeta(t, s, key+"/0"), hasMeta(t, s, key+"/1")
		switch {
		case err == nil:
			ok++
			if !first || !second {
				t.Errorf("%s succeeded but stored %v, %v", key, first, second)
			}
		case errors.Is(err, context.Canceled):
			if first || second {
				t.Errorf("%s was cancelled but stored %v, %v", key, first, second)
			}
			if i%3 == 0 {
				t.Errorf("%s, never cancelled, failed: %v", key, err)
			}
		default:
			t.Errorf("%s: %v", key, err)
		}
	}
	if ok < writes/3 {
		t.Errorf("%d of %d writes succeeded, want at least the %d never cancelled", ok, writes, writes/3)
	}
}

// cancelDuring holds the cancel functions test_cancel_during(key) calls.
var cancelDuring sync.Map

func init() {
	// test_cancel_during(key) cancels the context registered for key from
	// inside a running statement, then gives the driver's watcher of that
	// context time to interrupt the statement, as a caller giving up at that
	// moment would.
	sqlite.MustRegisterScalarFunction("test_cancel_during", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if c, ok := cancelDuring.Load(args[0]); ok {
			c.(context.CancelFunc)()
			time.Sleep(20 * time.Millisecond)
		}
		return int64(1), nil
	})
}

// TestGroupCommitCancelledDuringStatement cancels a member of a group while
// one of its statements runs. SQLite answers an interrupted write by rolling
// back the whole transaction, so the statement must not be interrupted: the
// member fails alone with its context's error, and the writes before and
// after it in the group commit.
func TestGroupCommitCancelledDuringStatement(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	memberCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := t.Name()
	cancelDuring.Store(key, cancel)
	defer cancelDuring.Delete(key)
	// Many VM steps follow the cancellation, so an interrupt would land.
	slow := func(tx *wtx, now time.Time) error {
		_, err := tx.ExecContext(memberCtx, `INSERT INTO meta (key, value)
			WITH RECURSIVE c(n) AS (SELECT test_cancel_during(?) UNION ALL SELECT n+1 FROM c WHERE n < 10000)
			SELECT 'member', x'00' FROM (SELECT max(n) FROM c)`, key)
		return err
	}
	before := startWrite(t, s, context.Background(), 1, metaWrite("before", func() error { return nil }))
	member := startWrite(t, s, memberCtx, 2, slow)
	after := startWrite(t, s, context.Background(), 3, metaWrite("after", func() error { return nil }))
	release()
	wait()
	if err := <-member; !errors.Is(err, context.Canceled) {
		t.Errorf("member: err %v, want %v", err, context.Canceled)
	}
	for key, errc := range map[string]<-chan error{"before": before, "after": after} {
		if err := <-errc; err != nil {
			t.Errorf("%s: %v, want success", key, err)
		}
	}
	if hasMeta(t, s, "member") || !hasMeta(t, s, "before") || !hasMeta(t, s, "after") {
		t.Errorf("stored member %v, before %v, after %v; want false, true, true", hasMeta(t, s, "member"), hasMeta(t, s, "before"), hasMeta(t, s, "after"))
	}
}

// TestGroupCommitWorkerWritesFirst: writes queued with writeFirst (the
// worker's claims and settlements) run ahead of the writes queued before
// them, behind only the first writes queued earlier, and each caller
// still gets its own answer; a leader handed the lead behind them still
// runs its own write.
func TestGroupCommitWorkerWritesFirst(t *testing.T) {
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	var mu sync.Mutex
	var order []string
	rec := func(key string) func(tx *wtx, now time.Time) error {
		return metaWrite(key, func() error {
			mu.Lock()
			order = append(order, key)
			mu.Unlock()
			return nil
		})
	}
	var wg sync.WaitGroup
	queue := func(key string, first bool, queued int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			write := s.write
			if first {
				write = s.writeFirst
			}
			if err := write(context.Background(), rec(key)); err != nil {
				t.Error(key, err)
			}
		}()
		waitQueued(t, s, queued)
	}
	queue("a", false, 1)
	queue("b", false, 2)
	queue("claim1", true, 3)
	queue("c", false, 4)
	queue("claim2", true, 5)
	release()
	wait()
	wg.Wait()
	want := "claim1 claim2 a b c"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("writes ran in the order %q, want %q", got, want)
	}
	for _, k := range []string{"a", "b", "c", "claim1", "claim2"} {
		if !hasMeta(t, s, k) {
			t.Errorf("write %s did not commit", k)
		}
	}
}

// TestGroupCommitFirstWritesFillAGroup: more first writes than a group
// holds queue ahead of a write that was waiting; every one runs once and
// commits, the waiting one too.
func TestGroupCommitFirstWritesFillAGroup(t *testing.T) {
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 2*maxGroup+1)
	start := func(key string, first bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			write := s.write
			if first {
				write = s.writeFirst
			}
			errs <- write(context.Background(), metaWrite(key, func() error { return nil }))
		}()
	}
	start("waiting", false)
	waitQueued(t, s, 1)
	for i := range 2 * maxGroup {
		start(fmt.Sprint("first", i), true)
	}
	waitQueued(t, s, 2*maxGroup+1)
	release()
	wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 * maxGroup {
		if !hasMeta(t, s, fmt.Sprint("first", i)) {
			t.Fatalf("first%d did not commit", i)
		}
	}
	if !hasMeta(t, s, "waiting") {
		t.Fatal("the waiting write did not commit")
	}
}

// TestGroupCommitFirstWriteJoinsTheRunningGroup: a first write queued
// while a group of several writes runs is taken into that group and
// commits with it: when it runs, the group's earlier writes are not yet
// visible to readers (they have not committed), and it is done when the
// group is.
func TestGroupCommitFirstWriteJoinsTheRunningGroup(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	release, wait := queueBehind(t, s)
	running, unblock := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := s.write(context.Background(), metaWrite("x", func() error {
			close(running)
			<-unblock
			return nil
		})); err != nil {
			t.Error(err)
		}
	}()
	waitQueued(t, s, 1)
	go func() {
		defer wg.Done()
		if err := s.write(context.Background(), metaWrite("y", func() error { return nil })); err != nil {
			t.Error(err)
		}
	}()
	waitQueued(t, s, 2)
	release() // x and y now run as one group
	wait()
	<-running
	var sawX bool
	claimed := make(chan error, 1)
	go func() {
		claimed <- s.writeFirst(context.Background(), metaWrite("claim", func() error {
			sawX = hasMeta(t, s, "x")
			return nil
		}))
	}()
	waitQueued(t, s, 1)
	close(unblock)
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if sawX {
		t.Fatal("the first write ran after x committed: it waited for a group of its own")
	}
	for _, k := range []string{"x", "y", "claim"} {
		if !hasMeta(t, s, k) {
			t.Errorf("write %s did not commit", k)
		}
	}
}
