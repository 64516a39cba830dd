package faultstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/countersign/countersign/internal/faultstore"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// claimed returns a fault store over a memory store holding one claimed
// proposal, and the claim.
func claimed(t *testing.T) (*faultstore.Store, *store.Claimed) {
	t.Helper()
	ctx := context.Background()
	fs := faultstore.New(memstore.New(nil))
	if _, err := workload.SeedApproved(ctx, fs, "a", "p", 1); err != nil {
		t.Fatal(err)
	}
	cl, err := fs.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w", LeaseDuration: time.Minute, Limit: 1})
	if err != nil || len(cl) != 1 {
		t.Fatalf("ClaimBatch = %v, %v", cl, err)
	}
	return fs, cl[0]
}

func renewParams(c *store.Claimed) *store.RenewLeaseParams {
	p := c.Proposal
	return &store.RenewLeaseParams{Tenant: p.Tenant, ID: p.ID, LeaseDuration: time.Minute,
		Fence: store.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}}
}

// The faults are taken in script order, the last one staying; each call is
// recorded with its deadline and the lease then in force.
func TestRenewalScript(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fs, c := claimed(t)
		refused := errors.New("refused")
		fs.SetRenewals(faultstore.Fault{Hang: true}, faultstore.Fault{Err: refused}, faultstore.Fault{Delay: time.Second})
		claimedUntil := c.Proposal.Lease.ExpiresAt

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		began := time.Now()
		if _, err := fs.RenewLease(ctx, renewParams(c)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a hanging renewal answered %v; want its deadline", err)
		}
		if _, err := fs.RenewLease(context.Background(), renewParams(c)); !errors.Is(err, refused) {
			t.Fatalf("a failing renewal answered %v", err)
		}
		// A slow answer: the renewal took effect at once.
		asked := time.Now()
		for range 2 {
			l, err := fs.RenewLease(context.Background(), renewParams(c))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := fs.Lease(c.Proposal.ID); !got.ExpiresAt.Equal(l.ExpiresAt) {
				t.Fatalf("Lease = %v; want the renewal's %v", got.ExpiresAt, l.ExpiresAt)
			}
		}
		if l, _ := fs.Lease(c.Proposal.ID); !l.ExpiresAt.Equal(asked.Add(time.Second).Add(time.Minute)) {
			t.Fatalf("the second slow renewal took effect at %v; want when it was asked, %v", l.ExpiresAt.Add(-time.Minute), asked.Add(time.Second))
		}

		r := fs.Renewals()
		if len(r) != 4 || fs.Calls("RenewLease") != 4 {
			t.Fatalf("%d renewals recorded, %d counted; want 4", len(r), fs.Calls("RenewLease"))
		}
		if !r[0].Deadline.Equal(began.Add(5*time.Second)) || !r[1].Deadline.IsZero() {
			t.Fatalf("deadlines %v, %v; want the first call's and none", r[0].Deadline, r[1].Deadline)
		}
		if !r[0].InForce.Equal(claimedUntil) || !r[3].InForce.Equal(r[2].Lease.ExpiresAt) {
			t.Fatalf("leases in force %v, %v; want the claim's, then the previous renewal's", r[0].InForce, r[3].InForce)
		}
		id := c.Proposal.ID
		want := []string{"claim " + id, "renew " + id + ": context deadline exceeded", "renew " + id + ": refused", "renew " + id + ": ok", "renew " + id + ": ok"}
		if ev := fs.Events(); !slices.Equal(ev, want) {
			t.Fatalf("events %q; want %q", ev, want)
		}
	})
}

// A gated renewal waits for its gate, and gives up when its context ends.
func TestRenewalGate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fs, c := claimed(t)
		gate := make(chan struct{})
		fs.SetRenewals(faultstore.Fault{Gate: gate})
		done := make(chan error)
		go func() {
			_, err := fs.RenewLease(context.Background(), renewParams(c))
			done <- err
		}()
		synctest.Wait()
		if n := len(fs.Renewals()); n != 0 {
			t.Fatalf("%d renewals answered before the gate opened", n)
		}
		close(gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		fs.SetRenewals(faultstore.Fault{Gate: make(chan struct{})})
		if _, err := fs.RenewLease(ctx, renewParams(c)); !errors.Is(err, context.Canceled) {
			t.Fatalf("a gated renewal with an ended context answered %v", err)
		}
	})
}

// Settlements are recorded with their fence and the store's answer, by
// Settle and by SettleMany item by item.
func TestSettlementsRecorded(t *testing.T) {
	t.Parallel()
	fs, c := claimed(t)
	p := c.Proposal
	fence := store.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}
	stale := store.Fence{Token: "stale", Generation: fence.Generation}
	ctx := context.Background()
	_, errs, err := fs.SettleMany(ctx, []*store.SettleParams{{Tenant: p.Tenant, ID: p.ID, Fence: stale, Status: store.StatusSucceeded}})
	if err != nil || !errors.Is(errs[0], store.ErrLeaseLost) {
		t.Fatalf("SettleMany with a stale fence = %v, %v", errs, err)
	}
	if _, err := fs.Settle(ctx, &store.SettleParams{Tenant: p.Tenant, ID: p.ID, Fence: fence, Status: store.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	s := fs.Settlements()
	if len(s) != 2 || s[0].Params.Fence != stale || !errors.Is(s[0].Err, store.ErrLeaseLost) || s[1].Params.Fence != fence || s[1].Err != nil {
		t.Fatalf("settlements %+v", s)
	}
	if ev := fs.Events(); ev[len(ev)-1] != fmt.Sprintf("settle %s succeeded: ok", p.ID) {
		t.Fatalf("events %q", ev)
	}
}
