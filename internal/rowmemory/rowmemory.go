package rowmemory

import (
	"sync"

	"github.com/countersign/countersign/store"
)

// Row is what a Memory holds: a pointer to a record that copies itself,
// with its key and its version.
type Row[R any] interface {
	comparable
	Clone() R
	Key() Key
	Version() int64
}

// Key names a row: its tenant and its id.
type Key struct{ Tenant, ID string }

// Memory remembers rows of one kind; it is safe for concurrent use.
type Memory[R Row[R]] struct {
	mu   sync.Mutex
	rows map[Key]R
	ring []Key // the keys in the order they came; a zero key is a free slot
	next int
}

// New returns a Memory of size rows (at least 1).
func New[R Row[R]](size int) *Memory[R] {
	size = max(size, 1)
	return &Memory[R]{rows: make(map[Key]R, size), ring: make([]Key, size)}
}

// Get returns a copy of the remembered row, if there is one.
func (m *Memory[R]) Get(tenant, id string) (R, bool) {
	m.mu.Lock()
	r, ok := m.rows[Key{tenant, id}]
	m.mu.Unlock()
	if !ok {
		var zero R
		return zero, false
	}
	return r.Clone(), true
}

// Shared returns the remembered row itself, not a copy, if there is one.
// It stays the memory's: the caller reads it and must neither modify it nor
// hand it to code that may. A remembered row is never changed once put (a
// newer version replaces it), so reading it needs no lock, and a caller
// that copies it before changing it saves Get's copy.
func (m *Memory[R]) Shared(tenant, id string) (R, bool) {
	m.mu.Lock()
	r, ok := m.rows[Key{tenant, id}]
	m.mu.Unlock()
	return r, ok
}

// Put remembers a copy of r, unless a newer version of it is remembered.
func (m *Memory[R]) Put(r R) {
	c := r.Clone()
	k := c.Key()
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.rows[k]; ok {
		if old.Version() <= c.Version() {
			m.rows[k] = c
		}
		return
	}
	if gone := m.ring[m.next]; gone != (Key{}) {
		delete(m.rows, gone)
	}
	m.ring[m.next] = k
	m.next = (m.next + 1) % len(m.ring)
	m.rows[k] = c
}

// Len returns the number of rows remembered.
func (m *Memory[R]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows)
}

// proposal and run give the store's records what a Memory needs.
type (
	proposal struct{ *store.Proposal }
	run      struct{ *store.Run }
)

func (p proposal) Clone() proposal { return proposal{p.Proposal.Clone()} }
func (p proposal) Key() Key        { return Key{p.Tenant, p.ID} }
func (p proposal) Version() int64  { return p.Proposal.Version }
func (r run) Clone() run           { return run{r.Run.Clone()} }
func (r run) Key() Key             { return Key{r.Tenant, r.ID} }
func (r run) Version() int64       { return r.Run.Version }

// Proposals remembers proposals; it speaks in *store.Proposal. Its zero
// value is not usable: make one with NewProposals.
type Proposals struct{ m *Memory[proposal] }

// NewProposals returns a memory of size proposals.
func NewProposals(size int) Proposals { return Proposals{New[proposal](size)} }

// Get returns a copy of the remembered proposal, or nil.
func (pm Proposals) Get(tenant, id string) *store.Proposal {
	r, ok := pm.m.Get(tenant, id)
	if !ok {
		return nil
	}
	return r.Proposal
}

// Shared returns the remembered proposal itself, or nil: read it, never
// modify it (see Memory.Shared).
func (pm Proposals) Shared(tenant, id string) *store.Proposal {
	r, _ := pm.m.Shared(tenant, id)
	return r.Proposal
}

// Put remembers a copy of p (see Memory.Put).
func (pm Proposals) Put(p *store.Proposal) { pm.m.Put(proposal{p}) }

// PutAll remembers a copy of each of ps.
func (pm Proposals) PutAll(ps []*store.Proposal) {
	for _, p := range ps {
		pm.Put(p)
	}
}

// Len returns the number of proposals remembered.
func (pm Proposals) Len() int { return pm.m.Len() }

// Runs remembers runs; it speaks in *store.Run. Make one with NewRuns.
type Runs struct{ m *Memory[run] }

// NewRuns returns a memory of size runs.
func NewRuns(size int) Runs { return Runs{New[run](size)} }

// Get returns a copy of the remembered run, or nil.
func (rm Runs) Get(tenant, id string) *store.Run {
	r, ok := rm.m.Get(tenant, id)
	if !ok {
		return nil
	}
	return r.Run
}

// Put remembers a copy of r (see Memory.Put).
func (rm Runs) Put(r *store.Run) { rm.m.Put(run{r}) }
