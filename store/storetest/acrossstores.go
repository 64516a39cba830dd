package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// RunsAcrossStores checks, on stores that share one database (as processes
// do), that of messages posted at once through all of them only one starts
// a run, and that of claims of one parked run made at once through all of
// them only one resumes it. A durable driver calls it with two or more of
// its stores open on the same database.
func RunsAcrossStores(t *testing.T, stores ...store.Store) {
	t.Helper()
	if len(stores) < 2 {
		t.Fatal("RunsAcrossStores needs two stores or more")
	}
	ctx := context.Background()
	th := uniqueID("t-across")
	post := func(s store.Store, text string) (*store.PostMessageResult, error) {
		return s.PostMessage(ctx, &store.PostMessageParams{Owner: requester,
			Message: &store.Message{ID: uniqueID("msg"), Tenant: tenant, ThreadID: th, Role: store.RoleUser, Text: text, Sender: requester},
			Run:     newRun(), LeaseOwner: worker, LeaseDuration: time.Hour})
	}

	// Two messages at once, in as many processes: one run.
	const perStore = 8
	var (
		mu   sync.Mutex
		runs []*store.Run
		wg   sync.WaitGroup
	)
	for i, s := range stores {
		for j := range perStore {
			wg.Go(func() {
				res, err := post(s, fmt.Sprintf("m%d-%d", i, j))
				switch {
				case err == nil:
					mu.Lock()
					runs = append(runs, res.Run)
					mu.Unlock()
				case !errors.Is(err, store.ErrThreadBusy):
					t.Errorf("store %d: %v, want a run or THREAD_BUSY", i, err)
				}
			})
		}
	}
	wg.Wait()
	if len(runs) != 1 {
		t.Fatalf("%d runs started by concurrent messages, want 1", len(runs))
	}
	r := runs[0]

	// Park it on a proposal, decide the proposal elsewhere, and resume it
	// from every store at once: one does.
	p := NewProposal(tenant, th, uniqueID("call"), func(p *store.Proposal) {
		p.Requester = requester
		p.ExpiresAt = time.Now().Add(time.Hour)
	})
	if _, err := stores[0].CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[0].UpdateRun(ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r),
		To: store.RunParked, Awaiting: p.ID, ProposalIDs: []string{p.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[1].Decide(ctx, &store.DecideParams{Tenant: tenant, ID: p.ID, Actor: approver,
		Verdict: store.VerdictApproved, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	var claimed []*store.Run
	for i, s := range stores {
		for j := range perStore {
			wg.Go(func() {
				got, err := s.ClaimRuns(ctx, &store.ClaimRunsParams{Owner: fmt.Sprintf("w%d-%d", i, j), LeaseDuration: time.Hour, Limit: 4})
				if err != nil {
					t.Errorf("store %d: ClaimRuns: %v", i, err)
					return
				}
				mu.Lock()
				claimed = append(claimed, got...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if len(claimed) != 1 || claimed[0].ID != r.ID || claimed[0].Status != store.RunRunning {
		t.Fatalf("claims of one parked run: %v, want it resumed once", runIDs(claimed))
	}
}
