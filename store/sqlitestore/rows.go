package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/countersign/countersign/store"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// This file maps records to rows and back. Times are INTEGER Unix
// nanoseconds, read back in UTC; nil slices and raw JSON are NULL, so that
// nil and empty survive the round trip; raw JSON is stored verbatim.

// Times Unix nanoseconds can hold (years 1677–2262).
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// errTimeRange is wrapped when a time cannot be stored.
func errTimeRange(field string, t time.Time) error {
	return fmt.Errorf("%w: %s %v is outside the storable range (years 1677-2262)", store.ErrInvalidParams, field, t)
}

// nanos encodes a time that must be set.
func nanos(field string, t time.Time) (int64, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, errTimeRange(field, t)
	}
	return t.UnixNano(), nil
}

// nullNanos encodes an optional time.
func nullNanos(field string, t *time.Time) (any, error) {
	if t == nil {
		return nil, nil
	}
	return nanos(field, *t)
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// jsonList encodes a slice as a JSON array, nil as NULL.
func jsonList[T any](v []T) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func fromJSONList[T any](s sql.NullString) ([]T, error) {
	if !s.Valid {
		return nil, nil
	}
	v := []T{}
	if err := json.Unmarshal([]byte(s.String), &v); err != nil {
		return nil, err
	}
	return v, nil
}

// fromJSONStrings decodes a JSON array of strings, NULL as nil. The arrays
// jsonList writes for the usual values (compact, plain ASCII without
// escapes) are split without encoding/json, whose reflection was most of
// the cost of these four columns on a listing page of 1000 proposals;
// anything else goes through encoding/json.
func fromJSONStrings[T ~string](s sql.NullString) ([]T, error) {
	if !s.Valid {
		return nil, nil
	}
	if v, ok := plainStrings[T](s.String); ok {
		return v, nil
	}
	return fromJSONList[T](s)
}

// plainStrings splits a compact JSON array of strings of printable ASCII
// without escapes; ok is false for any other text.
func plainStrings[T ~string](s string) (_ []T, ok bool) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, false
	}
	body := s[1 : len(s)-1]
	out := make([]T, 0, strings.Count(body, ",")+1)
	for body != "" {
		if body[0] != '"' {
			return nil, false
		}
		end := strings.IndexByte(body[1:], '"')
		if end < 0 {
			return nil, false
		}
		v := body[1 : 1+end]
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 || c == '\\' || c >= 0x7f {
				return nil, false
			}
		}
		out = append(out, T(v))
		body = body[2+end:]
		if body == "" {
			break
		}
		if len(body) < 2 || body[0] != ',' {
			return nil, false
		}
		body = body[1:]
	}
	return out, true
}

