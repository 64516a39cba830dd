package pgstore

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/store"
)

// Grouped reads of proposals by id.
//
// The engine reads a proposal before each decision (to check who may
// decide it) and for each status a caller asks for; under load those reads
// are as many statements as the decisions. Concurrent GetProposal calls of
// one Store share statements (grouping.go) the way its transitions do: while
// maxReadsInFlight reads run, new ones queue and go as one statement (getMany).
// A queued read runs in a statement that starts after it was asked for, so
// it sees every write committed before it was asked: grouping changes no
// answer. A read that finds a statement free runs at once.

// maxReadsInFlight bounds the grouped read statements one Store runs at once.
const maxReadsInFlight = 4

// maxReadGroup bounds the proposals one grouped read asks for.
const maxReadGroup = 64

// proposalRead is one caller's read and its answer.
type proposalRead struct {
	tenant, id string
	p          *store.Proposal
	err        error
}

func newReadGrouper() *grouper[*proposalRead] {
	return &grouper[*proposalRead]{maxInFlight: maxReadsInFlight, maxGroup: maxReadGroup}
}

// readProposal reads one proposal, grouped with concurrent reads, and
// remembers it (see internal/rowmemory).
func (s *Store) readProposal(ctx context.Context, tenant, id string) (*store.Proposal, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &proposalRead{tenant: tenant, id: id}
	s.reads.do(r, func(group []*proposalRead) { s.runReadGroup(context.WithoutCancel(ctx), group) })
	return r.p, r.err
}

// runReadGroup reads the group's proposals in one statement and sets each
// read's answer.
func (s *Store) runReadGroup(ctx context.Context, group []*proposalRead) {
	if len(group) == 1 {
		r := group[0]
		r.p, r.err = s.queryProposal(ctx, "proposal "+r.id, s.q.getProposal, r.id, r.tenant)
		return
	}
	tenants, ids := make([]string, len(group)), make([]string, len(group))
	for i, r := range group {
		tenants[i], ids[i] = r.tenant, r.id
	}
	found := map[rowKey]*store.Proposal{}
	rows, err := s.pool.Query(ctx, s.q.getMany, tenants, ids)
	if err == nil {
		var ps []*store.Proposal
		ps, err = collectProposals(rows)
		for _, p := range ps {
			found[rowKey{p.Tenant, p.ID}] = p
		}
	}
	for _, r := range group {
		switch p := found[rowKey{r.tenant, r.id}]; {
		case err != nil:
			r.err = err
		case p == nil:
			r.err = fmt.Errorf("proposal %s: %w", r.id, store.ErrNotFound)
		default:
			// Each caller gets a copy of its own: a proposal asked for twice
			// in one group is not shared.
			r.p = p.Clone()
			s.rows.Put(p)
		}
	}
}
