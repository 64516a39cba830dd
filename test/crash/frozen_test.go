package crash

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// freezePause is how long the worker pauses at its freeze point, for the
// test to stop it there.
const freezePause = 2 * time.Second

// testFrozen stops a worker process with SIGSTOP at the moment action names
// (freeze-before-execute: its claim made and the checks done, Execute about
// to begin; freeze-during-execute: Execute's side effect done, its answer
// not yet returned), keeps it stopped past its lease while another process
// takes the proposal over and settles it, then resumes it with SIGCONT. The
// resumed worker must neither execute (the ledger's unique key would record
// a second execution, and the first one never began) nor settle over the
// new holder (the proposal, its outcome and its events stay as the new
// holder left them).
func testFrozen(t *testing.T, b backend, action string, wantStatus store.Status, wantExecutions int) {
	st := b.open(t)
	ids := seed(t, st, 1)
	led, ledPath := newLedger(t, b)
	frozen := newCluster(t, b.storeSpec, ledPath, envAction+"="+action, envReconcile+"=1")
	frozen.start(0)
	select {
	case id := <-frozen.effects:
		if id != ids[0] {
			t.Fatalf("freeze point for %s, want %s", id, ids[0])
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker never reached the freeze point")
	}
	frozen.freeze(0)
	// On SQLite a process frozen inside a write transaction (its sweeper's,
	// its sealer's, a renewal) holds the database's write lock, and every
	// other process waits for it: nothing can take over until it resumes
	// or dies (docs/reliability.md). The test freezes it at its freeze
	// point but outside such a transaction: if the lock is held, it lets
	// the process run a moment and stops it again.
	for tries := 0; b.writeLocked != nil && b.writeLocked(t); tries++ {
		if tries == 50 {
			t.Fatal("the frozen worker holds the SQLite write lock at every try")
		}
		frozen.signal(0, syscall.SIGCONT)
		time.Sleep(5 * time.Millisecond)
		frozen.freeze(0)
	}
	stoppedAt := time.Now()
	ctx := context.Background()
	get := func() *store.Proposal {
		t.Helper()
		p, err := st.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: ids[0]})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := get(); p.Status != store.StatusExecuting {
		t.Fatalf("while frozen: %s, want executing", p.Status)
	}

	// Another process takes over once the lease lapses, reconciles (the
	// ledger says whether the side effect happened) and settles.
	healthy := newCluster(t, b.storeSpec, ledPath, envReconcile+"=1")
	healthy.start(0)
	settled := waitTerminal(t, st, ids[0], 2*time.Minute)
	if settled.Status != wantStatus {
		t.Fatalf("settled by the new holder as %s, want %s", settled.Status, wantStatus)
	}
	events := func() int {
		t.Helper()
		evs, err := st.ListEvents(ctx, &store.ListEventsParams{Tenant: tenant, ProposalID: ids[0]})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	before := events()
	frozenFor := time.Since(stoppedAt)

	frozen.signal(0, syscall.SIGCONT)
	// The resumed worker's paused call returns within freezePause; give it
	// a second more, and time for a settlement it might (wrongly) write.
	time.Sleep(freezePause + 2*time.Second)
	frozen.stopAll()
	healthy.stopAll()

	after := get()
	executions, violations := ledgerCounts(t, led)
	t.Logf("%s %s: frozen %v (lease %v); new holder settled %s; resumed worker wrote %d events; ledger %d rows",
		b.name, action, frozenFor.Round(time.Millisecond), lease, settled.Status, events()-before, executions)
	if violations != 0 || executions != wantExecutions {
		t.Errorf("ledger %d rows, %d violations; want %d, 0", executions, violations, wantExecutions)
	}
	if after.Status != settled.Status || after.Lease != nil && settled.Lease == nil || !after.UpdatedAt.Equal(settled.UpdatedAt) ||
		(after.Outcome == nil) != (settled.Outcome == nil) || after.Outcome != nil && after.Outcome.Receipt != settled.Outcome.Receipt {
		t.Errorf("the resumed worker changed the proposal: %+v, was %+v", after, settled)
	}
	if n := events(); n != before {
		t.Errorf("the resumed worker wrote %d events after the new holder settled", n-before)
	}
}

func TestFrozenWorkerSQLite(t *testing.T) {
	t.Run("BeforeExecute", func(t *testing.T) {
		testFrozen(t, sqliteBackend(t), "freeze-before-execute", store.StatusFailed, 0)
	})
	t.Run("DuringExecute", func(t *testing.T) {
		testFrozen(t, sqliteBackend(t), "freeze-during-execute", store.StatusSucceeded, 1)
	})
}

func TestFrozenWorkerPostgreSQL(t *testing.T) {
	t.Run("BeforeExecute", func(t *testing.T) {
		testFrozen(t, pgBackend(t), "freeze-before-execute", store.StatusFailed, 0)
	})
	t.Run("DuringExecute", func(t *testing.T) {
		testFrozen(t, pgBackend(t), "freeze-during-execute", store.StatusSucceeded, 1)
	})
}