// rawText stores raw JSON verbatim (as TEXT: a BLOB would not fit a STRICT
// TEXT column), nil as NULL.
func rawText(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func fromRawText(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// storedOutcome is the stored form of store.Outcome. It keeps Result
// verbatim (encoding/json would compact and re-escape a RawMessage) and the
// time as nanoseconds, like every other time in the database.
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
	At         int64        `json:"at"`
}

func encodeOutcome(o *store.Outcome) (any, error) {
	if o == nil {
		return nil, nil
	}
	at, err := nanos("outcome.at", o.At)
	if err != nil {
		return nil, err
	}
	so := storedOutcome{
		ProposalID: o.ProposalID, Status: o.Status, Executed: o.Executed, Receipt: o.Receipt,
		Error: o.Error, Summary: o.Summary, Note: o.Note, ResolvedBy: o.ResolvedBy, Reconciles: o.Reconciles, Reason: o.Reason, At: at,
	}
	if o.Result != nil {
		r := string(o.Result)
		so.Result = &r
	}
	b, err := json.Marshal(so)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func decodeOutcome(s sql.NullString) (*store.Outcome, error) {
	if !s.Valid {
		return nil, nil
	}
	var so storedOutcome
	if err := json.Unmarshal([]byte(s.String), &so); err != nil {
		return nil, err
	}
	o := &store.Outcome{
		ProposalID: so.ProposalID, Status: so.Status, Executed: so.Executed, Receipt: so.Receipt,
		Error: so.Error, Summary: so.Summary, Note: so.Note, ResolvedBy: so.ResolvedBy, Reconciles: so.Reconciles, Reason: so.Reason, At: fromNanos(so.At),
	}
	if so.Result != nil {
		o.Result = json.RawMessage(*so.Result)
	}
	return o, nil
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

// storedDecision is the stored form of store.Decision, its time in
// nanoseconds.
type storedDecision struct {
	Actor     string        `json:"actor"`
	ActorKind string        `json:"actor_kind,omitempty"`
	Decision  store.Verdict `json:"decision"`
	Via       string        `json:"via"`
	At        int64         `json:"at"`
	Reason    string        `json:"reason,omitempty"`
	Remember  store.Scope   `json:"remember,omitempty"`
	// AwaitsCaller is omitted when false, so decisions stored before it
	// existed read back as they were.
	AwaitsCaller bool `json:"awaits_caller,omitempty"`
	// StepUp is omitted when empty, for the same reason.
	StepUp string `json:"step_up,omitempty"`
}

func encodeDecisions(ds []store.Decision) (any, error) {
	if ds == nil {
		return nil, nil
	}
	out := make([]storedDecision, len(ds))
	for i, d := range ds {
		at, err := nanos("decision.at", d.At)
		if err != nil {
			return nil, err
		}
		out[i] = storedDecision{Actor: d.Actor, ActorKind: d.ActorKind, Decision: d.Decision, Via: d.Via, At: at, Reason: d.Reason, Remember: d.Remember, AwaitsCaller: d.AwaitsCaller, StepUp: d.StepUp}
	}
	return jsonList(out)
}

func decodeDecisions(s sql.NullString) ([]store.Decision, error) {
	sds, err := fromJSONList[storedDecision](s)
	if err != nil || sds == nil {
		return nil, err
	}
	out := make([]store.Decision, len(sds))
	for i, d := range sds {
		out[i] = store.Decision{Actor: d.Actor, ActorKind: d.ActorKind, Decision: d.Decision, Via: d.Via, At: fromNanos(d.At), Reason: d.Reason, Remember: d.Remember, AwaitsCaller: d.AwaitsCaller, StepUp: d.StepUp}
	}
	return out, nil
}

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

// proposalColumnCount is the number of proposalColumns.
var proposalColumnCount = strings.Count(proposalColumns, ",") + 1

// pcols is proposalColumns qualified by the alias p.
var pcols = func() string {
	cols := strings.Split(proposalColumns, ",")
	for i, c := range cols {
		cols[i] = "p." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}()

// changeable are the columns of p that a transition may change
// (updateProposalSQL's), encoded; status, attempt, consumed_by and version
// need no encoding.
type changeable struct {
	decisions, outcome, approvers              any
	leaseOwner, leaseToken, leaseGen, leaseExp any
	next, escalateAt, remindAt, updated        any
}

// encoder encodes a proposal's columns, keeping the first error.
type encoder struct {
	id  string
	err error
}

func (c *encoder) fail(what string, e error) {
	if c.err == nil && e != nil {
		c.err = fmt.Errorf("encode proposal %s: %s: %w", c.id, what, e)
	}
}

// encodeChangeable encodes the columns of p a transition may change.
func encodeChangeable(p *store.Proposal) (changeable, error) {
	enc := &encoder{id: p.ID}
	var v changeable
	var e error
	v.decisions, e = encodeDecisions(p.Decisions)
	enc.fail("decisions", e)
	if l := p.Lease; l != nil {
		v.leaseOwner, v.leaseToken, v.leaseGen = l.Owner, l.Token, l.Generation
		v.leaseExp, e = nanos("lease.expires_at", l.ExpiresAt)
		enc.fail("lease", e)
	}
	v.next, e = nullNanos("next_attempt_at", p.NextAttemptAt)
	enc.fail("next_attempt_at", e)
	v.outcome, e = encodeOutcome(p.Outcome)
	enc.fail("outcome", e)
	v.approvers, e = jsonList(p.Approvers)
	enc.fail("approvers", e)
	v.escalateAt, e = nullNanos("escalate_at", p.EscalateAt)
	enc.fail("escalate_at", e)
	v.remindAt, e = nullNanos("remind_at", p.RemindAt)
	enc.fail("remind_at", e)
	v.updated, e = nanos("updated_at", p.UpdatedAt)
	enc.fail("updated_at", e)
	return v, enc.err
}

// proposalValues encodes p in proposalColumns order.
func proposalValues(p *store.Proposal) ([]any, error) {
	v, err := encodeChangeable(p)
	if err != nil {
		return nil, err
	}
	enc := &encoder{id: p.ID}
	roles, e := jsonList(p.RequesterRoles)
	enc.fail("requester_roles", e)
	confirmation, e := encodeConfirmation(p.Confirmation)
	enc.fail("confirmation", e)
	channels, e := jsonList(p.Channels)
	enc.fail("channels", e)
	scopes, e := jsonList(p.RememberScopes)
	enc.fail("remember_scopes", e)
	expires, e := nanos("expires_at", p.ExpiresAt)
	enc.fail("expires_at", e)
	created, e := nanos("created_at", p.CreatedAt)
	enc.fail("created_at", e)
	escalateTo, e := jsonList(p.EscalateTo)
	enc.fail("escalate_to", e)
	notify, e := jsonList(p.Notify)
	enc.fail("notify", e)
	if enc.err != nil {
		return nil, enc.err
	}
	return []any{
		p.ID, p.Tenant, p.Requester, roles, p.ThreadID, p.RunID, p.ToolCallID,
		p.Action, p.ActionVersion, rawText(p.Input), rawText(p.RawInput), p.InputDigest, p.Preview, p.StateVersion,
		string(confirmation), p.ConfirmationID, string(p.Mode), string(p.Status), v.approvers, p.Quorum, boolInt(p.ForbidSelfApproval),
		channels, scopes, boolInt(p.GrantAnyInput), int64(p.GrantTTL), p.ReplacementKey, v.decisions,
		expires, p.OperationID, p.Attempt, v.leaseOwner, v.leaseToken, v.leaseGen,
		v.leaseExp, p.ConsumedBy, v.next, v.outcome, p.Version, created, v.updated,
		p.RuleFingerprint, v.escalateAt, escalateTo, v.remindAt, int64(p.RemindEvery),
		p.RuleMatch, p.RuleWhen, p.RequesterKind,
		notify, p.StepUp, p.TraceParent,
	}, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// withExtra scans the columns after a row's proposalColumns into extra.
func withExtra(row scanner, extra ...any) scanner { return extraScanner{row, extra} }

type extraScanner struct {
	row   scanner
	extra []any
}

func (e extraScanner) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }

// scanProposal reads a row of proposalColumns.
func scanProposal(row scanner) (*store.Proposal, error) {
	var (
		p                                           store.Proposal
		roles, input, rawInput, approvers, channels sql.NullString
		scopes, decisions, outcome                  sql.NullString
		confirmation, mode, status                  string
		forbidSelf, anyInput, grantTTL              int64
		expires, created, updated                   int64
		leaseOwner, leaseToken                      sql.NullString
		leaseGen, leaseExp, next                    sql.NullInt64
		escalateAt, remindAt                        sql.NullInt64
		escalateTo, notify                          sql.NullString
		remindEvery                                 int64
	)
	err := row.Scan(
		&p.ID, &p.Tenant, &p.Requester, &roles, &p.ThreadID, &p.RunID, &p.ToolCallID,
		&p.Action, &p.ActionVersion, &input, &rawInput, &p.InputDigest, &p.Preview, &p.StateVersion,
		&confirmation, &p.ConfirmationID, &mode, &status, &approvers, &p.Quorum, &forbidSelf,
		&channels, &scopes, &anyInput, &grantTTL, &p.ReplacementKey, &decisions,
		&expires, &p.OperationID, &p.Attempt, &leaseOwner, &leaseToken, &leaseGen,
		&leaseExp, &p.ConsumedBy, &next, &outcome, &p.Version, &created, &updated,
		&p.RuleFingerprint, &escalateAt, &escalateTo, &remindAt, &remindEvery,
		&p.RuleMatch, &p.RuleWhen, &p.RequesterKind,
		&notify, &p.StepUp, &p.TraceParent,
	)
	if err != nil {
		return nil, err
	}
	p.Input, p.RawInput = fromRawText(input), fromRawText(rawInput)
	p.Mode, p.Status = store.Mode(mode), store.Status(status)
	p.ForbidSelfApproval, p.GrantAnyInput = forbidSelf != 0, anyInput != 0
	p.GrantTTL = time.Duration(grantTTL)
	p.ExpiresAt, p.CreatedAt, p.UpdatedAt = fromNanos(expires), fromNanos(created), fromNanos(updated)
	p.NextAttemptAt = fromNullNanos(next)
	p.EscalateAt, p.RemindAt, p.RemindEvery = fromNullNanos(escalateAt), fromNullNanos(remindAt), time.Duration(remindEvery)
	if p.EscalateTo, err = fromJSONStrings[string](escalateTo); err != nil {
		return nil, fmt.Errorf("decode proposal %s: escalate_to: %w", p.ID, err)
	}
	if leaseToken.Valid {
		p.Lease = &store.Lease{Owner: leaseOwner.String, Token: leaseToken.String, Generation: leaseGen.Int64, ExpiresAt: fromNanos(leaseExp.Int64)}
	}
	if p.Confirmation, err = decodeConfirmation([]byte(confirmation)); err != nil {
		return nil, fmt.Errorf("decode proposal %s: confirmation: %w", p.ID, err)
	}
	if p.RequesterRoles, err = fromJSONStrings[string](roles); err != nil {
		return nil, fmt.Errorf("decode proposal %s: requester_roles: %w", p.ID, err)
	}
	if p.Approvers, err = fromJSONStrings[string](approvers); err != nil {
		return nil, fmt.Errorf("decode proposal %s: approvers: %w", p.ID, err)
	}
	if p.Channels, err = fromJSONStrings[string](channels); err != nil {
		return nil, fmt.Errorf("decode proposal %s: channels: %w", p.ID, err)
	}
	if p.Notify, err = fromJSONStrings[string](notify); err != nil {
		return nil, fmt.Errorf("decode proposal %s: notify: %w", p.ID, err)
	}
	if p.RememberScopes, err = fromJSONStrings[store.Scope](scopes); err != nil {
		return nil, fmt.Errorf("decode proposal %s: remember_scopes: %w", p.ID, err)
	}
	if p.Decisions, err = decodeDecisions(decisions); err != nil {
		return nil, fmt.Errorf("decode proposal %s: decisions: %w", p.ID, err)
	}
	if p.Outcome, err = decodeOutcome(outcome); err != nil {
		return nil, fmt.Errorf("decode proposal %s: outcome: %w", p.ID, err)
	}
	return &p, nil
}

// grantColumns lists the columns of a grant row, in scanGrant's order.
const grantColumns = `id, tenant, requester, scope, thread_id, run_id, action, action_version,
	input_digest, origin_proposal_id, granted_by, created_at, activated_at, expires_at,
	revoked_at, revoked_by, rule_fingerprint`

func scanGrant(row scanner) (*store.Grant, error) {
	var (
		g                           store.Grant
		scope                       string
		created                     int64
		activated, expires, revoked sql.NullInt64
	)
	err := row.Scan(&g.ID, &g.Tenant, &g.Requester, &scope, &g.ThreadID, &g.RunID, &g.Action, &g.ActionVersion,
		&g.InputDigest, &g.OriginProposalID, &g.GrantedBy, &created, &activated, &expires,
		&revoked, &g.RevokedBy, &g.RuleFingerprint)
	if err != nil {
		return nil, err
	}
	g.Scope = store.Scope(scope)
	g.CreatedAt = fromNanos(created)
	g.ActivatedAt, g.ExpiresAt, g.RevokedAt = fromNullNanos(activated), fromNullNanos(expires), fromNullNanos(revoked)
	return &g, nil
}

// uniqueViolation reports whether err is a UNIQUE or PRIMARY KEY constraint
// failure, and on which columns (SQLite names them in the message, e.g.
// "UNIQUE constraint failed: proposals.tenant, proposals.thread_id, …").
func uniqueViolation(err error) (string, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "", false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return se.Error(), true
	}
	return "", false
}
