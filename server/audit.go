package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/countersign/countersign"
)

// AuditEvent is one event of the tenant's audit chain. Every field is
// always written, and at is the chain's own spelling of the time: the
// event's hash covers exactly this object without hash, so a client
// verifies what it received, as `countersign audit verify` does.
type AuditEvent struct {
	Seq        int64  `json:"seq"`
	ID         int64  `json:"id"`
	Type       string `json:"type"`
	ProposalID string `json:"proposal_id"`
	Actor      string `json:"actor"`
	Via        string `json:"via"`
	Status     string `json:"status"`
	Detail     string `json:"detail"`
	At         string `json:"at"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

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
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	var after int64
	if v := q.Get("after"); v != "" {
		after, err = strconv.ParseInt(v, 10, 64)
		if err != nil || after < 0 {
			return errBadParam("after", "want a seq: an integer from 0")
		}
	}
	page, err := s.engine.Audit(r.Context(), id, after, limit)
	if ae := agentRefused(err); ae != nil {
		return ae
	}
	if errors.Is(err, countersign.ErrForbidden) {
		return errForbidden("reading the audit log needs the operator role")
	}
	if err != nil {
		return err
	}
	out := AuditPage{Events: make([]*AuditEvent, len(page.Events))}
	for i, ae := range page.Events {
		c := ae.Chained()
		out.Events[i] = &AuditEvent{Seq: c.Seq, ID: c.ID, Type: c.Type, ProposalID: c.ProposalID, Actor: c.Actor, Via: c.Via,
			Status: c.Status, Detail: c.Detail, At: c.At, PrevHash: c.PrevHash, Hash: c.Hash}
	}
	if page.Next != 0 {
		out.Next = &page.Next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
