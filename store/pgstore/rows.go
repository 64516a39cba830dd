package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/store"
)

// This file maps records to rows and back. Times are timestamptz, read back
// in UTC; nil slices and raw JSON are NULL, so that nil and empty survive
// the round trip; the caller's raw JSON is stored byte for byte.

// normalize truncates every time in p to what timestamptz keeps, in UTC, so
// that the proposal a write returns is the one a read returns.
func normalize(p *store.Proposal) {
	p.ExpiresAt = dbTime(p.ExpiresAt)
	p.CreatedAt = dbTime(p.CreatedAt)
	p.UpdatedAt = dbTime(p.UpdatedAt)
	p.NextAttemptAt = dbTimePtr(p.NextAttemptAt)
	p.EscalateAt = dbTimePtr(p.EscalateAt)
	p.RemindAt = dbTimePtr(p.RemindAt)
	if p.Lease != nil {
		p.Lease.ExpiresAt = dbTime(p.Lease.ExpiresAt)
	}
	for i := range p.Decisions {
		p.Decisions[i].At = dbTime(p.Decisions[i].At)
	}
	if p.Outcome != nil {
		p.Outcome.At = dbTime(p.Outcome.At)
	}
}

// toStrings converts a slice of string-like values for a text[] column, nil
// as NULL.
func toStrings[T ~string](v []T) []string {
	if v == nil {
		return nil
	}
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = string(s)
	}
	return out
}

func fromStrings[T ~string](v []string) []T {
	if v == nil {
		return nil
	}
	out := make([]T, len(v))
	for i, s := range v {
		out[i] = T(s)
	}
	return out
}

// storedOutcome is the stored form of store.Outcome. Result is kept as a
// string, so it is stored verbatim (jsonb would reorder and reformat it).
type storedOutcome struct {
	ProposalID string       `json:"proposal_id"`
	Status     store.Status `json:"status"`
	Executed   *bool        `json:"executed"`
	Receipt    string       `json:"receipt,omitempty"`
	Result     *string      `json:"result,omitempty"`
	Error      *string      `json:"error"`
	Summary    string       `json:"summary"`
	Note       string       `json:"note,omitempty"`
	ResolvedBy string       `json:"resolved_by,omitempty"`
	Reconciles int          `json:"reconcile_attempts,omitempty"`
	Reason     string       `json:"reason,omitempty"`
	At         time.Time    `json:"at"`
}

func encodeOutcome(o *store.Outcome) ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	so := storedOutcome{
		ProposalID: o.ProposalID, Status: o.Status, Executed: o.Executed, Receipt: o.Receipt,
		Error: o.Error, Summary: o.Summary, Note: o.Note, ResolvedBy: o.ResolvedBy, Reconciles: o.Reconciles, Reason: o.Reason,
		At: dbTime(o.At),
	}
	if o.Result != nil {
		r := string(o.Result)
		so.Result = &r
	}
	return json.Marshal(so)
}

func decodeOutcome(b []byte) (*store.Outcome, error) {
	if b == nil {
		return nil, nil
	}
	var so storedOutcome
	if err := json.Unmarshal(b, &so); err != nil {
		return nil, err
	}
	o := &store.Outcome{
		ProposalID: so.ProposalID, Status: so.Status, Executed: so.Executed, Receipt: so.Receipt,
		Error: so.Error, Summary: so.Summary, Note: so.Note, ResolvedBy: so.ResolvedBy, Reconciles: so.Reconciles, Reason: so.Reason,
		At: so.At.UTC(),
	}
	if so.Result != nil {
		o.Result = json.RawMessage(*so.Result)
	}
	return o, nil
}

// storedDecision is the stored form of store.Decision: every field, its
// time in RFC 3339 with nanoseconds.
type storedDecision struct {
	Actor     string        `json:"actor"`
	ActorKind string        `json:"actor_kind,omitempty"`
	Decision  store.Verdict `json:"decision"`
	Via       string        `json:"via"`
	At        time.Time     `json:"at"`
	Reason    string        `json:"reason,omitempty"`
	Remember  store.Scope   `json:"remember,omitempty"`
	// AwaitsCaller is omitted when false, so decisions stored before it
	// existed read back as they were.
	AwaitsCaller bool `json:"awaits_caller,omitempty"`
	// StepUp is omitted when empty, for the same reason.
	StepUp string `json:"step_up,omitempty"`
}

// encodeDecisions encodes decisions as a JSON array, nil as NULL.
func encodeDecisions(ds []store.Decision) ([]byte, error) {
	if ds == nil {
		return nil, nil
	}
	out := make([]storedDecision, len(ds))
	for i, d := range ds {
		out[i] = storedDecision{Actor: d.Actor, ActorKind: d.ActorKind, Decision: d.Decision, Via: d.Via, At: d.At, Reason: d.Reason, Remember: d.Remember, AwaitsCaller: d.AwaitsCaller, StepUp: d.StepUp}
	}
	return json.Marshal(out)
}

