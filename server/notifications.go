package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/redact"
)

// Notification is one entry of the notification outbox, as operators see
// it. Its body (the payload a receiver gets) is not shown: it is the
// proposal, which the operator reads through the proposals' routes.
type Notification struct {
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	ProposalID    string    `json:"proposal_id"`
	Target        string    `json:"target"`
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error"`
	At            time.Time `json:"at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func wireNotification(n *cstype.OutboxEntry) *Notification {
	// The deliverer stores errors redacted; a row an older version wrote
	// may still hold a receiver's URL with its token.
	return &Notification{
		ID: n.ID, Type: string(n.EventType), ProposalID: n.ProposalID, Target: n.Target,
		Status: string(n.Status), Attempts: n.Attempts, NextAttemptAt: n.NextAttemptAt.UTC(),
		LastError: redact.URLs(n.LastError), At: n.At.UTC(), UpdatedAt: n.UpdatedAt.UTC(),
	}
}

// RenderProposal is the proposal object of the API, as JSON: what a
// notification's "proposal" holds, so that receivers parse the same object
// the routes answer with.
func RenderProposal(p *cstype.Proposal) (json.RawMessage, error) {
	return json.Marshal(wireProposal(p))
}

func (s *Server) handleListNotifications(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	status := cstype.NotificationStatus(q.Get("status"))
	if status != "" && !status.Valid() {
		return errBadParam("status", "want pending, delivered or failed")
	}
	limit, err := parseLimit(q)
	if err != nil {
		return err
	}
	// The engine decides who may list them: operators of the tenant.
	ns, err := s.engine.Notifications(r.Context(), id, status, limit)
	if err != nil {
		return notificationError(err)
	}
	out := make([]*Notification, len(ns))
	for i, n := range ns {
		out[i] = wireNotification(n)
	}
	writeJSON(w, http.StatusOK, map[string]any{"notifications": out})
	return nil
}

func (s *Server) handleRetryNotification(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req struct{}
	if err := readBody(w, r, &req, true); err != nil {
		return err
	}
	// A retry once asked for is not abandoned with its client.
	n, err := s.engine.RetryNotification(context.WithoutCancel(r.Context()), id, r.PathValue("id"))
	if err != nil {
		return notificationError(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"notification": wireNotification(n)})
	return nil
}

func notificationError(err error) error {
	if ae := agentRefused(err); ae != nil {
		return ae
	}
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return errForbidden("%s", fe.Reason)
	}
	if ce, ok := errors.AsType[*cstype.ConflictError](err); ok {
		// No details: the documented details of INVALID_STATE are a
		// proposal's status, which clients type as such.
		return newError(http.StatusConflict, CodeInvalidState, "the notification is %s; only a failed one is retried", ce.Got)
	}
	if errors.Is(err, countersign.ErrNotFound) {
		return errNotFound("no such notification")
	}
	return err
}
