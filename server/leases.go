package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// Caller-executed actions: a call's `execute` answer is the claim of a lease
// under which the calling agent runs the change; it then settles, renewing
// the lease while it runs. Only the requester holds or settles its lease,
// and the fence decides: a lost lease answers `conflict` and records
// nothing.

type (
	settleRequest struct {
		LeaseToken string          `json:"lease_token"`
		Outcome    string          `json:"outcome"`
		Receipt    string          `json:"receipt"`
		Result     json.RawMessage `json:"result"`
		Error      string          `json:"error"`
	}
	renewRequest struct {
		LeaseToken string `json:"lease_token"`
	}
)

func (s *Server) handleSettle(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req settleRequest
	if err := readBody(w, r, &req, false); err != nil {
		return err
	}
	status := cstype.Status(req.Outcome)
	switch {
	case req.LeaseToken == "":
		return errBadBody("lease_token", "required")
	case req.Outcome == "":
		return errBadBody("outcome", "required")
	case status != cstype.StatusSucceeded && status != cstype.StatusFailed:
		return errBadBody("outcome", "want succeeded or failed")
	}
	result := req.Result
	if string(result) == "null" {
		result = nil
	}
	// A settlement, once asked for, is not abandoned with its client: the
	// work it records is done.
	ctx := context.WithoutCancel(r.Context())
	res, err := s.engine.Settle(ctx, &countersign.Settlement{
		Identity: id, ProposalID: r.PathValue("id"), LeaseToken: req.LeaseToken,
		Status: status, Receipt: req.Receipt, Result: result, Error: req.Error,
	})
	if err != nil {
		return decisionError(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": string(res.Status), "proposal": wireProposal(res.Proposal)})
	return nil
}

func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req renewRequest
	if err := readBody(w, r, &req, false); err != nil {
		return err
	}
	if req.LeaseToken == "" {
		return errBadBody("lease_token", "required")
	}
	res, err := s.engine.Renew(context.WithoutCancel(r.Context()), &countersign.Renewal{
		Identity: id, ProposalID: r.PathValue("id"), LeaseToken: req.LeaseToken,
	})
	if err != nil {
		return decisionError(err)
	}
	body := map[string]any{"status": string(res.Status), "proposal": wireProposal(res.Proposal)}
	if res.Lease != nil {
		body["lease"] = wireLease(res.Lease, res.Proposal.Attempt)
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// wireLease is a caller's lease as docs/api.md writes it.
func wireLease(l *cstype.Lease, attempt int) map[string]any {
	return map[string]any{"token": l.Token, "expires_at": l.ExpiresAt.UTC(), "attempt": attempt}
}
