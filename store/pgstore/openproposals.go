package pgstore

import (
	"github.com/countersign/countersign/store"
)

// The open proposals (migration 0023, ADR 0052) are a row for each proposal
// that may still expire (store.Due's statuses: pending, or approved in a
// mode whose caller executes and not yet taken), holding what the inbox,
// the replacement, the escalation, the reminder and the expiry look for:
// their indexes live on this table, not on proposals. No index of
// proposals then names a column that a decision changes, so a decision,
// like a claim and a settlement (claimqueue.go), updates its proposal in
// place (HOT), with no new entry in any of proposals' indexes.
//
// Every statement that writes a proposal keeps its open row in step, in the
// same statement: a creation in one of those statuses inserts it
// (insertStatement), a transition that stays in them updates its status
// and due times where they changed, one that leaves them deletes it
// (casStatement, supersedeSQL). A claim never touches one (the claim
// queue's statuses are not these). Every pgstore test's store is checked
// against the invariant when it closes (checkSideTables,
// conformance_test.go), the conformance suite's included;
// TestOpenProposalsUpgrade checks the migration's rows.

// openColumns are the open proposals' columns; every one is proposals'
// but undecided, which stands for status = 'pending'.
const openColumns = `id, tenant, thread_id, requester, action, replacement_key, created_at, expires_at, undecided, escalate_at, remind_at, remind_every`

// open reports whether a proposal of this status and mode belongs among the
// open proposals: whether store.Due may ever hold for it.
func open(status store.Status, mode store.Mode) bool {
	return status == store.StatusPending || (status == store.StatusApproved && mode.CallerExecutes())
}

// openCTEs writes, after the CTE upd (a proposal UPDATE returning id,
// status, escalate_at and remind_at), the open rows of ws: inserted where a
// row becomes open (no rule of store/transition.go does so today: only a
// creation makes an open proposal), updated where it stays open and its
// status or a due time changed, deleted where it leaves. Rows upd did not
// write (their version moved) are left alone.
func openCTEs(q *sqlArgs, S string, ws []*rowWrite) {
	var enter, stay, leave []string
	for _, w := range ws {
		before, after := open(w.from, w.p.Mode), open(w.p.Status, w.p.Mode)
		switch {
		case after && !before:
			enter = append(enter, w.p.ID)
		case after:
			if w.p.Status != w.from || w.cols&(colEscalateAt|colRemindAt) != 0 {
				stay = append(stay, w.p.ID)
			}
		case before:
			leave = append(leave, w.p.ID)
		}
	}
	if len(enter) > 0 {
		// The columns fixed at creation from the row as it stood before
		// the statement, the rest as upd wrote them.
		q.w(`,
opi AS (INSERT INTO `, S, `open_proposals (`, openColumns, `)
	SELECT p.id, p.tenant, p.thread_id, p.requester, p.action, p.replacement_key, p.created_at, p.expires_at,
		upd.status = 'pending', upd.escalate_at, upd.remind_at, p.remind_every
	FROM upd JOIN `, S, `proposals p ON p.id = upd.id WHERE upd.id = ANY(`, q.arg(enter, "text[]"), `))`)
	}
	if len(stay) > 0 {
		q.w(`,
opu AS (UPDATE `, S, `open_proposals o SET undecided = upd.status = 'pending',
		escalate_at = upd.escalate_at, remind_at = upd.remind_at
	FROM upd WHERE o.id = upd.id AND upd.id = ANY(`, q.arg(stay, "text[]"), `))`)
	}
	if len(leave) > 0 {
		q.w(`,
opd AS (DELETE FROM `, S, `open_proposals o USING upd
	WHERE o.id = upd.id AND upd.id = ANY(`, q.arg(leave, "text[]"), `))`)
	}
}
