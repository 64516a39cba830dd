package server

import (
	"net/http"

	"github.com/countersign/countersign"
)

// Me is the answer of GET /v1/me: who the presented credential stands for.
type Me struct {
	Tenant string   `json:"tenant"`
	Actor  string   `json:"actor"`
	Kind   string   `json:"kind"`
	Roles  []string `json:"roles"`
}

// handleMe answers GET /v1/me for any credential: its tenant, actor, kind
// and roles. Clients and framework adapters ask it to refuse to run with a
// credential of the wrong kind (an adapter needs an agent's).
func (s *Server) handleMe(w http.ResponseWriter, _ *http.Request, id countersign.Identity) error {
	writeJSON(w, http.StatusOK, Me{
		Tenant: id.Tenant, Actor: id.Actor, Kind: string(id.KindOrHuman()),
		Roles: orEmpty(append([]string(nil), id.Roles...)),
	})
	return nil
}
