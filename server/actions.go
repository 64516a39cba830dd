package server

import (
	"encoding/json"
	"net/http"

	"github.com/countersign/countersign"
)

// ActionInfo is one action of GET /v1/actions: an action the caller may
// call, and what the policy does with the caller's calls of it.
type ActionInfo struct {
	Name        string          `json:"name"`
	Version     string          `json:"version"`
	Kind        string          `json:"kind"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Confirmation is the action's copy, its {path} placeholders unfilled.
	Confirmation Confirmation `json:"confirmation"`
	// Effect is allow when every call the caller may make runs at once,
	// ask otherwise.
	Effect string `json:"effect"`
}

// ActionList is the answer of GET /v1/actions.
type ActionList struct {
	Actions []ActionInfo `json:"actions"`
}

// handleListActions answers GET /v1/actions for any credential, a person's
// or an agent's: the engine decides which actions the caller may call.
func (s *Server) handleListActions(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	list, err := s.engine.CallableActions(r.Context(), id)
	if err != nil {
		return err
	}
	out := ActionList{Actions: make([]ActionInfo, 0, len(list))}
	for _, ca := range list {
		a := ca.Action
		c := a.Confirmation()
		out.Actions = append(out.Actions, ActionInfo{
			Name: a.Name(), Version: a.Version(), Kind: string(a.Kind()), Description: a.Description(),
			InputSchema: a.InputSchema(), Confirmation: Confirmation{Title: c.Title, Verb: c.Verb},
			Effect: string(ca.Effect),
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
