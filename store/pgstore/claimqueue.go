package pgstore

import (
	"time"

	"github.com/countersign/countersign/store"
)

// The claim queue (migration 0022, ADR 0050) holds a row for each proposal
// a worker may claim by its status (store.Claimable's statuses: approved
// and independent, executing, reconciling): what the claim's choice reads
// of it (status, lease expiry, next attempt) and its updated_at, the claim
// order. It lives beside proposals so that no index of proposals names a
// column that a claim, a lease renewal or a settlement changes; those
// updates are then HOT (written on the row's page, with no new index
// entry).
//
// Every statement that writes a proposal keeps its queue row in step, in
// the same statement: a creation or transition into one of those statuses
// inserts it, a write that stays in them updates it, one that leaves them
// deletes it (casStatement, insertStatement, claimBatchSQL). Every pgstore
// test's store is checked against the invariant when it closes
// (checkSideTables, conformance_test.go), the conformance suite's included;
// TestClaimQueueUpgrade checks the migration's rows.

// claimQueueColumns are the claim queue's columns, all of them proposals'.
const claimQueueColumns = `id, tenant, status, lease_expires_at, next_attempt_at, updated_at`

// queued reports whether a proposal of this status and mode belongs in the
// claim queue.
func queued(status store.Status, mode store.Mode) bool {
	switch status {
	case store.StatusApproved:
		return mode == store.ModeIndependent
	case store.StatusExecuting, store.StatusReconciling:
		return true
	}
	return false
}

// claimQueueCTEs writes, after the CTE upd (a proposal UPDATE returning the
// claim queue's columns), the claim queue rows of ws: inserted for the rows
// that enter the queue, updated to the row as written for those that stay
// in it, deleted for those that leave it. A queue row is found by its key,
// the proposal's id and the updated_at the write replaces (a row upd
// wrote had the version, so the updated_at, that the write was prepared
// from). Rows upd did not write (their version moved) are left alone.
func claimQueueCTEs(q *sqlArgs, S string, ws []*rowWrite) {
	var enter, stay, leave []*rowWrite
	for _, w := range ws {
		before, after := queued(w.from, w.p.Mode), queued(w.p.Status, w.p.Mode)
		switch {
		case after && !before:
			enter = append(enter, w)
		case after:
			stay = append(stay, w)
		case before:
			leave = append(leave, w)
		}
	}
	id := func(w *rowWrite) string { return w.p.ID }
	oldAt := func(w *rowWrite) time.Time { return w.oldAt }
	if len(enter) > 0 {
		q.w(`,
cqi AS (INSERT INTO `, S, `claim_queue (`, claimQueueColumns, `)
	SELECT `, claimQueueColumns, ` FROM upd WHERE upd.id = ANY(`, q.arg(column(enter, id), "text[]"), `))`)
	}
	if len(stay) > 0 {
		q.w(`,
cqu AS (UPDATE `, S, `claim_queue c SET status = upd.status, lease_expires_at = upd.lease_expires_at,
		next_attempt_at = upd.next_attempt_at, updated_at = upd.updated_at
	FROM upd JOIN unnest(`, q.arg(column(stay, id), "text[]"), `, `, q.arg(column(stay, oldAt), "timestamptz[]"), `) AS k(id, at)
		ON upd.id = k.id
	WHERE c.updated_at = k.at AND c.id = k.id)`)
	}
	if len(leave) > 0 {
		q.w(`,
cqd AS (DELETE FROM `, S, `claim_queue c USING upd JOIN unnest(`, q.arg(column(leave, id), "text[]"), `, `,
			q.arg(column(leave, oldAt), "timestamptz[]"), `) AS k(id, at) ON upd.id = k.id
	WHERE c.updated_at = k.at AND c.id = k.id)`)
	}
}
