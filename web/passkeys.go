package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// Passkey ceremonies in the inbox (docs/passkeys.md): enrolling through an
// operator's link, adding and removing passkeys, and the step-up of an
// approval. The engine makes and checks every challenge and decides who
// may do what; these pages carry its options to the browser's
// navigator.credentials and the browser's answers back. The script
// (static/passkey.js) fetches a ceremony's options from a JSON route, runs
// the ceremony, puts the answer in a hidden field and submits the page's
// form; the form's POST is what enrols, removes or approves.

// maxCeremonyField bounds a posted assertion or attestation: real ones are
// a few kilobytes, and a form is bounded at maxFormBytes anyway.
const maxCeremonyField = 48 << 10

// passkeyResults are the answers of the passkeys page's forms, in words.
var passkeyResults = map[string]string{
	"enrolled": "Your passkey is enrolled. Approvals that need one will ask for it.",
	"added":    "The passkey is added.",
	"removed":  "The passkey is removed.",
}

type passkeysData struct {
	Passkeys []*countersign.Passkey
	Result   string
	Problem  string
}

func (in *Inbox) handlePasskeys(w http.ResponseWriter, r *http.Request) error {
	return in.showPasskeys(w, r, http.StatusOK, passkeyResults[r.URL.Query().Get("result")], "")
}

func (in *Inbox) showPasskeys(w http.ResponseWriter, r *http.Request, status int, result, problem string) error {
	sess := sessionOf(r)
	ps, err := in.engine.Passkeys(r.Context(), sess.Identity)
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return errPage(http.StatusForbidden, "Not allowed", "You may not hold passkeys: "+fe.Reason+".")
	}
	if err != nil {
		return err
	}
	in.render(w, r, status, "passkeys", &pageData{Title: "Passkeys", Session: sess,
		Data: &passkeysData{Passkeys: ps, Result: result, Problem: problem}})
	return nil
}

type enrollData struct {
	Token   string
	Problem string
}

// handleEnrollPage shows the page an operator's enrollment link opens, to
// the very person it names, signed in (signedIn sends anyone else to sign
// in first). It spends nothing: the engine spends the link with the
// passkey it enrols.
func (in *Inbox) handleEnrollPage(w http.ResponseWriter, r *http.Request) error {
	sess := sessionOf(r)
	token := r.PathValue("token")
	if err := in.engine.CheckPasskeyEnrollment(r.Context(), sess.Identity, token); err != nil {
		return passkeyPageError(err)
	}
	in.render(w, r, http.StatusOK, "enroll", &pageData{Title: "Enroll a passkey", Session: sess, Data: &enrollData{Token: token}})
	return nil
}

// passkeyPageError maps the engine's refusals of a passkey ceremony to a
// page that says why; anything else is returned as it is.
func passkeyPageError(err error) error {
	if le, ok := errors.AsType[*countersign.PasskeyLinkError](err); ok {
		return errPage(http.StatusForbidden, "Enrollment link refused", sentence(le.Reason)+" Nothing was enrolled.")
	}
	if re, ok := errors.AsType[*countersign.PasskeyRefusedError](err); ok {
		return errPage(http.StatusBadRequest, "Passkey refused", sentence(re.Reason)+" Nothing was changed.")
	}
	if fe, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return errPage(http.StatusForbidden, "Not allowed", sentence(fe.Reason))
	}
	if errors.Is(err, countersign.ErrInvalidCall) {
		return errPage(http.StatusBadRequest, "Not possible", sentence(err.Error()))
	}
	return err
}

// sentence capitalises s and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// ceremonyField reads a posted assertion or attestation: the JSON of the
// browser's PublicKeyCredential, or nil when the field is empty.
func ceremonyField(r *http.Request, name string) ([]byte, error) {
	v := strings.TrimSpace(r.PostForm.Get(name))
	switch {
	case v == "":
		return nil, nil
	case len(v) > maxCeremonyField || !json.Valid([]byte(v)) || v[0] != '{':
		return nil, errPage(http.StatusBadRequest, "Bad request", "The passkey's answer could not be read. Nothing was changed.")
	}
	return []byte(v), nil
}

// handleEnroll stores the passkey the enrollment page's ceremony made. The
// link is spent with it, in one transaction.
func (in *Inbox) handleEnroll(w http.ResponseWriter, r *http.Request) error {
	return in.finishRegistration(w, r, "enrolled")
}

// handleAddPasskey stores a further passkey, whose ceremony an assertion by
// an existing one began (handleAddBegin).
func (in *Inbox) handleAddPasskey(w http.ResponseWriter, r *http.Request) error {
	return in.finishRegistration(w, r, "added")
}

func (in *Inbox) finishRegistration(w http.ResponseWriter, r *http.Request, result string) error {
	sess := sessionOf(r)
	att, err := ceremonyField(r, "attestation")
	if err != nil {
		return err
	}
	if att == nil {
		return errPage(http.StatusBadRequest, "Passkey needed", "Creating a passkey needs the page's script and a browser that supports passkeys. Nothing was enrolled.")
	}
	// Once asked for, a registration is not abandoned with the browser's
	// connection: the link may be spent.
	_, err = in.engine.FinishPasskeyRegistration(context.WithoutCancel(r.Context()), sess.Identity, r.PostForm.Get("name"), att)
	if err != nil {
		return passkeyPageError(err)
	}
	http.Redirect(w, r, "/passkeys?result="+result, http.StatusSeeOther)
	return nil
}