func decodeDecisions(b []byte) ([]store.Decision, error) {
	if b == nil {
		return nil, nil
	}
	sds := []storedDecision{}
	if err := json.Unmarshal(b, &sds); err != nil {
		return nil, err
	}
	ds := make([]store.Decision, len(sds))
	for i, d := range sds {
		ds[i] = store.Decision{Actor: d.Actor, ActorKind: d.ActorKind, Decision: d.Decision, Via: d.Via, At: d.At.UTC(), Reason: d.Reason, Remember: d.Remember, AwaitsCaller: d.AwaitsCaller, StepUp: d.StepUp}
	}
	return ds, nil
}

// storedConfirmation is the stored form of store.Confirmation.
type storedConfirmation struct {
	Title string `json:"title"`
	Verb  string `json:"verb,omitempty"`
}

func encodeConfirmation(c store.Confirmation) ([]byte, error) {
	return json.Marshal(storedConfirmation{Title: c.Title, Verb: c.Verb})
}

func decodeConfirmation(b []byte) (store.Confirmation, error) {
	var sc storedConfirmation
	if err := json.Unmarshal(b, &sc); err != nil {
		return store.Confirmation{}, err
	}
	return store.Confirmation{Title: sc.Title, Verb: sc.Verb}, nil
}

// rawBytes stores raw JSON verbatim, nil as NULL.
func rawBytes(b json.RawMessage) []byte {
	if b == nil {
		return nil
	}
	return []byte(b)
}

// proposalValues encodes p in proposalColumns order.
func proposalValues(p *store.Proposal) ([]any, error) {
	confirmation, err := encodeConfirmation(p.Confirmation)
	if err != nil {
		return nil, fmt.Errorf("encode proposal %s: confirmation: %w", p.ID, err)
	}
	decisions, err := encodeDecisions(p.Decisions)
	if err != nil {
		return nil, fmt.Errorf("encode proposal %s: decisions: %w", p.ID, err)
	}
	outcome, err := encodeOutcome(p.Outcome)
	if err != nil {
		return nil, fmt.Errorf("encode proposal %s: outcome: %w", p.ID, err)
	}
	var (
		leaseOwner, leaseToken *string
		leaseGen               *int64
		leaseExp               *time.Time
	)
	if l := p.Lease; l != nil {
		exp := dbTime(l.ExpiresAt)
		leaseOwner, leaseToken, leaseGen, leaseExp = &l.Owner, &l.Token, &l.Generation, &exp
	}
	var next *time.Time
	if p.NextAttemptAt != nil {
		t := dbTime(*p.NextAttemptAt)
		next = &t
	}
	return []any{
		p.ID, p.Tenant, p.Requester, p.RequesterRoles, p.ThreadID, p.RunID, p.ToolCallID,
		p.Action, p.ActionVersion, rawBytes(p.Input), rawBytes(p.RawInput), p.InputDigest, p.Preview, p.StateVersion,
		confirmation, p.ConfirmationID, string(p.Mode), string(p.Status), p.Approvers, p.Quorum, p.ForbidSelfApproval,
		p.Channels, toStrings(p.RememberScopes), p.GrantAnyInput, int64(p.GrantTTL), p.ReplacementKey, decisions,
		dbTime(p.ExpiresAt), p.OperationID, p.Attempt, leaseOwner, leaseToken, leaseGen,
		leaseExp, p.ConsumedBy, next, outcome, p.Version, dbTime(p.CreatedAt), dbTime(p.UpdatedAt),
		p.RuleFingerprint, dbTimePtr(p.EscalateAt), p.EscalateTo, dbTimePtr(p.RemindAt), int64(p.RemindEvery),
		p.RuleMatch, p.RuleWhen, p.RequesterKind,
		p.Notify, p.StepUp, p.TraceParent,
	}, nil
}

// proposalRow receives a row of proposalColumns.
type proposalRow struct {
	p                            store.Proposal
	confirmation, decisions, out []byte
	mode, status                 string
	scopes                       []string
	grantTTL                     int64
	leaseOwner, leaseToken       *string
	leaseGen                     *int64
	leaseExp, next               *time.Time
	escalateAt, remindAt         *time.Time
	remindEvery                  int64
}

