package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
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
		return cstype.MaxPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > cstype.MaxPageSize {
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

// list answers a page the engine read.
func list(w http.ResponseWriter, page *cstype.ProposalPage, err error) error {
	switch {
	case errors.Is(err, cstype.ErrInvalidCursor):
		return newError(http.StatusBadRequest, CodeInvalidCursor, "after: not a cursor this server issued, or altered")
	case errors.Is(err, cstype.ErrInvalidParams):
		e := errBadParam("query", "a value the server cannot look up")
		e.cause = err
		return e
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
	params := countersign.ListParams{Action: q.Get("action"), ThreadID: q.Get("thread_id"), After: q.Get("after")}
	if params.Limit, err = parseLimit(q); err != nil {
		return err
	}
	// status=pending,approved and status=pending&status=approved both work.
	for _, v := range q["status"] {
		for st := range strings.SplitSeq(v, ",") {
			if st == "" {
				continue
			}
			if !cstype.Status(st).Valid() {
				return errBadParam("status", "unknown status "+strconv.Quote(st))
			}
			params.Statuses = append(params.Statuses, cstype.Status(st))
		}
	}
	page, err := s.engine.List(r.Context(), id, params)
	return list(w, page, err)
}

func (s *Server) handleThreadProposals(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	threadID := r.PathValue("thread_id")
	params := countersign.ListParams{After: q.Get("after")}
	if params.Limit, err = parseLimit(q); err != nil {
		return err
	}
	page, err := s.engine.ThreadProposals(r.Context(), id, threadID, params)
	if err := threadError(err, threadID); err != nil {
		return list(w, nil, err)
	}
	return list(w, page, nil)
}

// readError maps the engine's refusals of a read of a proposal: 403 for
// another tenant's or one the caller may not see (saying nothing of it),
// 404 for none at all.
func readError(err error) error {
	switch {
	case err == nil:
		return nil
	case agentRefused(err) != nil:
		return agentRefused(err)
	case errors.Is(err, countersign.ErrForbidden):
		return errForbidden("you may not see this proposal")
	case errors.Is(err, countersign.ErrNotFound):
		return errNotFound("no such proposal")
	}
	return err
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
	p, err := s.engine.Proposal(r.Context(), id, pid)
	if err != nil {
		return readError(err)
	}
	if wait && !(p.Status.Terminal() || p.Status == cstype.StatusReconciling) {
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
			if p, err = s.engine.Proposal(r.Context(), id, pid); err != nil {
				return readError(err)
			}
		default:
			return err
		}
	}
	writeJSON(w, http.StatusOK, wireProposal(p))
	return nil
}

func (s *Server) handleProposalEvents(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	evs, err := s.engine.ProposalEvents(r.Context(), id, r.PathValue("id"))
	if err != nil {
		return readError(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": wireEvents(evs)})
	return nil
}

// Decision bodies.
type (
	approveRequest struct {
		Reason   string `json:"reason"`
		Remember string `json:"remember"`
		// Assertion is a passkey assertion (PublicKeyCredential.toJSON())
		// for a step-up proposal; the engine checks it.
		Assertion json.RawMessage `json:"assertion"`
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

// decisionError maps the engine's errors for a decision to docs/api.md's
// answers.
func decisionError(err error) error {
	if ae := agentRefused(err); ae != nil {
		return ae
	}
	if ae := invalidRemember(err); ae != nil {
		return ae
	}
	if ae := stepUpRefused(err); ae != nil {
		return ae
	}
	if ae := passkeyRefused(err); ae != nil {
		return ae
	}
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		// The engine checks visibility first: a reason that names more
		// than "you may not see this proposal" (the approvers, the rule's
		// channels) is only given to those who see the proposal anyway.
		return errForbidden("%s", fe.Reason)
	}
	if ce, ok := errors.AsType[*cstype.ConflictError](err); ok {
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
	case errors.Is(err, countersign.ErrNotFound):
		e := errNotFound("no such proposal")
		e.bodyStatus = "not_found"
		return e
	case errors.Is(err, cstype.ErrInvalidParams):
		// The store's words may be its driver's: a fixed text, the cause
		// logged.
		return errStoreRefused(err)
	case errors.Is(err, countersign.ErrInvalidCall):
		return errBadBody("", err.Error())
	}
	return err
}

func joinStatuses(ss []cstype.Status) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, " or ")
}

// decided writes a decision's answer.
func decided(w http.ResponseWriter, status cstype.DecideOutcome, p *cstype.Proposal) error {
	writeJSON(w, http.StatusOK, map[string]any{"status": string(status), "proposal": wireProposal(p)})
	return nil
}

// decidedAwaiting writes an approval's answer, with awaiting_caller when only
// the agent's next call runs the approval (before the proposal's
// expires_at); absent otherwise.
func decidedAwaiting(w http.ResponseWriter, res *countersign.DecideResult) error {
	body := map[string]any{"status": string(res.Status), "proposal": wireProposal(res.Proposal)}
	if res.AwaitingCaller {
		body["awaiting_caller"] = true
	}
	writeJSON(w, http.StatusOK, body)
	return nil
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
		var assertion json.RawMessage
		switch a := bytes.TrimSpace(req.Assertion); {
		case len(a) == 0 || string(a) == "null":
		case a[0] != '{':
			return errBadBody("assertion", "want a JSON object: PublicKeyCredential.toJSON() of the passkey's answer")
		default:
			assertion = a
		}
		// A decision, once asked for, is not abandoned with its client.
		ctx := context.WithoutCancel(r.Context())
		v, err := via(r)
		if err != nil {
			return err
		}
		res, err := s.engine.Decide(ctx, &countersign.Decision{
			Identity: id, ProposalID: r.PathValue("id"), Verdict: verdict, Via: v, Reason: req.Reason, Remember: remember,
			Assertion: assertion,
		})
		if err != nil {
			return decisionError(err)
		}
		return decidedAwaiting(w, res)
	}
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req reasonRequest
	if err := readBody(w, r, &req, true); err != nil {
		return err
	}
	ctx := context.WithoutCancel(r.Context())
	v, err := via(r)
	if err != nil {
		return err
	}
	// The engine decides who may cancel, and answers unchanged when the
	// requester cancels again.
	out, err := s.engine.Cancel(ctx, id, r.PathValue("id"), v, req.Reason)
	if err != nil {
		return decisionError(err)
	}
	return decided(w, out.Status, out.Proposal)
}

func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req resolveRequest
	if err := readBody(w, r, &req, false); err != nil {
		return err
	}
	status := cstype.Status(req.Outcome)
	switch {
	case req.Outcome == "":
		return errBadBody("outcome", "required")
	case status != cstype.StatusSucceeded && status != cstype.StatusFailed:
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
		return decisionError(err)
	}
	return decided(w, countersign.DecideApplied, out)
}
