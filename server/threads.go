package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/countersign/countersign"
)

// threadError maps the engine's refusals of a thread read: 404 for a thread
// this tenant does not have (thread ids are namespaced by tenant, so
// another tenant's thread of the same id is simply not this one), 403 for
// one the caller may not read, saying nothing of it.
func threadError(err error, threadID string) error {
	switch {
	case err == nil:
		return nil
	case agentRefused(err) != nil:
		return agentRefused(err)
	case errors.Is(err, countersign.ErrForbidden):
		return errForbidden("only the thread's owner may read it")
	case errors.Is(err, countersign.ErrNotFound):
		return errNotFound("no thread %q", threadID)
	}
	return err
}

func (s *Server) handleGetThread(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	threadID := r.PathValue("thread_id")
	v, err := s.engine.Thread(r.Context(), id, threadID)
	if err != nil {
		return threadError(err, threadID)
	}
	writeJSON(w, http.StatusOK, map[string]any{"thread": wireThread(v.Thread), "messages": wireMessages(v.Messages), "runs": wireRuns(v.Runs)})
	return nil
}

func (s *Server) handleListGrants(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	// The engine lists only the grants id may manage.
	gs, err := s.engine.Grants(r.Context(), id, q.Get("thread_id"))
	if err != nil {
		return err
	}
	out := make([]*Grant, len(gs))
	for i, g := range gs {
		out[i] = wireGrant(g)
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": out})
	return nil
}

func (s *Server) handleRevokeGrant(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	// The engine authorises the revocation; a revocation once asked for is
	// not abandoned with its client.
	g, err := s.engine.RevokeGrant(context.WithoutCancel(r.Context()), id, r.PathValue("id"))
	switch {
	case agentRefused(err) != nil:
		return agentRefused(err)
	case errors.Is(err, countersign.ErrForbidden):
		return errForbidden("only the grant's requester, its approver or an operator may revoke it")
	case errors.Is(err, countersign.ErrNotFound):
		return errNotFound("no such grant")
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"grant": wireGrant(g)})
	return nil
}
