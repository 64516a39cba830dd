package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// Interaction is the part of a Slack block_actions payload the channel
// reads (Slack's "Interaction payloads" reference).
type Interaction struct {
	Type     string `json:"type"`
	APIAppID string `json:"api_app_id"`
	Team     struct {
		ID string `json:"id"`
	} `json:"team"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	ResponseURL string   `json:"response_url"`
	Actions     []Action `json:"actions"`
}

// Action is one clicked element of a block_actions payload.
type Action struct {
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
}

// A click: which proposal, which verdict, and the nonce the button carried.
type click struct {
	proposalID string
	nonce      string
	verdict    countersign.Verdict
}

// ErrBadPayload: an interaction's body is not a block_actions payload the
// channel can read.
var ErrBadPayload = errors.New("bad interaction payload")

// ParseInteraction reads an interaction request's form body: the
// "payload" field, a JSON block_actions payload. It checks the shape only;
// what the payload says is judged by the handler.
func ParseInteraction(body []byte) (*Interaction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: not a form body", ErrBadPayload)
	}
	raw := form.Get("payload")
	if raw == "" {
		return nil, fmt.Errorf("%w: no payload field", ErrBadPayload)
	}
	var in Interaction
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return nil, fmt.Errorf("%w: the payload is not the JSON of an interaction", ErrBadPayload)
	}
	if in.Type != string(slackapi.InteractionTypeBlockActions) {
		return nil, fmt.Errorf("%w: type %q, want block_actions", ErrBadPayload, in.Type)
	}
	if len(in.Actions) != 1 {
		return nil, fmt.Errorf("%w: %d actions, want one", ErrBadPayload, len(in.Actions))
	}
	return &in, nil
}

// clicked reads the action of a parsed interaction: nil for a link button
// (it only opened the inbox).
func (in *Interaction) clicked() (*click, error) {
	a := in.Actions[0]
	var v countersign.Verdict
	switch a.ActionID {
	case actionOpen:
		return nil, nil
	case actionApprove:
		v = countersign.Approve
	case actionReject:
		v = countersign.Reject
	default:
		return nil, fmt.Errorf("%w: action %q", ErrBadPayload, a.ActionID)
	}
	id, nonce, ok := strings.Cut(a.Value, " ")
	if !ok || id == "" || nonce == "" || len(id) > cstype.MaxIDLen || len(nonce) > 64 {
		return nil, fmt.Errorf("%w: the button's value is not a proposal and a nonce", ErrBadPayload)
	}
	return &click{proposalID: id, nonce: nonce, verdict: v}, nil
}

// Handler serves POST /v1/slack/interactions. Mount it only when the
// channel is configured: the route is then the channel's, and answers 404
// otherwise (docs/api.md Part 3).
func (s *Slack) Handler() http.Handler { return http.HandlerFunc(s.serveInteraction) }

// Mount registers the interactivity route, POST /v1/slack/interactions, on
// mux: what serve does when channels.slack is configured.
func (s *Slack) Mount(mux *http.ServeMux) {
	mux.Handle("POST /v1/slack/interactions", s.Handler())
}

// jsonError answers a request that never became a click: Slack shows
// nothing of it, an operator's log and a tester do.
func jsonError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// verify checks the request's signature and timestamp (Slack's "Verifying
// requests from Slack"): v0= and the hex HMAC-SHA256, under the signing
// secret, of "v0:" + timestamp + ":" + body, the timestamp within
// MaxClockSkew of the clock.
func (s *Slack) verify(h http.Header, body []byte) error {
	ts := h.Get("X-Slack-Request-Timestamp")
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts != strconv.FormatInt(secs, 10) {
		return errors.New("no valid X-Slack-Request-Timestamp")
	}
	if d := s.now().Sub(time.Unix(secs, 0)); d > MaxClockSkew || d < -MaxClockSkew {
		return errors.New("the request's timestamp is more than five minutes from the server's clock")
	}
	got, ok := strings.CutPrefix(h.Get("X-Slack-Signature"), "v0=")
	sig, err := hex.DecodeString(got)
	if !ok || err != nil {
		return errors.New("no valid X-Slack-Signature")
	}
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), sig) {
		return errors.New("the signature does not match the body")
	}
	return nil
}

func (s *Slack) serveInteraction(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		jsonError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "POST only")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		jsonError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", fmt.Sprintf("the body is over %d bytes, or could not be read", maxBody))
		return
	}
	if err := s.verify(r.Header, body); err != nil {
		jsonError(w, http.StatusUnauthorized, "UNAUTHENTICATED", err.Error())
		return
	}
	// Slack posts its interactions as a form; anything else, even signed,
	// is no click (checked after the signature: an unsigned request learns
	// nothing).
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		jsonError(w, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "want application/x-www-form-urlencoded, as Slack posts interactions")
		return
	}
	in, err := ParseInteraction(body)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "INVALID_BODY", err.Error())
		return
	}
	// Signed with this app's secret, but for another workspace or app:
	// not a click this channel was configured to trust.
	if in.Team.ID != s.teamID || (s.appID != "" && in.APIAppID != s.appID) {
		jsonError(w, http.StatusForbidden, "FORBIDDEN", "the interaction is from another Slack workspace or app")
		return
	}
	c, err := in.clicked()
	if err != nil {
		jsonError(w, http.StatusBadRequest, "INVALID_BODY", err.Error())
		return
	}
	if c != nil {
		if reply := s.decide(r.Context(), in.User.ID, c); reply != "" {
			s.ephemeral(r.Context(), in.ResponseURL, reply)
		}
	}
	// Slack wants an empty 200 for block_actions; replies go through
	// response_url.
	w.WriteHeader(http.StatusOK)
}

// decide turns a click into a decision and returns the ephemeral reply
// that says what came of it.
func (s *Slack) decide(ctx context.Context, slackUser string, c *click) string {
	actor, ok := s.bySlackID[slackUser]
	if !ok {
		return "Nothing was decided: your Slack account is not mapped to a Countersign approver."
	}
	id := s.identity(actor)
	p, err := s.engine.Proposal(ctx, id, c.proposalID)
	if err != nil {
		return s.refusal(err)
	}
	if err := s.engine.CheckSlackNonce(ctx, id, p.ID, c.nonce); err != nil {
		if !errors.Is(err, countersign.ErrStaleAnnouncement) {
			s.log.Error("slack: check a click's nonce", "proposal", p.ID, "err", err)
			return "Nothing was decided: Countersign could not check this button now. Try again shortly."
		}
		return "Nothing was decided: this message is out of date (" + string(p.Status) +
			" now). Its newest version is in this conversation, or open " + s.proposalURL(p.ID)
	}
	if c.verdict == countersign.Approve && p.StepUp != "" {
		return "Nothing was decided: approving this proposal needs a passkey. Approve it in the inbox: " + s.proposalURL(p.ID)
	}
	res, err := s.engine.Decide(ctx, &countersign.Decision{Identity: id, ProposalID: p.ID, Verdict: c.verdict, Via: "slack"})
	if err != nil {
		return s.refusal(err)
	}
	switch res.Status {
	case countersign.DecideApplied:
		return fmt.Sprintf("Recorded: you %s %s. It is %s now.", c.verdict, escape(title(p), false), res.Proposal.Status)
	case countersign.DecideUnchanged:
		return "Nothing changed: you decided this proposal already. It is " + string(res.Proposal.Status) + "."
	case countersign.DecideExpired:
		return "Nothing was decided: the proposal expired."
	default:
		return "Nothing was decided: the proposal was decided already. It is " + string(res.Proposal.Status) + "."
	}
}

// refusal is the reply to a click the engine refused.
func (s *Slack) refusal(err error) string {
	var forbidden *countersign.ForbiddenError
	switch {
	case errors.As(err, &forbidden):
		return "Nothing was decided: you may not decide this proposal (" + escape(forbidden.Reason, false) + ")."
	case errors.Is(err, countersign.ErrNotFound):
		return "Nothing was decided: there is no such proposal."
	case errors.Is(err, countersign.ErrInvalidCall):
		return "Nothing was decided: " + escape(err.Error(), false)
	}
	s.log.Error("slack: decide a click", "err", err)
	return "Nothing was decided: Countersign could not record the decision now. Try again shortly."
}

// ephemeral sends text, visible to the clicker only, through the
// interaction's response_url. The URL must be Slack's (the API's host, or
// hooks. under it) so that a click never makes the server post elsewhere.
func (s *Slack) ephemeral(ctx context.Context, responseURL, text string) {
	u, err := url.Parse(responseURL)
	if err != nil || u.Scheme != s.apiURL.Scheme || u.User != nil ||
		(u.Host != s.apiURL.Host && u.Host != "hooks."+s.apiURL.Host) {
		s.log.Warn("slack: a click's response_url is not Slack's; no reply sent")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultTimeout)
	defer cancel()
	err = slackapi.PostWebhookCustomHTTPContext(ctx, responseURL, s.client, &slackapi.WebhookMessage{
		ResponseType: slackapi.ResponseTypeEphemeral, ReplaceOriginal: false, Text: text})
	if err != nil {
		s.log.Warn("slack: an ephemeral reply failed", "err", err)
	}
}
