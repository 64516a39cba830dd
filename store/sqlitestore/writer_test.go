package sqlitestore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWriterKeepsItsConnection checks that the writer runs every
// transaction on the one connection it holds, its statements prepared there
// once: a second write of the same statement prepares nothing new.
func TestWriterKeepsItsConnection(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := context.Background()
	ok := func() error { return nil }
	if err := s.write(ctx, metaWrite("first", ok)); err != nil {
		t.Fatal(err)
	}
	conn, prepared := s.w.conn, len(s.w.stmts)
	if conn == nil || prepared == 0 {
		t.Fatalf("after a write: connection %v, %d statements prepared; want the connection held and its statement prepared", conn, prepared)
	}
	if err := s.write(ctx, metaWrite("second", ok)); err != nil {
		t.Fatal(err)
	}
	if s.w.conn != conn || len(s.w.stmts) != prepared {
		t.Errorf("after the same write again: connection changed %v, %d statements prepared (was %d)", s.w.conn != conn, len(s.w.stmts), prepared)
	}
	for _, key := range []string{"first", "second"} {
		if !hasMeta(t, s, key) {
			t.Errorf("%s not stored", key)
		}
	}
}

// TestWriterReplacesALostConnection checks that the writer opens a new
// connection when database/sql no longer lets it use the one it held (a
// connection closed under it answers sql.ErrConnDone), and when it gave
// one up itself (discard): the next write runs, its statements prepared on
// the new connection.
func TestWriterReplacesALostConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ok := func() error { return nil }
	for _, c := range []struct {
		name string
		lose func(s *Store)
	}{
		{"closed under the writer", func(s *Store) { _ = s.w.conn.Close() }},
		{"discarded", func(s *Store) { s.w.discard(s.w.conn) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openInternal(t)
			if err := s.write(ctx, metaWrite("before", ok)); err != nil {
				t.Fatal(err)
			}
			old := s.w.conn
			c.lose(s)
			if err := s.write(ctx, metaWrite("after", ok)); err != nil {
				t.Fatalf("the write after the connection was lost: %v", err)
			}
			if s.w.conn == nil || s.w.conn == old {
				t.Error("the writer still holds the lost connection")
			}
			if _, ok := s.w.stmts[`INSERT INTO meta (key, value) VALUES (?, x'00')`]; !ok {
				t.Error("the write's statement is not prepared on the new connection")
			}
			if !hasMeta(t, s, "after") {
				t.Error("the write after the connection was lost is not stored")
			}
		})
	}
}

// TestWriterSurvivesAnEndedTransaction checks that a write function that
// ends the transaction under the group (which write forbids, and which
// fails its group's COMMIT) costs only its group: the next write begins,
// commits and is stored.
func TestWriterSurvivesAnEndedTransaction(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := context.Background()
	err := s.write(ctx, func(tx *wtx, _ time.Time) error {
		_, err := tx.ExecContext(ctx, "ROLLBACK")
		return err
	})
	if err == nil {
		t.Fatal("a write that rolled its transaction back succeeded; want its COMMIT to fail")
	}
	if err := s.write(ctx, metaWrite("after", func() error { return nil })); err != nil {
		t.Fatalf("the next write: %v", err)
	}
	if !hasMeta(t, s, "after") {
		t.Error("the next write is not stored")
	}
}

// TestWriterClosed checks that a write after Close fails, rather than
// opening the writer's connection again.
func TestWriterClosed(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err := s.write(context.Background(), metaWrite("late", func() error { return nil }))
	if !errors.Is(err, errWriterClosed) {
		t.Errorf("a write after Close: %v, want %v", err, errWriterClosed)
	}
}
