package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// lookupBegin and lookupEnd bracket LookupCall's SELECTs in a read-only
// REPEATABLE READ transaction, inside the batch: under READ COMMITTED each
// statement would take a snapshot of its own, and a creation committing
// between the thread's SELECT and the tool call's would show its proposal
// without its thread.
const (
	lookupBegin = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
	lookupEnd   = `COMMIT`
)

// LookupCall implements store.Store: the SELECTs of GetThread,
// GetProposalByToolCall and, when asked, FindGrant, sent as one batch (one
// round trip) that begins and commits their transaction itself. Should a
// statement fail, the batch ends in an aborted transaction, and the pool
// destroys the connection rather than reuse it. Grant expiry is judged by
// the application's clock, as FindGrant judges it.
func (s *Store) LookupCall(ctx context.Context, params *store.LookupCallParams) (*store.CallLookup, error) {
	if err := store.ValidateLookupCallParams(params); err != nil {
		return nil, wrap("lookup call", err)
	}
	l := &store.CallLookup{}
	b := &pgx.Batch{}
	b.Queue(lookupBegin)
	b.Queue(s.q.getThread, params.Tenant, params.ThreadID).QueryRow(func(row pgx.Row) error {
		t := &store.Thread{Tenant: params.Tenant, ID: params.ThreadID}
		err := row.Scan(&t.Owner, &t.RunID, &t.CreatedAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		t.CreatedAt = t.CreatedAt.UTC()
		l.Thread = t
		return nil
	})
	b.Queue(s.q.getByToolCall, params.Tenant, params.ThreadID, params.ToolCallID).QueryRow(func(row pgx.Row) error {
		p, err := scanProposal(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		l.Proposal = p
		return err
	})
	if g := params.Grant; g != nil {
		b.Queue(s.q.findGrant, g.Tenant, g.Requester, g.Action, g.ActionVersion, g.ThreadID,
			g.InputDigest, g.RunID, s.clock(), g.RuleFingerprint).QueryRow(func(row pgx.Row) error {
			found, err := scanGrant(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			l.Grant = found
			return err
		})
	}
	b.Queue(lookupEnd)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, wrap("lookup call", err)
	}
	if l.Proposal != nil {
		// As queryProposal does, for the transition a replay may make
		// (see internal/rowmemory).
		s.rows.Put(l.Proposal)
	}
	return l, nil
}
