package pgstore

import (
	"sync"

	"github.com/countersign/countersign/store"
)

// rowMemorySize bounds the rows a Store remembers: enough for the proposals
// a busy process has in flight (each read before it is decided, claimed or
// settled), a few megabytes at most.
const rowMemorySize = 4096

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
type rowMemory struct {
	mu   sync.Mutex
	rows map[rowKey]*store.Proposal
	ring []rowKey // the keys in the order they came; a zero key is a free slot
	next int
}

type rowKey struct{ tenant, id string }

func newRowMemory(size int) *rowMemory {
	return &rowMemory{rows: make(map[rowKey]*store.Proposal, size), ring: make([]rowKey, size)}
}

// get returns a copy of the remembered row, or nil.
func (m *rowMemory) get(tenant, id string) *store.Proposal {
	m.mu.Lock()
	p := m.rows[rowKey{tenant, id}]
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Clone()
}

// put remembers a copy of p, unless a newer version of it is remembered.
func (m *rowMemory) put(p *store.Proposal) {
	c := p.Clone()
	k := rowKey{c.Tenant, c.ID}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.rows[k]; ok {
		if old.Version <= c.Version {
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

// putAll remembers each of ps.
func (m *rowMemory) putAll(ps []*store.Proposal) {
	for _, p := range ps {
		m.put(p)
	}
}

// len returns the number of rows remembered.
func (m *rowMemory) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows)
}
