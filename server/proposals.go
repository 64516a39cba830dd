package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
)

// query parses the request's query string; a malformed one is a 400.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errBadParam("query", "malformed query string")
	}
	return q, nil
}

// parseLimit reads a page size: absent means the largest page.
func parseLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return store.MaxPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.MaxPageSize {
		return 0, errBadParam("limit", "want an integer from 1 to 1000")
	}
	return n, nil
}

// parseWait reads wait_seconds from a query: absent (ok false), or 0..60.
func parseWait(q url.Values) (seconds float64, ok bool, err error) {
	v := q.Get("wait_seconds")
	if v == "" {
		return 0, false, nil
	}
	f, perr := strconv.ParseFloat(v, 64)
	if perr != nil || math.IsNaN(f) || f < 0 || f > MaxWait.Seconds() {
		return 0, false, errBadParam("wait_seconds", "want a number from 0 to 60")
	}
	return f, true, nil
}

// escapeURIComponent escapes s like JavaScript's encodeURIComponent, so
// decodeURIComponent restores it: url.QueryEscape, with spaces as %20
// rather than "+" (which decodeURIComponent leaves alone).
func escapeURIComponent(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// list answers one page of the proposals id may see.
func (s *Server) list(w http.ResponseWriter, r *http.Request, id countersign.Identity, params store.ListProposalsParams) error {
	page, err := s.engine.List(r.Context(), id, params)
	switch {
	case errors.Is(err, store.ErrInvalidCursor):
		return newError(http.StatusBadRequest, CodeInvalidCursor, "after: not a cursor this server issued, or altered")
	case errors.Is(err, store.ErrInvalidParams):
		return errBadParam("query", err.Error())
	case err != nil:
		return err
	}
	if page.Next != "" {
		w.Header().Set(NextHeader, escapeURIComponent(page.Next))
	}
	writeJSON(w, http.StatusOK, map[string]any{"proposals": wireProposals(page.Proposals)})
	return nil
}

func (s *Server) handleListProposals(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	params := store.ListProposalsParams{Action: q.Get("action"), ThreadID: q.Get("thread_id"), After: q.Get("after")}
	if params.Limit, err = parseLimit(q); err != nil {
		return err
	}
	// status=pending,approved and status=pending&status=approved both work.
	for _, v := range q["status"] {
		for st := range strings.SplitSeq(v, ",") {
			if st == "" {
				continue
			}
			if !store.Status(st).Valid() {
				return errBadParam("status", "unknown status "+strconv.Quote(st))
			}
			params.Statuses = append(params.Statuses, store.Status(st))
		}
	}
	return s.list(w, r, id, params)
}

func (s *Server) handleThreadProposals(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	if _, err := s.findThread(r.Context(), id, r.PathValue("thread_id")); err != nil {
		return err
	}
	params := store.ListProposalsParams{ThreadID: r.PathValue("thread_id"), After: q.Get("after")}
	if params.Limit, err = parseLimit(q); err != nil {
		return err
	}
	return s.list(w, r, id, params)
}

// findProposal loads a proposal of the caller's tenant: 404 when no tenant
// has it, 403 when another tenant does (API.md). It does not check
// visibility: deciders are checked by the engine, readers by visible.
func (s *Server) findProposal(ctx context.Context, id countersign.Identity, proposalID string) (*store.Proposal, error) {
	if proposalID == "" || len(proposalID) > store.MaxIDLen {
		return nil, errNotFound("no such proposal")
	}
	p, err := s.engine.Get(ctx, id, proposalID)
	if err == nil {
		return p, nil
	}
	if errors.Is(err, countersign.ErrForbidden) {
		return nil, errForbidden("you may not see this proposal")
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	tenant, err := s.store.ProposalTenant(ctx, proposalID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errNotFound("no such proposal")
	case err != nil:
		return nil, err
	case tenant != id.Tenant:
		return nil, errForbidden("you may not see this proposal")
	}
	// Created between the two reads: read it again.
	return s.engine.Get(ctx, id, proposalID)
}

// canSee reports whether id may see p: it owns p's thread, or may decide p.
func (s *Server) canSee(ctx context.Context, id countersign.Identity, p *store.Proposal) (bool, error) {
	owner := ""
	t, err := s.store.GetThread(ctx, &store.GetThreadParams{Tenant: p.Tenant, ID: p.ThreadID})
	switch {
	case err == nil:
		owner = t.Owner
	case !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	return p.Tenant == id.Tenant && store.CanSee(p, owner, visibility(id)), nil
}

func visibility(id countersign.Identity) *store.Visibility {
	return &store.Visibility{Actor: id.Actor, Principals: countersign.Principals(id)}
}

// visibleProposal is findProposal, and 403 when id may not see it.
func (s *Server) visibleProposal(ctx context.Context, id countersign.Identity, proposalID string) (*store.Proposal, error) {
	p, err := s.findProposal(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	ok, err := s.canSee(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errForbidden("you may not see this proposal")
	}
	return p, nil
}

func (s *Server) handleGetProposal(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	seconds, wait, err := parseWait(q)
	if err != nil {
		return err
	}
	pid := r.PathValue("id")
	p, err := s.visibleProposal(r.Context(), id, pid)
	if err != nil {
		return err
	}
	if wait && !(p.Status.Terminal() || p.Status == store.StatusReconciling) {
		ctx, cancel := s.requestContext(r)
		defer cancel()
		ctx, cancelWait := context.WithTimeout(ctx, waitFor(&seconds, 0, s.waitCap))
		defer cancelWait()
		waited, err := s.engine.Wait(ctx, id, pid)
		switch {
		case waited != nil:
			p = waited
		case r.Context().Err() != nil:
			return nil // the client left: nobody to answer
		case ctx.Err() != nil:
			// The wait ended while reading: read once more, unhurried.
			if p, err = s.engine.Get(r.Context(), id, pid); err != nil {
				return err
			}
		default:
			return err
		}
	}
	writeJSON(w, http.StatusOK, wireProposal(p))
	return nil
}

func (s *Server) handleProposalEvents(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	p, err := s.visibleProposal(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return err
	}
	var all []*store.Event
	var after int64
	const pageSize = 1000
	for {
		evs, err := s.store.ListEvents(r.Context(), &store.ListEventsParams{Tenant: id.Tenant, ProposalID: p.ID, AfterID: after, Limit: pageSize})
		if err != nil {
			return err
		}
		all = append(all, evs...)
		if len(evs) < pageSize {
			break
		}
		after = evs[len(evs)-1].ID
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": wireEvents(all)})
	return nil
}

// Decision bodies.
type (
	approveRequest struct {
		Reason   string `json:"reason"`
		Remember string `json:"remember"`
	}
	reasonRequest struct {
		Reason string `json:"reason"`
	}
	resolveRequest struct {
		Outcome string  `json:"outcome"`
		Receipt string  `json:"receipt"`
		Note    *string `json:"note"`
	}
)

// via is the decision channel the request records: "api", or "cli" when
// Countersign-Via says so. "web" is not accepted from a header: a bearer
// token could claim it and slip past a rule restricted to the inbox; the
// inbox records it from its own signed-in session instead.
func via(r *http.Request) (string, error) {
	vs := r.Header.Values(ViaHeader)
	switch {
	case len(vs) == 0:
		return "api", nil
	case len(vs) == 1 && vs[0] == "cli":
		return vs[0], nil
	}
	e := errBadBody("", ViaHeader+": want cli, once")
	e.details = []problem{{Path: "header " + ViaHeader, Message: "want cli, once"}}
	return "", e
}

// decisionError maps the engine's errors for a decision on p (nil when the
// proposal could not be loaded) to API.md's answers.
func (s *Server) decisionError(ctx context.Context, id countersign.Identity, p *store.Proposal, err error) error {
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		// The engine's reason may name the approvers: only for those who
		// may see the proposal anyway.
		if p != nil {
			if ok, _ := s.canSee(ctx, id, p); ok {
				return errForbidden("%s", fe.Reason)
			}
		}
		return errForbidden("you may not decide this proposal")
	}
	if ce, ok := errors.AsType[*store.ConflictError](err); ok {
		e := newError(http.StatusConflict, CodeInvalidState, "the proposal is %s; this needs %s", ce.Got, joinStatuses(ce.Want))
		e.details = map[string]string{"status": string(ce.Got)}
		return e
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		if ae.status == http.StatusNotFound {
			ae.bodyStatus = "not_found"
		}
		return ae
	case errors.Is(err, store.ErrNotFound):
		e := errNotFound("no such proposal")
		e.bodyStatus = "not_found"
		return e
	case errors.Is(err, countersign.ErrInvalidCall), errors.Is(err, store.ErrInvalidParams):
		return errBadBody("", err.Error())
	}
	return err
}

func joinStatuses(ss []store.Status) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, " or ")
}

// decided writes a decision's answer.
func decided(w http.ResponseWriter, status store.DecideOutcome, p *store.Proposal) error {
	writeJSON(w, http.StatusOK, map[string]any{"status": string(status), "proposal": wireProposal(p)})
	return nil
}

// decisionTarget reads the channel and loads the proposal a decision is
// about (404 not_found, 403 for another tenant's).
func (s *Server) decisionTarget(ctx context.Context, r *http.Request, id countersign.Identity) (string, *store.Proposal, error) {
	v, err := via(r)
	if err != nil {
		return "", nil, err
	}
	p, err := s.findProposal(ctx, id, r.PathValue("id"))
	if err != nil {
		return "", nil, s.decisionError(ctx, id, nil, err)
	}
	return v, p, nil
}

func (s *Server) handleDecide(verdict countersign.Verdict) authedFunc {
	return func(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
		var req approveRequest
		if verdict == countersign.Approve {
			if err := readBody(w, r, &req, true); err != nil {
				return err
			}
		} else {
			var rej reasonRequest
			if err := readBody(w, r, &rej, true); err != nil {
				return err
			}
			req.Reason = rej.Reason
		}
		remember := countersign.Scope(req.Remember)
		if remember != "" && !remember.Valid() {
			return errBadBody("remember", "want run or thread")
		}
		// A decision, once asked for, is not abandoned with its client.
		ctx := context.WithoutCancel(r.Context())
		v, p, err := s.decisionTarget(ctx, r, id)
		if err != nil {
			return err
		}
		res, err := s.engine.Decide(ctx, &countersign.Decision{
			Identity: id, ProposalID: p.ID, Verdict: verdict, Via: v, Reason: req.Reason, Remember: remember,
		})
		if err != nil {
			return s.decisionError(ctx, id, p, err)
		}
		return decided(w, res.Status, res.Proposal)
	}
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req reasonRequest
	if err := readBody(w, r, &req, true); err != nil {
		return err
	}
	ctx := context.WithoutCancel(r.Context())
	v, p, err := s.decisionTarget(ctx, r, id)
	if err != nil {
		return err
	}
	if p.Status == store.StatusCancelled && p.Requester == id.Actor {
		return decided(w, countersign.DecideUnchanged, p) // asking twice is not a conflict
	}
	out, err := s.engine.Cancel(ctx, id, p.ID, v, req.Reason)
	if err != nil {
		return s.decisionError(ctx, id, p, err)
	}
	return decided(w, countersign.DecideApplied, out)
}

func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req resolveRequest
	if err := readBody(w, r, &req, false); err != nil {
		return err
	}
	status := store.Status(req.Outcome)
	switch {
	case req.Outcome == "":
		return errBadBody("outcome", "required")
	case status != store.StatusSucceeded && status != store.StatusFailed:
		return errBadBody("outcome", "want succeeded or failed")
	case req.Note == nil || strings.TrimSpace(*req.Note) == "":
		return errBadBody("note", "required: say how the outcome was established")
	}
	ctx := context.WithoutCancel(r.Context())
	v, err := via(r)
	if err != nil {
		return err
	}
	// Operators resolve proposals they may not otherwise see: the engine
	// checks the role and the tenant.
	out, err := s.engine.Resolve(ctx, id, r.PathValue("id"), status, req.Receipt, *req.Note, v)
	if err != nil {
		return s.decisionError(ctx, id, nil, err)
	}
	return decided(w, countersign.DecideApplied, out)
}
