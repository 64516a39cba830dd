package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
)

// TestSampleSeesABackendWaitingForALock: one connection holds a table lock,
// another waits for it; the sampler reports the second's lock wait.
func TestSampleSeesABackendWaitingForALock(t *testing.T) {
	ctx := context.Background()
	holder, waiter, sampler := pgtest.Connect(t), pgtest.Connect(t), pgtest.Connect(t)
	// An advisory lock held by one and wanted by the other: the waiter
	// shows as Lock:advisory until the holder lets go. The key is the
	// test's own, so that no other test's lock gets in the way.
	key := rand.Int64()
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
		waited <- err
	}()
	var err error
	deadline := time.Now().Add(10 * time.Second)
	var s *samples
	for time.Now().Before(deadline) {
		sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		s, err = sample(sctx, sampler, 10*time.Millisecond)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if s.waits["Lock:advisory"] > 0 {
			break
		}
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if s.rounds == 0 || s.waits["Lock:advisory"] == 0 {
		t.Fatalf("samples %+v: want the waiter's Lock:advisory", s)
	}
	var out bytes.Buffer
	s.print(&out)
	if !strings.Contains(out.String(), "| Lock:advisory | ") {
		t.Errorf("the table does not name the wait:\n%s", out.String())
	}
}
