package storetest_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.FixedZone("X", 3600))
	c := storetest.NewClock(start)
	if got := c.Now(); !got.Equal(start) || got.Location() != time.UTC {
		t.Fatalf("Now = %v, want %v in UTC", got, start)
	}
	c.Advance(90 * time.Second)
	if got := c.Now(); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("Now after Advance = %v, want %v", got, start.Add(90*time.Second))
	}
}

func TestNewProposal(t *testing.T) {
	t.Parallel()
	a := storetest.NewProposal("acme", "t1", "call_1")
	b := storetest.NewProposal("acme", "t1", "call_1", func(p *store.Proposal) { p.Mode = store.ModeIndependent })
	if err := store.ValidateCreate(a); err != nil {
		t.Fatalf("NewProposal is not valid: %v", err)
	}
	if a.ID == b.ID || a.OperationID == b.OperationID || a.ConfirmationID == b.ConfirmationID {
		t.Errorf("ids repeat: %s/%s, %s/%s, %s/%s", a.ID, b.ID, a.OperationID, b.OperationID, a.ConfirmationID, b.ConfirmationID)
	}
	if b.Mode != store.ModeIndependent || a.Mode != store.ModeWait {
		t.Errorf("modes %s, %s; want wait, independent", a.Mode, b.Mode)
	}
}
