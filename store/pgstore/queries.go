package pgstore

import (
	"fmt"
	"strings"
)

// This file holds the store's SQL. Table names are written _S_.name and
// qualified with the quoted schema when a Store is made, so that the store
// works on any pool, whatever its search_path.

// proposalColumns lists the columns of a proposal row, in the order
// scanProposal reads and proposalValues writes them.
const proposalColumns = `id, tenant, requester, requester_roles, thread_id, run_id, tool_call_id,
	action, action_version, input, raw_input, input_digest, preview, state_version,
	confirmation, confirmation_id, mode, status, approvers, quorum, forbid_self_approval,
	channels, remember_scopes, grant_any_input, grant_ttl, replacement_key, decisions,
	expires_at, operation_id, attempt, lease_owner, lease_token, lease_generation,
	lease_expires_at, consumed_by, next_attempt_at, outcome, version, created_at, updated_at,
	rule_fingerprint`

// columnList returns proposalColumns as a slice of names.
func columnList() []string {
	cols := strings.Split(proposalColumns, ",")
	for i, c := range cols {
		cols[i] = strings.TrimSpace(c)
	}
	return cols
}

// proposalColumnCount is the number of proposalColumns.
var proposalColumnCount = len(columnList())

// prefixed returns proposalColumns qualified by a table alias.
func prefixed(alias string) string {
	cols := columnList()
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

// queries are the store's statements for one schema.
type queries struct {
	schema string // quoted

	getProposal, getProposalForUpdate, getByToolCall, getByConfirmation, proposalTenant, countByStatus string
	insertProposal, updateProposal                                                                     string
	lockMany, replacement, expireDue, claimBatch                                                       string
	insertEvent, admitMessage, insertGrant, activateGrants                                             string
	settleRows, insertEvents, admitMessages, activateGrantsMany                                        string
	ensureThread, getThread, deleteThread, listMessages                                                string
	findGrant, getGrant, lockGrant, revokeGrant                                                        string
	loadCursorKey                                                                                      string
	listProposals, listGrants, listEvents                                                              string // prefixes; the filters follow
	lastEventID                                                                                        string
}

func newQueries(schema string) *queries {
	n := proposalColumnCount
	q := &queries{
		schema: schema,

		getProposal:          `SELECT ` + proposalColumns + ` FROM _S_.proposals WHERE id = $1 AND tenant = $2`,
		proposalTenant:       `SELECT tenant FROM _S_.proposals WHERE id = $1`,
		countByStatus:        `SELECT status, count(*) FROM _S_.proposals GROUP BY status`,
		getProposalForUpdate: `SELECT ` + proposalColumns + ` FROM _S_.proposals WHERE id = $1 AND tenant = $2 FOR UPDATE`,
		getByToolCall:        `SELECT ` + proposalColumns + ` FROM _S_.proposals WHERE tenant = $1 AND thread_id = $2 AND tool_call_id = $3`,
		// "confirmation_id <> ''" matches the partial unique index and
		// makes an empty id find nothing.
		getByConfirmation: `SELECT ` + proposalColumns + ` FROM _S_.proposals
			WHERE tenant = $1 AND confirmation_id = $2 AND confirmation_id <> ''`,

		// A replay of a tool call inserts nothing (and returns no row); any
		// other unique violation (the id, the confirmation id) is an error.
		// Parameters 1..n are the columns, then the lease duration in
		// microseconds when the row is created under a lease (an allowed
		// execution), whose expiry is then taken from the database's clock,
		// as a claim's is.
		insertProposal: func() string {
			vals := make([]string, n)
			for i, c := range columnList() {
				vals[i] = fmt.Sprintf("$%d", i+1)
				if c == "lease_expires_at" {
					vals[i] = fmt.Sprintf(`CASE WHEN $%[2]d::bigint IS NULL THEN $%[1]d::timestamptz
						ELSE statement_timestamp() + $%[2]d::bigint * interval '1 microsecond' END`, i+1, n+1)
				}
			}
			return `INSERT INTO _S_.proposals (` + proposalColumns + `) VALUES (` + strings.Join(vals, ", ") + `)
			ON CONFLICT (tenant, thread_id, tool_call_id) DO NOTHING RETURNING lease_expires_at`
		}(),

		// updateProposal rewrites every column but id, guarded by the
		// version the row was read at. Parameters 1..n-1 are the columns
		// after id; then id, the old version, and the lease duration in
		// microseconds when the transition wrote a new lease expiry, which
		// is then taken from the database's clock instead of the
		// application's (lease_expires_at is parameter 33, the 34th column).
		updateProposal: func() string {
			cols := columnList()[1:]
			set := make([]string, len(cols))
			for i, c := range cols {
				set[i] = fmt.Sprintf("%s = $%d", c, i+1)
				if c == "lease_expires_at" {
					set[i] = fmt.Sprintf(`lease_expires_at = CASE WHEN $%[2]d::bigint IS NULL THEN $%[1]d::timestamptz
						ELSE statement_timestamp() + $%[2]d::bigint * interval '1 microsecond' END`, i+1, n+2)
				}
			}
			return `UPDATE _S_.proposals SET ` + strings.Join(set, ", ") +
				fmt.Sprintf(` WHERE id = $%d AND version = $%d RETURNING lease_expires_at`, n, n+1)
		}(),

		// lockMany locks the rows of a group (SettleMany) in one order, id
		// order, so that two groups never wait for each other in a cycle.
		// Parameters: tenants, ids (parallel arrays).
		lockMany: `SELECT ` + prefixed("p") + ` FROM _S_.proposals p
			JOIN unnest($1::text[], $2::text[]) AS k(tenant, id) ON p.tenant = k.tenant AND p.id = k.id
			ORDER BY p.id FOR UPDATE OF p`,

		// replacement locks the pending proposals a new one may supersede
		// (store.Supersedes), oldest first. Parameters: tenant, thread,
		// requester, action, replacement key.
		replacement: `SELECT ` + proposalColumns + ` FROM _S_.proposals
			WHERE tenant = $1 AND thread_id = $2 AND requester = $3 AND action = $4 AND replacement_key = $5
			AND status = 'pending' AND replacement_key <> ''
			ORDER BY created_at, id FOR UPDATE`,

		// expireDue is store.Due in SQL, most overdue first, skipping rows
		// another sweeper or a transition holds. Its first WHERE term
		// repeats proposals_expiry's. Parameters: now, limit.
		expireDue: `SELECT ` + proposalColumns + ` FROM _S_.proposals
			WHERE (status = 'pending' OR (status = 'approved' AND mode IN ('wait', 'two_phase')))
			AND expires_at <= $1
			ORDER BY expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`,

		claimBatch: strings.Replace(claimBatchSQL, "PCOLS", prefixed("p"), 1),

		insertEvent: `INSERT INTO _S_.events (tenant, proposal_id, type, actor, via, status, detail, at)
			SELECT $1, $2, e.type, e.actor, e.via, $3, e.detail, $4
			FROM unnest($5::text[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS e(type, actor, via, detail, n)
			ORDER BY e.n`,

		// admitMessage admits an outcome once per message id, and only
		// into a thread that still exists. FOR KEY SHARE waits for a
		// concurrent DeleteThread: if the thread goes, nothing is admitted
		// (rather than the foreign key failing the transition).
		admitMessage: `INSERT INTO _S_.messages (id, tenant, thread_id, role, text, proposal_id, outcome, created_at)
			SELECT $1, t.tenant, t.id, $4, $5, $6, $7, $8 FROM _S_.threads t
			WHERE t.tenant = $2 AND t.id = $3 FOR KEY SHARE OF t
			ON CONFLICT (id) DO NOTHING`,

		insertGrant: `INSERT INTO _S_.grants (` + grantColumns + `)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULL, $13, $14, $15, $16)`,
		activateGrants: `UPDATE _S_.grants SET activated_at = $1 WHERE origin_proposal_id = $2 AND activated_at IS NULL`,

		ensureThread: `INSERT INTO _S_.threads (tenant, id, owner, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant, id) DO NOTHING`,
		getThread:    `SELECT owner, created_at FROM _S_.threads WHERE tenant = $1 AND id = $2`,
		deleteThread: `DELETE FROM _S_.threads WHERE tenant = $1 AND id = $2`,
		// One statement, so the thread's existence and its messages come
		// from one snapshot: no row at all means no thread; a row of NULLs,
		// a thread without messages.
		listMessages: `SELECT m.id, m.role, m.text, m.proposal_id, m.outcome, m.created_at
			FROM _S_.threads t LEFT JOIN _S_.messages m ON m.tenant = t.tenant AND m.thread_id = t.id
			WHERE t.tenant = $1 AND t.id = $2
			ORDER BY m.seq`,

		// store.Grant.Live and store.GrantMatches, in SQL: a thread grant
		// covers its thread, a run grant its thread's run; an empty digest
		// any input; only a call under the same rule. Of several live
		// matches, the newest wins.
		findGrant: `SELECT ` + grantColumns + ` FROM _S_.grants
			WHERE tenant = $1 AND requester = $2 AND action = $3 AND action_version = $4 AND thread_id = $5
			AND rule_fingerprint = $9
			AND (input_digest = '' OR input_digest = $6)
			AND (scope = 'thread' OR (scope = 'run' AND run_id = $7))
			AND activated_at IS NOT NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $8)
			ORDER BY seq DESC LIMIT 1`,
		getGrant: `SELECT ` + grantColumns + ` FROM _S_.grants WHERE tenant = $1 AND id = $2`,
		// lockGrant reads a grant that is to approve a creation, FOR SHARE
		// so that its revocation serialises with the creation.
		lockGrant: `SELECT ` + grantColumns + ` FROM _S_.grants WHERE tenant = $1 AND id = $2 FOR SHARE`,

		// The first revocation stands: a second one changes nothing.
		revokeGrant: `UPDATE _S_.grants SET revoked_at = $3, revoked_by = $4
			WHERE tenant = $1 AND id = $2 AND revoked_at IS NULL`,

		loadCursorKey: `SELECT value FROM _S_.meta WHERE key = $1`,

		settleRows:         settleRowsSQL,
		insertEvents:       insertEventsSQL,
		admitMessages:      admitMessagesSQL,
		activateGrantsMany: activateGrantsManySQL,

		listProposals: `SELECT ` + prefixed("p") + ` FROM _S_.proposals p WHERE p.tenant = $1`,
		listGrants:    `SELECT ` + grantColumns + ` FROM _S_.grants WHERE tenant = $1`,
		listEvents:    `SELECT id, proposal_id, type, actor, via, status, detail, at FROM _S_.events WHERE tenant = $1 AND id > $2`,
		// The tenant's newest event, from the end of events_tenant.
		lastEventID: `SELECT id FROM _S_.events WHERE tenant = $1 ORDER BY id DESC LIMIT 1`,
	}
	for _, p := range []*string{
		&q.getProposal, &q.getProposalForUpdate, &q.getByToolCall, &q.getByConfirmation, &q.proposalTenant, &q.countByStatus,
		&q.insertProposal, &q.updateProposal, &q.lockMany, &q.replacement, &q.expireDue, &q.claimBatch,
		&q.insertEvent, &q.admitMessage, &q.insertGrant, &q.activateGrants,
		&q.ensureThread, &q.getThread, &q.deleteThread, &q.listMessages,
		&q.findGrant, &q.getGrant, &q.lockGrant, &q.revokeGrant, &q.loadCursorKey,
		&q.listProposals, &q.listGrants, &q.listEvents, &q.lastEventID,
		&q.settleRows, &q.insertEvents, &q.admitMessages, &q.activateGrantsMany,
	} {
		*p = qualify(schema, *p)
	}
	return q
}

// claimBatchSQL is the worker's claim: one statement that picks, locks,
// leases and records up to $4 proposals. It is store.Claimable and
// store.ApplyClaimBatch in SQL; the conformance suite pins that they agree.
//
//   - pick: the claimable rows in claim order (longest unchanged first),
//     skipping rows another transaction holds, so that concurrent workers
//     each get different rows and nobody waits. The first WHERE term repeats
//     the partial index proposals_claim's predicate; lease expiry is judged
//     by the database's clock, a reconciliation's next attempt (an
//     application deadline) by the application's ($1).
//   - claimed: approved → executing with one more attempt; executing (an
//     expired lease) and reconciling keep their status and attempt. A new
//     lease: owner $2, a random token, generation = the version written,
//     expiry on the database's clock + $3 microseconds.
//   - ev: the claim events, in claim order.
//
// The p:<id> notifications of the status changes are sent after the commit
// (see sendNotifications).
//
// Parameters: application now, owner, lease microseconds, limit.
const claimBatchSQL = `WITH pick AS (
	SELECT id, status, updated_at FROM _S_.proposals
	WHERE ((status = 'approved' AND mode = 'independent') OR status IN ('executing', 'reconciling'))
	AND (status = 'approved' OR lease_token IS NULL OR lease_expires_at <= statement_timestamp())
	AND (status <> 'reconciling' OR next_attempt_at IS NULL OR next_attempt_at <= $1)
	ORDER BY updated_at, id
	LIMIT $4
	FOR UPDATE SKIP LOCKED
), claimed AS (
	UPDATE _S_.proposals p SET
		status = CASE WHEN pick.status = 'approved' THEN 'executing' ELSE p.status END,
		attempt = CASE WHEN pick.status = 'approved' THEN p.attempt + 1 ELSE p.attempt END,
		lease_owner = $2,
		lease_token = replace(gen_random_uuid()::text, '-', ''),
		lease_generation = p.version + 1,
		lease_expires_at = statement_timestamp() + $3::bigint * interval '1 microsecond',
		version = p.version + 1,
		updated_at = $1
	FROM pick
	WHERE p.id = pick.id
	RETURNING PCOLS, pick.status AS from_status, pick.updated_at AS picked_at
), ev AS (
	INSERT INTO _S_.events (tenant, proposal_id, type, actor, via, status, detail, at)
	SELECT tenant, id, 'proposal.claimed', $2, '', status, 'from ' || from_status || ', attempt ' || attempt, $1
	FROM claimed ORDER BY picked_at, id
)
SELECT ` + proposalColumns + `, from_status FROM claimed ORDER BY picked_at, id`
