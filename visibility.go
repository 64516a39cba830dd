package countersign

import (
	"slices"

	"github.com/countersign/countersign/store"
)

// Who may see what. Every surface (HTTP, inbox, chat, AG-UI, MCP, CLI) asks
// the engine, and the engine asks these functions; nothing else decides.
//
// A proposal is visible to its thread's owner and to whoever may decide it
// (store.CanSee, which the drivers' listing queries restate and the
// conformance suite pins). Since a thread's owner is the only actor who may
// make calls in it (CreateProposal refuses any other requester), the owner of
// a proposal's thread is its requester, so no thread read is needed.

// visibilityOf is the listing filter for id: the actor, the principals
// ("actor:ID", "role:NAME") an approver list may name it by, and whether it
// is an operator.
func visibilityOf(id Identity) *store.Visibility {
	return &store.Visibility{Actor: id.Actor, Principals: Principals(id), Operator: slices.Contains(id.Roles, RoleOperator)}
}

// canSee reports whether id may see p.
func canSee(id Identity, p *store.Proposal) bool {
	return p.Tenant == id.Tenant && store.CanSee(p, p.Requester, visibilityOf(id))
}

// mayManageGrant reports whether id may see and revoke g: its requester (who
// can always give up a standing approval), the approver who granted it, and
// the tenant's operators.
func mayManageGrant(id Identity, g *store.Grant) bool {
	return g.Tenant == id.Tenant &&
		(g.Requester == id.Actor || g.GrantedBy == id.Actor || slices.Contains(id.Roles, RoleOperator))
}

// mayReadThread reports whether id may read thread t (a thread of id's
// tenant) and its conversation: only its owner. Its messages carry the
// outcomes of every call made in it.
func mayReadThread(id Identity, t *store.Thread) bool {
	return t.Owner == id.Actor
}
