package rowmemory

import (
	"fmt"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
)

// TestBounded: the memory forgets its oldest rows past its size, and never
// replaces a row by an older version of it.
func TestBounded(t *testing.T) {
	t.Parallel()
	m := NewProposals(3)
	for i, id := range []string{"a", "b", "c", "d"} {
		m.Put(&store.Proposal{Tenant: "acme", ID: id, Version: int64(i + 1)})
	}
	if m.Len() != 3 || m.Get("acme", "a") != nil || m.Get("acme", "d") == nil {
		t.Errorf("after 4 puts in 3 slots: %d rows, a=%v d=%v; want 3, the first forgotten", m.Len(), m.Get("acme", "a"), m.Get("acme", "d"))
	}
	m.Put(&store.Proposal{Tenant: "acme", ID: "d", Version: 9})
	m.Put(&store.Proposal{Tenant: "acme", ID: "d", Version: 5})
	if got := m.Get("acme", "d"); got.Version != 9 {
		t.Errorf("d at version %d, want 9 (an older version does not replace a newer)", got.Version)
	}
	if got := m.Get("other", "d"); got != nil {
		t.Errorf("another tenant's d: %+v, want none", got)
	}
}

// TestCopies: neither what Put was given nor what Get returned is shared
// with the memory.
func TestCopies(t *testing.T) {
	t.Parallel()
	m := NewProposals(2)
	p := &store.Proposal{Tenant: "acme", ID: "a", Version: 3}
	m.Put(p)
	p.Version = 1
	got := m.Get("acme", "a")
	if got.Version != 3 {
		t.Fatalf("changing the row put changed the memory: version %d, want 3", got.Version)
	}
	got.Version = 1
	if m.Get("acme", "a").Version != 3 {
		t.Error("changing a remembered row's copy changed the memory")
	}

	r := NewRuns(1)
	r.Put(&store.Run{Tenant: "acme", ID: "run_a", Version: 2})
	r.Put(&store.Run{Tenant: "acme", ID: "run_b", Version: 1})
	if r.Get("acme", "run_a") != nil || r.Get("acme", "run_b") == nil {
		t.Error("a memory of one run kept the first and lost the second")
	}
}

// TestShared: Shared hands out the remembered row itself, which a later Put
// of a newer version replaces without changing.
func TestShared(t *testing.T) {
	t.Parallel()
	m := NewProposals(2)
	if got := m.Shared("acme", "a"); got != nil {
		t.Fatalf("Shared of a row never put: %+v, want nil", got)
	}
	p := &store.Proposal{Tenant: "acme", ID: "a", Version: 3, Status: store.StatusPending}
	m.Put(p)
	first := m.Shared("acme", "a")
	if first == nil || first == p || first.Version != 3 {
		t.Fatalf("Shared after Put: %p %+v, want the memory's copy of version 3 (not %p)", first, first, p)
	}
	if again := m.Shared("acme", "a"); again != first {
		t.Errorf("two Shared calls gave %p and %p, want the same remembered row", first, again)
	}
	if got := m.Get("acme", "a"); got == first {
		t.Error("Get returned the remembered row itself, want a copy")
	}
	m.Put(&store.Proposal{Tenant: "acme", ID: "a", Version: 4, Status: store.StatusApproved})
	if first.Version != 3 || first.Status != store.StatusPending {
		t.Errorf("a newer Put changed the row Shared had handed out: %+v", first)
	}
	if got := m.Shared("acme", "a"); got.Version != 4 {
		t.Errorf("Shared after the newer Put: version %d, want 4", got.Version)
	}
}

// TestConcurrent: many goroutines putting, getting and reading shared rows
// of the same keys keep each key at its newest version (run with -race).
func TestConcurrent(t *testing.T) {
	t.Parallel()
	m := NewProposals(16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range 200 {
				id := fmt.Sprint("p", v%8)
				m.Put(&store.Proposal{Tenant: "acme", ID: id, Version: int64(v*8 + g)})
				if p := m.Get("acme", id); p == nil {
					t.Errorf("%s forgotten in a memory of 16 holding 8", id)
					return
				}
				if p := m.Shared("acme", id); p == nil || p.ID != id {
					t.Errorf("Shared(%s) = %+v", id, p)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range 8 {
		id := fmt.Sprint("p", i)
		// The newest version put for id: the last round v with v%8 == i,
		// from the goroutine with the largest g.
		want := int64((192+i)*8 + 7)
		if got := m.Get("acme", id).Version; got != want {
			t.Errorf("%s at version %d, want the newest put, %d", id, got, want)
		}
	}
}
