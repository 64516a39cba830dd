package server

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
)

// findThread loads a thread of the caller's tenant, or answers 404. Thread
// ids are namespaced by tenant: another tenant's thread of the same id is
// another thread, and this tenant's does not exist.
func (s *Server) findThread(ctx context.Context, id countersign.Identity, threadID string) (*store.Thread, error) {
	if threadID == "" || len(threadID) > store.MaxIDLen {
		return nil, errNotFound("no thread %q", threadID)
	}
	t, err := s.store.GetThread(ctx, &store.GetThreadParams{Tenant: id.Tenant, ID: threadID})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNotFound("no thread %q", threadID)
	}
	return t, err
}

func (s *Server) handleGetThread(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	t, err := s.findThread(r.Context(), id, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	// Messages carry the outcomes of every proposal of the thread: they are
	// its owner's conversation.
	if t.Owner != id.Actor {
		return errForbidden("only the thread's owner may read it")
	}
	msgs, err := s.store.ListMessages(r.Context(), &store.ListMessagesParams{Tenant: id.Tenant, ThreadID: t.ID})
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("no thread %q", t.ID) // deleted meanwhile
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"thread": wireThread(t), "messages": wireMessages(msgs)})
	return nil
}

// mayManageGrant reports whether id may see and revoke g: its requester (who
// can always give up a standing approval), the approver who granted it, and
// operators.
func mayManageGrant(id countersign.Identity, g *store.Grant) bool {
	return g.Tenant == id.Tenant &&
		(g.Requester == id.Actor || g.GrantedBy == id.Actor || slices.Contains(id.Roles, countersign.RoleOperator))
}

func (s *Server) handleListGrants(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	gs, err := s.engine.Grants(r.Context(), id, q.Get("thread_id"))
	if err != nil {
		return err
	}
	out := []*Grant{}
	for _, g := range gs {
		if mayManageGrant(id, g) {
			out = append(out, wireGrant(g))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": out})
	return nil
}

func (s *Server) handleRevokeGrant(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	g, err := s.engine.RevokeGrant(context.WithoutCancel(r.Context()), id, r.PathValue("id"))
	switch {
	case errors.Is(err, countersign.ErrForbidden):
		return errForbidden("only the grant's requester, its approver or an operator may revoke it")
	case errors.Is(err, store.ErrNotFound):
		return errNotFound("no such grant")
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"grant": wireGrant(g)})
	return nil
}
