package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/store"
)

// This file holds SettleMany, the worker's group commit: the group's rows,
// remembered from their claims (see internal/rowmemory) or read in one statement, are
// settled by the rule (store.ApplySettle) and written by one compare-and-set
// statement (cas.go), events, outcome messages and grant activations
// included, whatever the group's size. A row that moved meanwhile (a
// renewal, a takeover) is read again and settled anew, in one more round
// trip for all such rows.

// sameOutcome reports whether a and b encode alike.
func sameOutcome(a, b *store.Outcome) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ProposalID == b.ProposalID && a.Status == b.Status && eqPtr(a.Executed, b.Executed) &&
		a.Receipt == b.Receipt && string(a.Result) == string(b.Result) && (a.Result == nil) == (b.Result == nil) &&
		eqPtr(a.Error, b.Error) && a.Summary == b.Summary && a.Note == b.Note && a.ResolvedBy == b.ResolvedBy &&
		a.Reconciles == b.Reconciles && dbTime(a.At).Equal(dbTime(b.At))
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// SettleMany implements store.Store; see the top of this file.
func (s *Store) SettleMany(ctx context.Context, params []*store.SettleParams) ([]*store.TransitionResult, []error, error) {
	results := make([]*store.TransitionResult, len(params))
	errs := make([]error, len(params))
	if len(params) == 0 {
		return results, errs, nil
	}
	// The items of each proposal, in order: a later item for the same
	// proposal sees the earlier one's result.
	var keys []rowKey
	items := map[rowKey][]int{}
	for i, sp := range params {
		k := rowKey{sp.Tenant, sp.ID}
		if _, ok := items[k]; !ok {
			keys = append(keys, k)
		}
		items[k] = append(items[k], i)
	}
	// cur holds each proposal as last known (nil: to be read); fresh marks
	// those read from the database in this call. A remembered row is the
	// memory's own (rowmemory's Shared): settleRow only reads it.
	cur := make(map[rowKey]*store.Proposal, len(keys))
	fresh := make(map[rowKey]bool, len(keys))
	for _, k := range keys {
		cur[k] = s.rows.Shared(k.tenant, k.id)
	}
	todo := keys
	for range maxCASAttempts {
		var tenants, ids []string
		for _, k := range todo {
			if cur[k] == nil {
				tenants, ids = append(tenants, k.tenant), append(ids, k.id)
				fresh[k] = true // absent from the answer: not found
			}
		}
		if len(ids) > 0 {
			rows, err := s.pool.Query(ctx, s.q.getMany, tenants, ids)
			if err != nil {
				return nil, nil, wrap("settle many", err)
			}
			ps, err := collectProposals(rows)
			if err != nil {
				return nil, nil, wrap("settle many", err)
			}
			for _, p := range ps {
				cur[rowKey{p.Tenant, p.ID}] = p
				s.rows.Put(p)
			}
		}
		now := s.clock()
		var ws []*rowWrite
		var again []rowKey
		for _, k := range todo {
			rw, ok, err := s.settleRow(cur[k], fresh[k], params, items[k], results, errs, now)
			switch {
			case err != nil:
				return nil, nil, wrap("settle many", err)
			case !ok:
				again = append(again, k) // refused on a remembered row: read it
			case rw != nil:
				ws = append(ws, rw)
			}
		}
		written, err := s.writeRows(ctx, ws)
		if err != nil {
			return nil, nil, wrap("settle many", err)
		}
		for j, rw := range ws {
			if !written[j] {
				again = append(again, rowKey{rw.p.Tenant, rw.p.ID}) // the row moved: read it again
			}
		}
		if len(again) == 0 {
			return results, errs, nil
		}
		for _, k := range again {
			cur[k], fresh[k] = nil, false
		}
		todo = again
	}
	return nil, nil, wrap("settle many", fmt.Errorf("rows changed by others %d times in a row: %w", maxCASAttempts, store.ErrConflict))
}

// settleRow settles the items of one proposal, base as last known (nil when
// it was read and is not there), in order, and returns the one write that
// records them all (nil when none changed it). ok is false when an item was
// refused on a remembered row, which may be stale: then nothing is
// recorded, and the caller reads the row and settles its items again.
func (s *Store) settleRow(base *store.Proposal, fresh bool, params []*store.SettleParams, idx []int,
	results []*store.TransitionResult, errs []error, now time.Time) (rw *rowWrite, ok bool, err error) {
	res := make([]*store.TransitionResult, len(idx))
	es := make([]error, len(idx))
	p := base
	var c *store.Change
	var seq []int
	var statuses []store.Status
	for j, i := range idx {
		sp := params[i]
		if p == nil {
			es[j] = wrap("settle", notFound(sp.ID))
			continue
		}
		w := p.Clone()
		ch, ferr := store.ApplySettle(w, sp, now)
		if ferr != nil {
			if !fresh {
				return nil, false, nil
			}
			es[j] = wrap("settle", ferr)
			res[j] = &store.TransitionResult{Proposal: p.Clone(), From: p.Status}
			continue
		}
		// Written once, in its last state, guarded by the version read.
		store.Finish(w, now)
		normalize(w)
		res[j] = &store.TransitionResult{Proposal: w, From: p.Status, Changed: true}
		c = mergeChanges(c, ch)
		for range ch.Events {
			seq, statuses = append(seq, i), append(statuses, w.Status)
		}
		// The next item works on a copy of w, so w, now its result, stays
		// as this item left it; the last w is also the row written, as
		// mutate's is.
		p = w
	}
	if c != nil {
		if rw, err = newRowWrite(base, p, c, 0); err != nil {
			return nil, false, err
		}
		rw.evSeq, rw.evStatus = seq, statuses
	}
	for j, i := range idx {
		results[i], errs[i] = res[j], es[j]
	}
	return rw, true, nil
}

// mergeChanges is the change of two transitions of one row written as one;
// a may be nil.
func mergeChanges(a, b *store.Change) *store.Change {
	if a == nil {
		return b
	}
	m := &store.Change{Events: append(slices.Clone(a.Events), b.Events...), Admit: a.Admit, Grant: a.Grant,
		ActivateGrants: a.ActivateGrants || b.ActivateGrants}
	if b.Admit != nil {
		m.Admit = b.Admit
	}
	if b.Grant != nil {
		m.Grant = b.Grant
	}
	return m
}