// handleRemovePasskey removes one of the actor's passkeys, once an
// assertion by one of them verifies.
func (in *Inbox) handleRemovePasskey(w http.ResponseWriter, r *http.Request) error {
	sess := sessionOf(r)
	a, err := ceremonyField(r, "assertion")
	if err != nil {
		return err
	}
	if a == nil {
		return in.showPasskeys(w, r, http.StatusBadRequest, "", "Removing a passkey needs an assertion by one of yours: the page's script asks for it. Nothing was removed.")
	}
	err = in.engine.RemovePasskey(context.WithoutCancel(r.Context()), sess.Identity, r.PostForm.Get("credential"), a)
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return in.showPasskeys(w, r, http.StatusNotFound, "", "You have no such passkey. Nothing was removed.")
	case err != nil:
		return passkeyPageError(err)
	}
	http.Redirect(w, r, "/passkeys?result=removed", http.StatusSeeOther)
	return nil
}

// ceremonyAnswer is a JSON route's answer: WebAuthn options in the JSON
// form the script turns into navigator.credentials' argument.
type ceremonyAnswer struct {
	PublicKey json.RawMessage `json:"publicKey"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// ceremony answers c as JSON.
func ceremony(w http.ResponseWriter, c *countersign.PasskeyCeremony) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(ceremonyAnswer{PublicKey: c.Options, ExpiresAt: c.ExpiresAt.UTC()})
}

// handleEnrollBegin begins the creation of a passkey through an enrollment
// link.
func (in *Inbox) handleEnrollBegin(w http.ResponseWriter, r *http.Request) error {
	c, err := in.engine.BeginPasskeyEnrollment(r.Context(), sessionOf(r).Identity, r.PathValue("token"))
	if err != nil {
		return passkeyPageError(err)
	}
	return ceremony(w, c)
}

// handleManageChallenge begins the assertion that adding or removing a
// passkey needs.
func (in *Inbox) handleManageChallenge(w http.ResponseWriter, r *http.Request) error {
	c, err := in.engine.ManagePasskeysChallenge(r.Context(), sessionOf(r).Identity)
	if err != nil {
		return passkeyPageError(err)
	}
	return ceremony(w, c)
}

// handleAddBegin begins the creation of a further passkey, once the posted
// assertion by an existing one verifies.
func (in *Inbox) handleAddBegin(w http.ResponseWriter, r *http.Request) error {
	a, err := ceremonyField(r, "assertion")
	if err != nil {
		return err
	}
	if a == nil {
		return errPage(http.StatusBadRequest, "Passkey needed", "Adding a passkey needs an assertion by one of yours.")
	}
	c, err := in.engine.BeginPasskeyAddition(context.WithoutCancel(r.Context()), sessionOf(r).Identity, a)
	if err != nil {
		return passkeyPageError(err)
	}
	return ceremony(w, c)
}

// handleStepUp begins the step-up of the actor's approval of a proposal:
// a challenge bound to the tenant, the actor, the proposal and its input
// digest, which only someone the proposal waits for gets.
func (in *Inbox) handleStepUp(w http.ResponseWriter, r *http.Request) error {
	sess := sessionOf(r)
	pid := r.PathValue("id")
	if _, err := in.proposal(r.Context(), sess.Identity, pid); err != nil {
		return err
	}
	c, err := in.engine.StepUpChallenge(r.Context(), sess.Identity, pid, via)
	if err != nil {
		return passkeyPageError(err)
	}
	return ceremony(w, c)
}

// jsonRoute runs h as page does, for the routes the script fetches: an
// error is answered as JSON {"message": …} with its status, which the
// script shows.
func (in *Inbox) jsonRoute(h pageFunc) http.Handler {
	return secured(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		err := h(w, r)
		if err == nil {
			return
		}
		pe, ok := errors.AsType[*pageError](err)
		switch {
		case ok:
		case errors.Is(err, cstype.ErrUnavailable):
			w.Header().Set("Retry-After", "2")
			pe = errPage(http.StatusServiceUnavailable, "", "The inbox cannot reach its database. Try again in a moment.")
		default:
			if r.Context().Err() == nil {
				in.log.LogAttrs(r.Context(), slog.LevelError, "inbox request failed",
					slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
			}
			pe = errPage(http.StatusInternalServerError, "", "The inbox could not answer. Try again in a moment.")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(pe.status)
		_ = json.NewEncoder(w).Encode(struct {
			Message string `json:"message"`
		}{pe.message})
	}))
}

// stepUpView is what the proposal page says of a step-up proposal to the
// person it waits for.
type stepUpView struct {
	// Ready: the person has a passkey, so Approve asks for it.
	Ready bool
}

// stepUpFor is the proposal page's step-up part for sess's actor, or nil
// when p needs none or does not wait for their approval.
func (in *Inbox) stepUpFor(ctx context.Context, sess *countersign.Session, p *cstype.Proposal, t countersign.Turn) (*stepUpView, error) {
	if p.StepUp == "" || !t.Yours {
		return nil, nil
	}
	ps, err := in.engine.Passkeys(ctx, sess.Identity)
	if err != nil {
		return nil, err
	}
	return &stepUpView{Ready: len(ps) > 0}, nil
}

// stepUpProblem words the engine's refusal of an approval without a valid
// passkey assertion for the proposal page.
func stepUpProblem(se *countersign.StepUpRequiredError) string {
	return "Not approved: this approval needs your passkey (" + se.Reason + "). Press Approve again and answer your passkey's prompt."
}
