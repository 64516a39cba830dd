package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/countersign/countersign"
)

// Step-up (docs/api.md Part 3, "Step-up for high-risk rules"). The engine
// makes and checks every challenge; these routes carry them.

// CodeStepUpRequired answers an approval of a step-up proposal without a
// valid passkey assertion.
const CodeStepUpRequired = "STEP_UP_REQUIRED" // 403

// stepUpRefused is the answer to an approval refused for want of a valid
// assertion (403 STEP_UP_REQUIRED, details.url the proposal's inbox page),
// or nil when err is not one.
func stepUpRefused(err error) *apiError {
	se, ok := errors.AsType[*countersign.StepUpRequiredError](err)
	if !ok {
		return nil
	}
	e := newError(http.StatusForbidden, CodeStepUpRequired, "%s", se.Reason)
	if se.URL != "" {
		e.message += ": " + se.URL
	}
	e.details = map[string]string{"url": se.URL}
	return e
}

// passkeyRefused maps the engine's refusals of passkey ceremonies, or nil.
func passkeyRefused(err error) *apiError {
	if le, ok := errors.AsType[*countersign.PasskeyLinkError](err); ok {
		return errForbidden("%s", le.Reason)
	}
	if re, ok := errors.AsType[*countersign.PasskeyRefusedError](err); ok {
		return errBadBody("", re.Reason)
	}
	return nil
}

// stepUpResponse is a step-up challenge: WebAuthn's CredentialRequestOptions
// ({"publicKey": …}) in the JSON form browsers parse
// (PublicKeyCredential.parseRequestOptionsFromJSON takes publicKey), and
// when the challenge lapses.
type stepUpResponse struct {
	PublicKey any       `json:"publicKey"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Server) handleStepUp(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req struct{}
	if err := readBody(w, r, &req, true); err != nil {
		return err
	}
	v, err := via(r)
	if err != nil {
		return err
	}
	c, err := s.engine.StepUpChallenge(context.WithoutCancel(r.Context()), id, r.PathValue("id"), v)
	if err != nil {
		return decisionError(err)
	}
	writeJSON(w, http.StatusOK, stepUpResponse{PublicKey: c.Options, ExpiresAt: c.ExpiresAt.UTC()})
	return nil
}

type enrollmentRequest struct {
	Actor string `json:"actor"`
}

type enrollmentResponse struct {
	Actor     string    `json:"actor"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// handleCreateEnrollment makes an operator's single-use enrollment link
// (countersign passkeys enroll ACTOR).
func (s *Server) handleCreateEnrollment(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req enrollmentRequest
	if err := readBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Actor == "" {
		return errBadBody("actor", "required")
	}
	en, err := s.engine.CreatePasskeyEnrollment(context.WithoutCancel(r.Context()), id, req.Actor)
	if err != nil {
		return decisionError(err)
	}
	writeJSON(w, http.StatusCreated, enrollmentResponse{Actor: en.Actor, URL: en.URL, ExpiresAt: en.ExpiresAt.UTC()})
	return nil
}