// dest returns the scan destinations, in proposalColumns order.
func (r *proposalRow) dest() []any {
	p := &r.p
	return []any{
		&p.ID, &p.Tenant, &p.Requester, &p.RequesterRoles, &p.ThreadID, &p.RunID, &p.ToolCallID,
		&p.Action, &p.ActionVersion, &p.Input, &p.RawInput, &p.InputDigest, &p.Preview, &p.StateVersion,
		&r.confirmation, &p.ConfirmationID, &r.mode, &r.status, &p.Approvers, &p.Quorum, &p.ForbidSelfApproval,
		&p.Channels, &r.scopes, &p.GrantAnyInput, &r.grantTTL, &p.ReplacementKey, &r.decisions,
		&p.ExpiresAt, &p.OperationID, &p.Attempt, &r.leaseOwner, &r.leaseToken, &r.leaseGen,
		&r.leaseExp, &p.ConsumedBy, &r.next, &r.out, &p.Version, &p.CreatedAt, &p.UpdatedAt,
		&p.RuleFingerprint, &r.escalateAt, &p.EscalateTo, &r.remindAt, &r.remindEvery,
		&p.RuleMatch, &p.RuleWhen, &p.RequesterKind,
		&p.Notify, &p.StepUp, &p.TraceParent,
	}
}

// proposal finishes the decoding of a scanned row.
func (r *proposalRow) proposal() (*store.Proposal, error) {
	p := &r.p
	p.Mode, p.Status = store.Mode(r.mode), store.Status(r.status)
	p.RememberScopes = fromStrings[store.Scope](r.scopes)
	p.GrantTTL, p.RemindEvery = time.Duration(r.grantTTL), time.Duration(r.remindEvery)
	p.ExpiresAt, p.CreatedAt, p.UpdatedAt = p.ExpiresAt.UTC(), p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	p.EscalateAt, p.RemindAt = utcPtr(r.escalateAt), utcPtr(r.remindAt)
	if r.next != nil {
		t := r.next.UTC()
		p.NextAttemptAt = &t
	}
	if r.leaseToken != nil && r.leaseOwner != nil && r.leaseGen != nil && r.leaseExp != nil {
		p.Lease = &store.Lease{Owner: *r.leaseOwner, Token: *r.leaseToken, Generation: *r.leaseGen, ExpiresAt: r.leaseExp.UTC()}
	}
	var err error
	if p.Confirmation, err = decodeConfirmation(r.confirmation); err != nil {
		return nil, fmt.Errorf("decode proposal %s: confirmation: %w", p.ID, err)
	}
	if p.Decisions, err = decodeDecisions(r.decisions); err != nil {
		return nil, fmt.Errorf("decode proposal %s: decisions: %w", p.ID, err)
	}
	if p.Outcome, err = decodeOutcome(r.out); err != nil {
		return nil, fmt.Errorf("decode proposal %s: outcome: %w", p.ID, err)
	}
	return p, nil
}

// scanProposal reads a row of proposalColumns, followed by extra columns.
func scanProposal(row pgx.Row, extra ...any) (*store.Proposal, error) {
	var r proposalRow
	if err := row.Scan(append(r.dest(), extra...)...); err != nil {
		return nil, err
	}
	return r.proposal()
}

// collectProposals reads every row of rows.
func collectProposals(rows pgx.Rows) ([]*store.Proposal, error) {
	return collect(rows, func(row pgx.Row) (*store.Proposal, error) { return scanProposal(row) })
}

// collect reads every row of rows with scan, and closes rows. No row gives
// nil.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (*T, error)) ([]*T, error) {
	return pgx.AppendRows([]*T(nil), rows, func(row pgx.CollectableRow) (*T, error) { return scan(row) })
}

// queryAll reads every row that query selects on pool, each with scan.
func queryAll[T any](ctx context.Context, pool *pgxpool.Pool, scan func(pgx.Row) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scan)
}

// grantColumns lists the columns of a grant row, in scanGrant's order.
const grantColumns = `id, tenant, requester, scope, thread_id, run_id, action, action_version,
	input_digest, origin_proposal_id, granted_by, created_at, activated_at, expires_at,
	revoked_at, revoked_by, rule_fingerprint`

func scanGrant(row pgx.Row) (*store.Grant, error) {
	var (
		g     store.Grant
		scope string
	)
	err := row.Scan(&g.ID, &g.Tenant, &g.Requester, &scope, &g.ThreadID, &g.RunID, &g.Action, &g.ActionVersion,
		&g.InputDigest, &g.OriginProposalID, &g.GrantedBy, &g.CreatedAt, &g.ActivatedAt, &g.ExpiresAt,
		&g.RevokedAt, &g.RevokedBy, &g.RuleFingerprint)
	if err != nil {
		return nil, err
	}
	g.Scope = store.Scope(scope)
	g.CreatedAt = g.CreatedAt.UTC()
	g.ActivatedAt, g.ExpiresAt, g.RevokedAt = utcPtr(g.ActivatedAt), utcPtr(g.ExpiresAt), utcPtr(g.RevokedAt)
	return &g, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func dbTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := dbTime(*t)
	return &u
}
