package mcpgateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/countersign/countersign/cstype"
)

// A 2026-07-28 approval form's requestState binds the question to who was
// asked and about what (docs/api.md Part 3, "MCP 2026-07-28"): it is
// "v1.<payload>.<mac>", the payload the base64url JSON of requestState and
// the mac the base64url HMAC-SHA256 of "countersign/mcp-request-state/v1",
// a NUL and the encoded payload, under the gateway's state secret. The
// client carries it back with its answer; the gateway keeps nothing but the
// nonces it has spent (in the store, until the deadline), so any process
// with the secret checks it.

// stateVersion prefixes every state, so that another format can follow.
const stateVersion = "v1"

// stateContext separates the MAC of a state from any other use of the
// secret.
const stateContext = "countersign/mcp-request-state/v1\x00"

// maxState bounds the state a client presents: a payload of ids, digests
// and a nonce is far shorter.
const maxState = 4096

// requestState is what a state binds.
type requestState struct {
	Tenant      string `json:"tn"`
	Actor       string `json:"ac"`
	Kind        string `json:"kd"`
	Credential  string `json:"cf"` // the credential's fingerprint
	Proposal    string `json:"pr"`
	Tool        string `json:"tl"`
	InputDigest string `json:"dg"`
	Nonce       string `json:"nc"`
	Deadline    int64  `json:"dl"` // Unix milliseconds
}

// newState makes the state of the approval form asked of who about p, the
// call of tool name: its deadline is p's expiry.
func (g *Gateway) newState(who caller, name string, p *cstype.Proposal) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails
	st := requestState{
		Tenant: who.id.Tenant, Actor: who.id.Actor, Kind: string(who.id.KindOrHuman()), Credential: who.fingerprint,
		Proposal: p.ID, Tool: name, InputDigest: p.InputDigest, Nonce: hex.EncodeToString(nonce),
		Deadline: p.ExpiresAt.UnixMilli(),
	}
	raw, _ := json.Marshal(st) // strings and a number always encode
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return stateVersion + "." + payload + "." + base64.RawURLEncoding.EncodeToString(g.stateMAC(payload))
}

func (g *Gateway) stateMAC(payload string) []byte {
	m := hmac.New(sha256.New, g.stateSecret)
	m.Write([]byte(stateContext))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// openState returns what a state binds, when the gateway's secret signed
// it; anything else (malformed, too long, another format, a MAC that does
// not verify) is no state.
func (g *Gateway) openState(raw string) (requestState, bool) {
	var st requestState
	if len(raw) > maxState {
		return st, false
	}
	version, rest, ok := strings.Cut(raw, ".")
	if !ok || version != stateVersion {
		return st, false
	}
	payload, mac64, ok := strings.Cut(rest, ".")
	if !ok {
		return st, false
	}
	mac, err := base64.RawURLEncoding.DecodeString(mac64)
	if err != nil || !hmac.Equal(mac, g.stateMAC(payload)) {
		return st, false
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(body, &st) != nil {
		return st, false
	}
	return st, true
}

// takeState reports whether raw is the state of a question the gateway
// asked who about p, the call of tool name, still open and never answered;
// it spends the state's nonce, so it is answered once, in whichever
// process. A tampered, foreign (another tenant, actor, kind, credential,
// proposal, tool or input), expired or replayed state is no answer. A store
// that cannot spend the nonce makes it no answer too: the call is answered
// as a repeat, and the client may answer again.
func (g *Gateway) takeState(ctx context.Context, raw string, who caller, name, digest string, p *cstype.Proposal) bool {
	st, ok := g.openState(raw)
	if !ok {
		return false
	}
	deadline := time.UnixMilli(st.Deadline)
	switch {
	case st.Tenant != who.id.Tenant, st.Actor != who.id.Actor, st.Kind != string(who.id.KindOrHuman()),
		st.Credential != who.fingerprint, st.Proposal != p.ID, st.Tool != name,
		st.InputDigest != p.InputDigest, st.InputDigest != digest, st.Nonce == "",
		!time.Now().Before(deadline):
		return false
	}
	spent, err := g.engine.SpendMCPNonce(ctx, st.Tenant, st.Nonce, deadline)
	if err != nil {
		g.log.Warn("mcp gateway: a request state's nonce could not be spent; the answer is ignored", "proposal", p.ID, "err", err)
		return false
	}
	return spent
}
