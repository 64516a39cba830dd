package pgstore

import (
	"sync"

	"github.com/countersign/countersign/store"
)

// rowMemorySize bounds the rows a Store remembers: enough for the proposals
// a busy process has in flight (each read before it is decided, claimed or
// settled), a few megabytes at most.
const rowMemorySize = 4096

// runMemorySize bounds the runs a Store remembers: the runs this process
// drives at once, with room to spare.
const runMemorySize = 1024

// rowMemory remembers the last version of each proposal this Store read or
// wrote, so that a transition can start from it instead of reading the row
// first: the engine reads a proposal before it decides it, a worker holds the
// row it claimed when it renews and settles it. A remembered row is only ever
// a guess. The compare-and-set write (cas.go) checks its version, so a row
// that another process changed costs one more round trip, never a wrong
// write; and an answer that writes nothing is always judged on a row read
// from the database (see Store.mutate). Readers never get a remembered row.
//
// Eviction is first in, first out, over a fixed ring of keys.
//
// Runs are remembered the same way (a run's steps are written by the
// process that holds it, right after it read the run), so the memory is
// generic over the row's type.
type rowMemory[R remembered[R]] struct {
	mu   sync.Mutex
	rows map[rowKey]R
	ring []rowKey // the keys in the order they came; a zero key is a free slot
	next int
}

// remembered is a row a rowMemory holds: a pointer to a record that copies
// itself, with a key and a version.
type remembered[R any] interface {
	comparable
	Clone() R
	key() rowKey
	version() int64
}

type rowKey struct{ tenant, id string }

// rememberedProposal and rememberedRun give the store's records what rowMemory needs.
type (
	rememberedProposal struct{ *store.Proposal }
	rememberedRun      struct{ *store.Run }
)

func (p rememberedProposal) Clone() rememberedProposal { return rememberedProposal{p.Proposal.Clone()} }
func (p rememberedProposal) key() rowKey               { return rowKey{p.Tenant, p.ID} }
func (p rememberedProposal) version() int64            { return p.Version }
func (r rememberedRun) Clone() rememberedRun           { return rememberedRun{r.Run.Clone()} }
func (r rememberedRun) key() rowKey                    { return rowKey{r.Tenant, r.ID} }
func (r rememberedRun) version() int64                 { return r.Version }

// proposalMemory remembers proposals; it speaks in *store.Proposal.
type proposalMemory struct {
	m *rowMemory[rememberedProposal]
}

func newRowMemory(size int) proposalMemory {
	return proposalMemory{newMemory[rememberedProposal](size)}
}

func (pm proposalMemory) get(tenant, id string) *store.Proposal {
	r, ok := pm.m.get(tenant, id)
	if !ok {
		return nil
	}
	return r.Proposal
}
func (pm proposalMemory) put(p *store.Proposal) { pm.m.put(rememberedProposal{p}) }
func (pm proposalMemory) putAll(ps []*store.Proposal) {
	for _, p := range ps {
		pm.put(p)
	}
}
func (pm proposalMemory) len() int { return pm.m.len() }

// runMemory remembers runs.
type runMemory struct{ m *rowMemory[rememberedRun] }

func newRunMemory(size int) runMemory { return runMemory{newMemory[rememberedRun](size)} }

func (rm runMemory) get(tenant, id string) *store.Run {
	r, ok := rm.m.get(tenant, id)
	if !ok {
		return nil
	}
	return r.Run
}
func (rm runMemory) put(r *store.Run) { rm.m.put(rememberedRun{r}) }

func newMemory[R remembered[R]](size int) *rowMemory[R] {
	return &rowMemory[R]{rows: make(map[rowKey]R, size), ring: make([]rowKey, size)}
}

// get returns a copy of the remembered row.
func (m *rowMemory[R]) get(tenant, id string) (R, bool) {
	m.mu.Lock()
	r, ok := m.rows[rowKey{tenant, id}]
	m.mu.Unlock()
	if !ok {
		var zero R
		return zero, false
	}
	return r.Clone(), true
}

// put remembers a copy of r, unless a newer version of it is remembered.
func (m *rowMemory[R]) put(r R) {
	c := r.Clone()
	k := c.key()
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.rows[k]; ok {
		if old.version() <= c.version() {
			m.rows[k] = c
		}
		return
	}
	if gone := m.ring[m.next]; gone != (rowKey{}) {
		delete(m.rows, gone)
	}
	m.ring[m.next] = k
	m.next = (m.next + 1) % len(m.ring)
	m.rows[k] = c
}

// len returns the number of rows remembered.
func (m *rowMemory[R]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows)
}
