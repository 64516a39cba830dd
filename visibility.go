package countersign

import (
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Who may see what. Every surface (HTTP, inbox, chat, AG-UI, MCP, CLI) asks
// the engine, and the engine asks these functions; nothing else decides.
//
// A proposal is visible to its requester, to whoever may decide it, and to
// the tenant's operators while it is reconciling or unknown (store.CanSee,
// which the drivers' listing queries restate and the conformance suite
// pins). The requester owned the proposal's thread when it was made: only a
// thread's owner makes calls in it (CreateProposal refuses anyone else).

// visibilityOf is the listing filter for id: the actor, the principals
// ("actor:ID", "role:NAME") an approver list may name it by, and whether it
// is an operator.
//
// An agent credential sees only what its actor requested: visibility that
// comes from being an approver or an operator never extends to it.
func visibilityOf(id Identity) *store.Visibility {
	if !id.IsHuman() {
		return &store.Visibility{Actor: id.Actor}
	}
	return &store.Visibility{Actor: id.Actor, Principals: Principals(id), Operator: isOperator(id)}
}

// canSee reports whether id may see p.
func canSee(id Identity, p *cstype.Proposal) bool {
	return p.Tenant == id.Tenant && store.CanSee(p, visibilityOf(id))
}

// mayManageGrant reports whether id may see and revoke g: its requester (who
// can always give up a standing approval), the approver who granted it, and
// the tenant's operators. An agent credential sees its actor's grants as
// their requester only, and revokes none (RevokeGrant asks mayAct first).
func mayManageGrant(id Identity, g *cstype.Grant) bool {
	if !id.IsHuman() {
		return g.Tenant == id.Tenant && g.Requester == id.Actor
	}
	return g.Tenant == id.Tenant &&
		(g.Requester == id.Actor || g.GrantedBy == id.Actor || isOperator(id))
}

// mayReadThread reports whether id may read thread t (a thread of id's
// tenant) and its conversation: only its owner. Its messages carry the
// outcomes of every call made in it.
func mayReadThread(id Identity, t *cstype.Thread) bool {
	return t.Owner == id.Actor
}
