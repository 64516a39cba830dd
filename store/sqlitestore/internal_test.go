package sqlitestore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

func openInternal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "i.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestVersionGuard checks that a write-back against a version that is no
// longer stored changes nothing and fails, rather than overwriting.
func TestVersionGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	p := &store.Proposal{
		ID: "prp_1", Tenant: "t", ThreadID: "th", ToolCallID: "c", Action: "a", Mode: store.ModeWait,
		Approvers: []string{"requester"}, Quorum: 1, ExpiresAt: time.Now().Add(time.Hour), OperationID: "op",
	}
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
		t.Fatal(err)
	}
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		w, err := getProposal(ctx, tx, "t", "prp_1")
		if err != nil {
			return err
		}
		w.Status = store.StatusCancelled
		return applyRow(ctx, tx, w, w.Version+1, &store.Change{}, now) // a stale version
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("write-back at a stale version: %v, want ErrConflict", err)
	}
	got, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "t", ID: "prp_1"})
	if err != nil || got.Status != store.StatusPending || got.Version != 1 {
		t.Fatalf("after the refused write: %+v, %v", got, err)
	}
}

// TestWritePanic checks that a panic inside a write transaction releases
// the writer connection.
func TestWritePanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	func() {
		defer func() { _ = recover() }()
		_ = s.write(ctx, func(*wtx, time.Time) error { panic("boom") })
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.EnsureThread(ctx, &store.EnsureThreadParams{Tenant: "t", ID: "th"}); err != nil {
		t.Fatalf("write after a panic: %v", err)
	}
}

// TestConnectionPragmas checks that the pragmas dsn asks for hold on the
// connections each pool opens: the writer durable, in WAL, with its
// savepoints' sub-journal in memory; the readers read-only.
func TestConnectionPragmas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	// The writer's connection is held by the writer: its pragmas are read
	// in a write.
	writer := func(q string) (got string, err error) {
		err = s.write(ctx, func(tx *wtx, _ time.Time) error { return tx.QueryRowContext(ctx, q).Scan(&got) })
		return got, err
	}
	reader := func(q string) (got string, err error) {
		return got, s.r.QueryRowContext(ctx, q).Scan(&got)
	}
	for _, c := range []struct {
		pool       string
		query      func(string) (string, error)
		name, want string
	}{
		{"writer", writer, "journal_mode", "wal"},
		{"writer", writer, "synchronous", "2"}, // FULL
		{"writer", writer, "temp_store", "2"},  // MEMORY
		{"writer", writer, "foreign_keys", "1"},
		{"reader", reader, "query_only", "1"},
		{"reader", reader, "synchronous", "2"},
		{"reader", reader, "temp_store", "0"}, // the default: a large sort may spill to a file
	} {
		got, err := c.query("PRAGMA " + c.name)
		if err != nil {
			t.Fatalf("%s: PRAGMA %s: %v", c.pool, c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: PRAGMA %s = %s, want %s", c.pool, c.name, got, c.want)
		}
	}
}
