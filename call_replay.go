package countersign

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/countersign/countersign/store"
)

// lookup reads, in one store call (one round trip to a database server),
// what the steps before the record need: the call's thread for checkOwner,
// its tool call's record for replay and, for a call that asks and whose
// input is valid, the live grant that could approve it for findGrant. The
// record and the grant come back with the thread, but nothing of them is
// used before checkOwner has passed.
func (e *Engine) lookup(ctx context.Context, c *Call, r *callRun) (*store.CallLookup, error) {
	params := &store.LookupCallParams{Tenant: c.Identity.Tenant, ThreadID: c.ThreadID, ToolCallID: c.ToolCallID}
	if r.asked() && r.inputErr == nil {
		a := r.a
		params.Grant = &store.FindGrantParams{
			Tenant: c.Identity.Tenant, Requester: c.Identity.Actor, ThreadID: c.ThreadID, RunID: c.RunID,
			Action: a.name, ActionVersion: a.version, InputDigest: r.digest, RuleFingerprint: r.fingerprint,
		}
	}
	l, err := e.store.LookupCall(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("call %s: lookup: %w", r.a.name, err)
	}
	return l, nil
}

// checkOwner makes sure the caller owns the call's thread t (nil when it
// does not exist), before anything of the thread is used, stored or run: a
// thread belongs to its first caller, and only the owner makes calls in it.
// lookup read the thread, and in the same round trip the call's record and
// grant, which stay unused until the owner check has passed; a caller in
// another actor's thread learns nothing of them. A thread that does not
// exist yet is created, owned by the caller, with the call's record
// (CreateProposal refuses another actor's thread, for the caller who loses
// that race); for a call that leaves no record (a read) it is created here,
// in a write only the thread's first call pays.
func (e *Engine) checkOwner(ctx context.Context, c *Call, r *callRun, t *cstype.Thread) error {
	if t == nil && r.recorded() {
		return nil
	}
	if t == nil {
		var err error
		t, err = e.store.EnsureThread(ctx, &store.EnsureThreadParams{Tenant: c.Identity.Tenant, ID: c.ThreadID, Owner: c.Identity.Actor})
		if err != nil {
			return fmt.Errorf("call %s: thread: %w", r.a.name, err)
		}
	}
	if t.Owner != c.Identity.Actor {
		return notOwner(c)
	}
	return nil
}

// notOwner is the refusal of a call in another actor's thread. It names
// nothing the caller did not send.
func notOwner(c *Call) *ForbiddenError {
	return &ForbiddenError{Actor: c.Identity.Actor, Reason: "only the thread's owner may make calls in it"}
}

// replay checks the record p (nil when the tool call is new) that lookup
// found of a repeated tool call, which resumes it: a repeated call never
// proposes or executes anew. It returns nil when the tool call is new, and a
// *MismatchError when the repeat names another action or another input
// than the record.
func (e *Engine) replay(c *Call, r *callRun, p *cstype.Proposal) (*cstype.Proposal, error) {
	switch {
	case p == nil:
		return nil, nil
	case p.Requester != c.Identity.Actor:
		// Only a thread that was deleted and taken by another actor can
		// hold another requester's record: it is not the caller's.
		return nil, notOwner(c)
	}
	if err := notReused(c, p); err != nil {
		return nil, err
	}
	if err := sameCall(c, r, p); err != nil {
		return nil, err
	}
	if err := replayedEvidence(c, p); err != nil {
		return nil, err
	}
	return p, nil
}

// notReused refuses p, the record of c's tool call id, to a call that
// must be new to its thread (Call.FreshToolCallID) when p is not its own
// run's: it is checked before the action and input are compared, so that
// the refusal says the id is taken, whatever the other call was.
func notReused(c *Call, p *cstype.Proposal) error {
	if c.FreshToolCallID && (c.RunID == "" || p.RunID != c.RunID) {
		return &ToolCallIDReusedError{ToolCallID: c.ToolCallID}
	}
	return nil
}

// sameCall refuses a repeat of p's tool call that names another action or
// another input. Inputs compare by the digest of the validated input, so
// that key order, spacing and the schema's normalization do not count; an
// input the action's schema now refuses compares by its canonical form, so
// that a genuine retry still replays after the schema changed.
func sameCall(c *Call, r *callRun, p *cstype.Proposal) error {
	var differs []string
	if p.Action != r.a.name {
		differs = append(differs, "action")
	}
	if inputDigest(r, c.Input) != p.InputDigest {
		differs = append(differs, "input")
	}
	if len(differs) == 0 {
		return nil
	}
	return &MismatchError{ToolCallID: c.ToolCallID, Differs: differs, Action: p.Action, InputDigest: p.InputDigest}
}

// inputDigest is the digest r's call would record for its input raw
// (prepareInput's), or, when the action's schema refuses raw, the digest of
// raw's canonical form; "" when raw is not JSON.
func inputDigest(r *callRun, raw json.RawMessage) string {
	if r.inputErr == nil {
		return r.digest
	}
	canon, err := canonjson.Canonicalize(raw)
	if err != nil {
		return ""
	}
	digest, err := canonjson.Digest(canon)
	if err != nil {
		return ""
	}
	return digest
}
