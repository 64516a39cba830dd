package pgstore

import "strings"

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
	rule_fingerprint, escalate_at, escalate_to, remind_at, remind_every, rule_match, rule_when, requester_kind,
	notify, step_up, trace_parent`

// columnList returns proposalColumns as a slice of names.
func columnList() []string {
	cols := strings.Split(proposalColumns, ",")
	for i, c := range cols {
		cols[i] = strings.TrimSpace(c)
	}
	return cols
}

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

	getProposal, getByToolCall, getByConfirmation, proposalTenant, countByStatus string
	getMany, getReplayed, supersede, expireDue, claimBatch                       string
	escalateDue, remindDue                                                       string
	ensureThread, getThread, deleteThread, listMessages                          string
	findGrant, getGrant, lockGrant, revokeGrant                                  string
	loadCursorKey                                                                string
	listProposals, listInbox, listGrants, listEvents                             string // prefixes; the filters follow
	lastEventID                                                                  string
}

func newQueries(schema string) *queries {
	q := &queries{
		schema: schema,

		getProposal:    `SELECT ` + proposalColumns + ` FROM _S_.proposals WHERE id = $1 AND tenant = $2`,
		proposalTenant: `SELECT tenant FROM _S_.proposals WHERE id = $1`,
		countByStatus:  `SELECT status, count(*) FROM _S_.proposals GROUP BY status`,
		getByToolCall:  `SELECT ` + proposalColumns + ` FROM _S_.proposals WHERE tenant = $1 AND thread_id = $2 AND tool_call_id = $3`,
		// "confirmation_id <> ''" matches the partial unique index and
		// makes an empty id find nothing.
		getByConfirmation: `SELECT ` + proposalColumns + ` FROM _S_.proposals
			WHERE tenant = $1 AND confirmation_id = $2 AND confirmation_id <> ''`,

		// getMany reads the rows of a group (SettleMany). Parameters:
		// tenants, ids (parallel arrays).
		getMany: `SELECT ` + prefixed("p") + ` FROM _S_.proposals p
			JOIN unnest($1::text[], $2::text[]) AS k(tenant, id) ON p.tenant = k.tenant AND p.id = k.id`,

		// getReplayed reads the record of a tool call that a creation
		// ($4, the new proposal's id) did not insert.
		getReplayed: `SELECT ` + proposalColumns + ` FROM _S_.proposals
			WHERE tenant = $1 AND thread_id = $2 AND tool_call_id = $3 AND id <> $4`,

		supersede: strings.Replace(supersedeSQL, "PCOLS", prefixed("p"), 1),

		// expireDue is store.Due in SQL, most overdue first: the open
		// proposals (openproposals.go) are store.Due's statuses, so their
		// expiry index holds exactly the proposals that may expire.
		// Parameters: now, limit.
		expireDue: `SELECT ` + prefixed("p") + ` FROM _S_.open_proposals o JOIN _S_.proposals p ON p.id = o.id
			WHERE o.expires_at <= $1
			ORDER BY o.expires_at, o.id LIMIT $2`,
		// escalateDue and remindDue are store.Escalatable and
		// store.Remindable in SQL, most overdue first, on the partial
		// indexes open_proposals_escalation and open_proposals_reminder
		// (the conformance suite pins each query to its rule). A reminder
		// without a positive interval is never due: such a row, selected,
		// would take a place in the batch that the sweep then skips.
		// Parameters: now, limit.
		escalateDue: `SELECT ` + prefixed("p") + ` FROM _S_.open_proposals o JOIN _S_.proposals p ON p.id = o.id
			WHERE o.undecided AND o.escalate_at IS NOT NULL AND o.escalate_at <= $1
			ORDER BY o.escalate_at, o.id LIMIT $2`,
		remindDue: `SELECT ` + prefixed("p") + ` FROM _S_.open_proposals o JOIN _S_.proposals p ON p.id = o.id
			WHERE o.undecided AND o.remind_at IS NOT NULL AND o.remind_at <= $1 AND o.remind_every > 0
			ORDER BY o.remind_at, o.id LIMIT $2`,

		claimBatch: strings.Replace(claimBatchSQL, "PCOLS", prefixed("p"), 1),

		// ensureThread creates a thread unless it exists. The NOT EXISTS
		// spares a thread that exists (every call but a thread's first) the
		// speculative insertion of ON CONFLICT; one that a concurrent
		// creation inserted and has not committed is not seen by it, and
		// the insert then waits on ON CONFLICT as before.
		ensureThread: `INSERT INTO _S_.threads (tenant, id, owner, created_at)
			SELECT $1::text, $2::text, $3::text, $4::timestamptz
			WHERE NOT EXISTS (SELECT 1 FROM _S_.threads WHERE tenant = $1::text AND id = $2::text)
			ON CONFLICT (tenant, id) DO NOTHING`,
		getThread:    `SELECT owner, run_id, created_at FROM _S_.threads WHERE tenant = $1 AND id = $2`,
		deleteThread: `DELETE FROM _S_.threads WHERE tenant = $1 AND id = $2`,
		// One statement, so the thread's existence and its messages come
		// from one snapshot: no row at all means no thread; a row of NULLs,
		// a thread without messages.
		listMessages: `SELECT m.id, m.role, m.text, m.proposal_id, m.outcome, m.created_at,
				m.sender, m.run_id, m.tool_calls, m.tool_call_id, m.result, m.decision
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

		listProposals: `SELECT ` + prefixed("p") + ` FROM _S_.proposals p WHERE p.tenant = $1`,
		// listInbox is listProposals for the pending proposals alone, read
		// through the open proposals (openproposals.go). p.status is the
		// truth; o.undecided, which says the same, is the partial index's
		// predicate.
		listInbox: `SELECT ` + prefixed("p") + ` FROM _S_.open_proposals o JOIN _S_.proposals p ON p.id = o.id
			WHERE o.tenant = $1 AND o.undecided AND p.status = 'pending'`,
		listGrants: `SELECT ` + grantColumns + ` FROM _S_.grants WHERE tenant = $1`,
		listEvents: `SELECT id, proposal_id, type, actor, actor_kind, via, status, detail, at FROM _S_.events WHERE tenant = $1 AND id > $2`,
		// The tenant's newest event, from the end of events_tenant.
		// The range in place of tenant = $1 keeps tenant in the order, which
		// only events_tenant gives: the generic plan cannot know that a
		// tenant is rare, and took the primary key backwards, filtering,
		// when the tenants were few (TestQueryPlans).
		lastEventID: `SELECT id FROM _S_.events WHERE tenant >= $1 AND tenant <= $1 ORDER BY tenant DESC, id DESC LIMIT 1`,
	}
	for _, p := range []*string{
		&q.getProposal, &q.getByToolCall, &q.getByConfirmation, &q.proposalTenant, &q.countByStatus,
		&q.getMany, &q.getReplayed, &q.supersede, &q.expireDue, &q.claimBatch, &q.escalateDue, &q.remindDue,
		&q.ensureThread, &q.getThread, &q.deleteThread, &q.listMessages,
		&q.findGrant, &q.getGrant, &q.lockGrant, &q.revokeGrant, &q.loadCursorKey,
		&q.listProposals, &q.listInbox, &q.listGrants, &q.listEvents, &q.lastEventID,
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
//     from the claim queue (claimqueue.go), which holds what the choice
//     reads of each proposal of Claimable's statuses; rows another
//     transaction holds are skipped, so that concurrent workers each get
//     different rows and nobody waits. Lease expiry is judged by the
//     database's clock, a reconciliation's next attempt and the end of a
//     caller's released execution (application deadlines) by the
//     application's ($1).
//   - held: the picked proposals, locked, skipping any another transaction
//     holds: a transition writes a proposal before its queue row, so a
//     claim that waited for a proposal while holding its queue row could
//     deadlock with it. The rule is judged again on the row itself. The
//     rows are reached through the primary key (the ANY): under a backlog
//     a generic plan once joined them by hashing the whole table
//     (TestClaimPlanUnderBacklog).
//   - claimed: approved → executing with one more attempt; executing (an
//     expired lease) and reconciling keep their status and attempt. A new
//     lease: owner $2, a random token, generation = the version written,
//     expiry on the database's clock + $3 microseconds. No column an index
//     of proposals names changes: the update is HOT.
//   - queued: the claimed rows' queue rows (found by their key, the
//     updated_at picked and the id), as the proposals now stand.
//   - ev: the claim events, in claim order.
//
// The p:<id> notifications of the status changes are sent after the commit
// (see sendNotifications).
//
// Parameters: application now, owner, lease microseconds, limit.
const claimBatchSQL = `WITH pick AS (
	SELECT id, status, updated_at FROM _S_.claim_queue
	WHERE (status = 'approved' OR lease_expires_at IS NULL OR lease_expires_at <= statement_timestamp())
	AND (status = 'approved' OR next_attempt_at IS NULL OR next_attempt_at <= $1)
	ORDER BY updated_at, id
	LIMIT $4
	FOR UPDATE SKIP LOCKED
), held AS (
	SELECT p.id FROM _S_.proposals p
	WHERE p.id = ANY (ARRAY(SELECT id FROM pick))
	AND ((p.status = 'approved' AND p.mode = 'independent') OR p.status IN ('executing', 'reconciling'))
	AND (p.status = 'approved' OR p.lease_token IS NULL OR p.lease_expires_at <= statement_timestamp())
	AND (p.status = 'approved' OR p.next_attempt_at IS NULL OR p.next_attempt_at <= $1)
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
	WHERE p.id = pick.id AND p.id = ANY (ARRAY(SELECT id FROM held))
	RETURNING PCOLS, pick.status AS from_status, pick.updated_at AS picked_at
), queued AS (
	UPDATE _S_.claim_queue q SET status = claimed.status, lease_expires_at = claimed.lease_expires_at,
		next_attempt_at = claimed.next_attempt_at, updated_at = claimed.updated_at
	FROM claimed WHERE q.updated_at = claimed.picked_at AND q.id = claimed.id
), ev AS (
	INSERT INTO _S_.events (tenant, proposal_id, type, actor, via, status, detail, at)
	SELECT tenant, id, 'proposal.claimed', $2, '', status, 'from ' || from_status || ', attempt ' || attempt, $1
	FROM claimed ORDER BY picked_at, id
)
SELECT ` + proposalColumns + `, from_status FROM claimed ORDER BY picked_at, id`
