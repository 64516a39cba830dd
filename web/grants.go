package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// grantItem is one grant of the grants page, and what the page says of it.
type grantItem struct {
	*cstype.Grant
	// State is the grant's standing in one word (live, revoked, expired,
	// inactive), for the badge and for scripts and tests to read.
	State string
	// Note says what the state means for the next call.
	Note string
}

type grantsData struct {
	Thread string
	Grants []grantItem
	Result string
	Empty  string
}

// grantState says where a grant stands at now. Revoked outranks expired: a
// person ended it, which is what the approver wants to see.
func grantState(g *cstype.Grant, now time.Time) (state, note string) {
	switch {
	case g.RevokedAt != nil:
		note = "Revoked"
		if g.RevokedBy != "" {
			note += " by " + g.RevokedBy
		}
		return "revoked", note + " at " + g.RevokedAt.UTC().Format("2006-01-02 15:04:05 UTC") + ": it approves nothing."
	case g.ExpiresAt != nil && !now.Before(*g.ExpiresAt):
		return "expired", "Expired at " + g.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC") + ": it approves nothing."
	case g.ActivatedAt == nil:
		return "inactive", "Not live yet: it approves calls once the approved call it was made with succeeds."
	}
	if g.ExpiresAt != nil {
		return "live", "Live until " + g.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC") + ", unless revoked or its rule changes."
	}
	return "live", "Live until revoked, or until its rule changes."
}

// grantResults are the answers to a revocation, in words.
var grantResults = map[string]string{
	"revoked": "The grant is revoked: calls it covered need a decision again.",
}

func (in *Inbox) handleGrants(w http.ResponseWriter, r *http.Request) error {
	sess := sessionOf(r)
	d := &grantsData{Thread: threadFilter(r.URL.Query()), Result: grantResults[r.URL.Query().Get("result")]}
	// The engine lists only the grants this actor may see and revoke.
	gs, err := in.engine.Grants(r.Context(), sess.Identity, d.Thread)
	switch {
	case errors.Is(err, cstype.ErrInvalidParams):
		return errPage(http.StatusBadRequest, "Bad filter", "The filter is not valid.")
	case err != nil:
		return err
	}
	now := in.now()
	for _, g := range gs {
		state, note := grantState(g, now)
		d.Grants = append(d.Grants, grantItem{Grant: g, State: state, Note: note})
	}
	if d.Thread == "" {
		d.Empty = "No remembered approvals. Approving with “remember” makes one."
	} else {
		d.Empty = "No remembered approvals in this thread."
	}
	in.render(w, r, http.StatusOK, "grants", &pageData{Title: "Grants", Session: sess, Data: d})
	return nil
}

func (in *Inbox) handleRevokeGrant(w http.ResponseWriter, r *http.Request) error {
	sess := sessionOf(r)
	// The engine decides who may revoke; another tenant's grant is simply
	// not found, as an unknown one is. A revocation once asked for is not
	// abandoned with the browser's connection.
	_, err := in.engine.RevokeGrant(context.WithoutCancel(r.Context()), sess.Identity, r.PathValue("id"))
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return errPage(http.StatusForbidden, "Not yours", "You may not revoke this grant: "+fe.Reason+".")
	}
	switch {
	case errors.Is(err, countersign.ErrNotFound):
		return errPage(http.StatusNotFound, "Not found", "There is no such grant.")
	case err != nil:
		return err
	}
	back := url.Values{"result": {"revoked"}}
	if t := r.PostForm.Get("thread"); t != "" {
		back.Set("thread", t)
	}
	http.Redirect(w, r, "/grants?"+back.Encode(), http.StatusSeeOther)
	return nil
}
