package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/auditchain"
)

// AuditEvent is one event of the tenant's audit chain, in the chain's own
// exported form: the chain defines it once (auditchain.Event), and the
// server answers it as it is. Every field is always written but
// actor_kind, which is absent (never null or "") on an event no credential
// is behind and on one sealed before kinds were recorded, and at is the
// chain's own spelling of the time: the event's hash covers exactly this
// object without hash, so a client verifies what it received, as
// `countersign audit verify` does.
type AuditEvent = auditchain.Event

// AuditPage is the answer of GET /v1/audit.
type AuditPage struct {
	Events []*AuditEvent `json:"events"`
	// Next is the after of the next page; null when the page ends the
	// chain as sealed so far.
	Next *int64 `json:"next"`
}

// handleAudit answers GET /v1/audit?after=SEQ&limit=N: the caller's
// tenant's chain, for operators.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	after, limit, err := auditQuery(r)
	if err != nil {
		return err
	}
	page, err := s.engine.Audit(r.Context(), id, after, limit)
	if err != nil {
		return auditRefused(err)
	}
	out := AuditPage{Events: make([]*AuditEvent, len(page.Events)), Next: nextAfter(page.Next)}
	for i, ae := range page.Events {
		out.Events[i] = ae.Chained()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// auditRefused answers the engine's refusal of a read of the audit log:
// an agent's credential, or a human's without the operator role.
func auditRefused(err error) error {
	if ae := agentRefused(err); ae != nil {
		return ae
	}
	if errors.Is(err, countersign.ErrForbidden) {
		return errForbidden("reading the audit log needs the operator role")
	}
	return err
}

// nextAfter is a page's next cursor as answered: null when the page is the last.
func nextAfter(next int64) *int64 {
	if next == 0 {
		return nil
	}
	return &next
}

// auditQuery reads after (a seq, default 0) and limit from a request of the
// audit log or its checkpoints.
func auditQuery(r *http.Request) (after int64, limit int, err error) {
	q, err := query(r)
	if err != nil {
		return 0, 0, err
	}
	if limit, err = parseLimit(q); err != nil {
		return 0, 0, err
	}
	if v := q.Get("after"); v != "" {
		after, err = strconv.ParseInt(v, 10, 64)
		if err != nil || after < 0 {
			return 0, 0, errBadParam("after", "want a seq: an integer from 0")
		}
	}
	return after, limit, nil
}

// AuditCheckpoint is one signed checkpoint of the tenant's audit chain:
// the signature covers exactly this object without signature, at in the
// spelling signed, so that a client verifies what it received, as
// `countersign audit verify --public-key` does. It is auditchain's
// definition, the one the verifier reads.
type AuditCheckpoint = auditchain.Checkpoint

// AuditCheckpointPage is the answer of GET /v1/audit/checkpoints.
type AuditCheckpointPage struct {
	Checkpoints []*AuditCheckpoint `json:"checkpoints"`
	// Next is the after of the next page; null when this page holds the
	// last checkpoint.
	Next *int64 `json:"next"`
}

// handleAuditCheckpoints answers GET /v1/audit/checkpoints?after=SEQ: the
// caller's tenant's signed checkpoints, for operators.
func (s *Server) handleAuditCheckpoints(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	after, limit, err := auditQuery(r)
	if err != nil {
		return err
	}
	page, err := s.engine.AuditCheckpoints(r.Context(), id, after, limit)
	if err != nil {
		return auditRefused(err)
	}
	out := AuditCheckpointPage{Checkpoints: make([]*AuditCheckpoint, len(page.Checkpoints)), Next: nextAfter(page.Next)}
	for i, c := range page.Checkpoints {
		out.Checkpoints[i] = c.Signed()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
