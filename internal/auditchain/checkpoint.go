package auditchain

import (
	"cmp"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/internal/canonjson"
)

// Checkpoint is a signed statement that a tenant's chain held Hash at Seq
// at the time At: the sealer's, made every checkpoint_every. Its JSON is
// the form the signature covers (without Signature).
type Checkpoint struct {
	Tenant string `json:"tenant"`
	Seq    int64  `json:"seq"`
	Hash   string `json:"hash"`
	At     string `json:"at"`
	KeyID  string `json:"key_id"`
	// Signature is left out of the JSON when empty, which is what makes
	// the checkpoint without it the object the signature covers
	// (signedForm); a checkpoint on the wire always has one.
	Signature string `json:"signature,omitempty"`
}

// KeyID names an Ed25519 public key: the first 16 hex digits of the
// SHA-256 of its SubjectPublicKeyInfo DER, which is what a PKIX PEM file of
// the key holds, so that anyone can recompute it from the file.
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		// Only a key of the wrong length fails, which ed25519 never makes.
		panic(fmt.Sprintf("auditchain: marshal an Ed25519 public key: %v", err))
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// Sign signs c with key: it sets c.KeyID to the key's id and c.Signature
// to the standard base64 of the Ed25519 signature of the RFC 8785 JSON of
// c without its signature.
func Sign(c *Checkpoint, key ed25519.PrivateKey) {
	c.KeyID = KeyID(key.Public().(ed25519.PublicKey))
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, c.signedForm()))
}

// signedForm is the RFC 8785 JSON of c without its signature.
func (c *Checkpoint) signedForm() []byte {
	unsigned := *c
	unsigned.Signature = ""
	raw, err := json.Marshal(&unsigned)
	if err != nil {
		panic(fmt.Sprintf("auditchain: marshal a checkpoint: %v", err)) // strings and an integer always marshal
	}
	canon, err := canonjson.Canonicalize(raw)
	if err != nil {
		// json.Marshal writes valid UTF-8 and exact integers up to 2^53;
		// a seq beyond that is no chain's.
		panic(fmt.Sprintf("auditchain: canonicalise a checkpoint: %v", err))
	}
	return canon
}

// Keys are the public keys checkpoints may be signed with, by key id.
type Keys map[string]ed25519.PublicKey

// NewKeys indexes pubs by their key ids.
func NewKeys(pubs ...ed25519.PublicKey) Keys {
	k := Keys{}
	for _, p := range pubs {
		k[KeyID(p)] = p
	}
	return k
}

// VerifySignature checks that c is signed by the key of Keys its KeyID
// names. It is what the sealer checks of a checkpoint it reads back; an
// export's are checked from their own text, by ExportVerifier.
func (k Keys) VerifySignature(c *Checkpoint) error {
	return k.verify(c.KeyID, c.Signature, c.signedForm())
}

// Errors of a checkpoint's signature.
var (
	// ErrUnknownKey: the checkpoint's key_id names none of the keys.
	ErrUnknownKey = errors.New("the checkpoint's key_id matches no given public key")
	// ErrBadSignature: the signature does not verify under the key its
	// key_id names.
	ErrBadSignature = errors.New("the checkpoint's signature does not verify")
)

func (k Keys) verify(keyID, signature string, signed []byte) error {
	pub, ok := k[keyID]
	if !ok {
		return ErrUnknownKey
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, signed, sig) {
		return ErrBadSignature
	}
	return nil
}

// DefaultCheckpointEvery is how often the sealer signs a checkpoint unless
// configured otherwise (audit.checkpoint_every).
const DefaultCheckpointEvery = time.Minute

// ExportVerifier checks an export of a tenant's chain, line by line: its
// events as Chain does and, with Keys, the signed checkpoints among them and
// how fresh the newest is. It is not safe for concurrent use.
//
// An export's lines are events, `{"checkpoint": {…}}` lines, each right
// after the event whose seq it covers, and a last `{"exported_at": "…"}`.
// With Keys, every checkpoint must be signed by one of them and match the
// chain's hash at its seq, at least one must, and the newest must be no
// older than two Every before the export's end: so a chain rewritten or
// cut short in the database, by anyone without the signing key, fails
// without a head kept elsewhere. Without Keys, checkpoint and exported_at
// lines are passed over, and only the chain is checked, as it was before
// checkpoints existed.
type ExportVerifier struct {
	// Chain checks the events; set its After, PrevHash and Expect to check
	// part of a chain or against a kept head.
	Chain Verifier
	// Keys are the public keys checkpoints may be signed with; empty, no
	// checkpoint is checked.
	Keys Keys
	// Every is the server's checkpoint_every. Default DefaultCheckpointEvery.
	Every time.Duration
	// Now, when set, is the end the newest checkpoint is judged against: the
	// time a server's chain is read (verify against a server). Unset, it is
	// the export's exported_at line, which must be its last.
	Now time.Time

	tenant     string
	signed     int
	newest     *Checkpoint
	newestAt   time.Time
	exportedAt time.Time
	ended      bool // the exported_at line was read
}

// ExportResult is what an export that holds was found to hold.
type ExportResult struct {
	// Head is where the chain ends.
	Head Head
	// Checkpoints counts the signed checkpoints verified.
	Checkpoints int
	// Newest is the newest of them (by At); nil without Keys.
	Newest *Checkpoint
}

// Line checks one line of an export: an event, a checkpoint line or the
// exported_at line.
func (v *ExportVerifier) Line(raw []byte) error {
	want := v.Chain.next()
	canon, fields, brk := object(raw, want, "event")
	if brk != nil {
		return brk
	}
	if v.ended && len(v.Keys) > 0 {
		return &BreakError{Seq: want, Reason: "a line follows the exported_at line, which ends an export"}
	}
	switch {
	case has(fields, "checkpoint"):
		if len(fields) != 1 {
			return &BreakError{Seq: want, Reason: "a checkpoint line holds members other than checkpoint"}
		}
		if len(v.Keys) == 0 {
			return nil
		}
		return v.Checkpoint(fields["checkpoint"])
	case has(fields, "exported_at"):
		if len(fields) != 1 {
			return &BreakError{Seq: want, Reason: "an exported_at line holds members other than exported_at"}
		}
		if len(v.Keys) == 0 {
			return nil
		}
		var at string
		t, err := time.Time{}, json.Unmarshal(fields["exported_at"], &at)
		if err == nil {
			t, err = time.Parse(time.RFC3339Nano, at)
		}
		if err != nil {
			return &BreakError{Seq: want, Reason: "exported_at is not an RFC 3339 time"}
		}
		v.exportedAt, v.ended = t, true
		return nil
	}
	return v.Chain.line(canon, fields, want)
}

// Event checks one event already decoded (a page of the server's).
func (v *ExportVerifier) Event(e *Event) error { return v.Chain.Event(e) }

// Checkpoint checks one checkpoint object (as a server's page or an
// export's checkpoint line holds it), which must follow the event it
// covers. Without Keys it checks nothing.
func (v *ExportVerifier) Checkpoint(raw []byte) error {
	if len(v.Keys) == 0 {
		return nil
	}
	want := v.Chain.next()
	canon, fields, brk := object(raw, want, "checkpoint")
	if brk != nil {
		return brk
	}
	var c Checkpoint
	if err := json.Unmarshal(canon, &c); err != nil {
		return &BreakError{Seq: want, Reason: fmt.Sprintf("not a checkpoint: %v", err)}
	}
	for _, k := range []string{"tenant", "seq", "hash", "at", "key_id", "signature"} {
		if !has(fields, k) {
			return &BreakError{Seq: cmp.Or(c.Seq, want), Reason: "a checkpoint has no " + k}
		}
	}
	// The signature covers the object as given, less its signature: a
	// member added to it changes what was signed, as for events.
	delete(fields, "signature")
	signed, err := json.Marshal(fields)
	if err == nil {
		signed, err = canonjson.Canonicalize(signed)
	}
	if err != nil {
		return &BreakError{Seq: c.Seq, Reason: fmt.Sprintf("not a checkpoint: %v", err)}
	}
	if err := v.Keys.verify(c.KeyID, c.Signature, signed); err != nil {
		reason := err.Error()
		if errors.Is(err, ErrUnknownKey) {
			reason = fmt.Sprintf("the checkpoint's key_id %q matches no given public key", c.KeyID)
		}
		return &BreakError{Seq: c.Seq, Reason: reason}
	}
	at, err := time.Parse(time.RFC3339Nano, c.At)
	if err != nil {
		return &BreakError{Seq: c.Seq, Reason: "the checkpoint's at is not an RFC 3339 time"}
	}
	if v.tenant == "" {
		v.tenant = c.Tenant
	} else if c.Tenant != v.tenant {
		return &BreakError{Seq: c.Seq, Reason: fmt.Sprintf("a checkpoint of tenant %q among checkpoints of tenant %q", c.Tenant, v.tenant)}
	}
	covered := v.Chain.head
	if !v.Chain.started {
		// Before the first event, only the seq the events follow is
		// covered, and only with its hash given.
		covered = Head{Seq: v.Chain.After, Hash: v.Chain.PrevHash}
	}
	switch {
	case c.Seq > covered.Seq:
		return &BreakError{Seq: c.Seq, Reason: fmt.Sprintf("a signed checkpoint covers seq %d, but the events before it end at seq %d: the chain was cut short", c.Seq, covered.Seq)}
	case c.Seq < covered.Seq:
		return &BreakError{Seq: c.Seq, Reason: fmt.Sprintf("a checkpoint of seq %d is out of place: it follows seq %d", c.Seq, covered.Seq)}
	case covered.Hash == "":
		return &BreakError{Seq: c.Seq, Reason: fmt.Sprintf("a checkpoint covers seq %d, where the events start, whose hash is not given", c.Seq)}
	case c.Hash != covered.Hash:
		return &BreakError{Seq: c.Seq, Reason: "hash differs from the signed checkpoint's: the chain was rewritten"}
	}
	v.signed++
	if v.newest == nil || at.After(v.newestAt) {
		v.newest, v.newestAt = &c, at
	}
	return nil
}

// Finish ends the verification: the chain's end as Chain.Finish judges it
// and, with Keys, that a checkpoint was verified and that the newest is no
// older than two Every before the end (Now, or the exported_at line).
func (v *ExportVerifier) Finish() (ExportResult, error) {
	head, err := v.Chain.Finish()
	res := ExportResult{Head: head, Checkpoints: v.signed, Newest: v.newest}
	if err != nil || len(v.Keys) == 0 {
		return res, err
	}
	every := v.Every
	if every == 0 {
		every = DefaultCheckpointEvery
	}
	if every < 0 {
		return res, fmt.Errorf("auditchain: ExportVerifier.Every %v: must be positive", every)
	}
	if v.signed == 0 {
		return res, &BreakError{Seq: v.Chain.After + 1, Reason: "no checkpoint signed by a given public key: nothing vouches for the chain"}
	}
	end, endName := v.Now, "now"
	if end.IsZero() {
		if !v.ended {
			return res, &BreakError{Seq: head.Seq + 1, Reason: "the export has no exported_at line: it may be cut short"}
		}
		end, endName = v.exportedAt, "exported_at "+v.exportedAt.UTC().Format(time.RFC3339Nano)
	}
	if v.newestAt.Before(end.Add(-2 * every)) {
		return res, &BreakError{Seq: v.newest.Seq + 1, Reason: fmt.Sprintf("the newest signed checkpoint (seq %d, at %s) is more than %v older than %s: events after it may have been removed",
			v.newest.Seq, v.newest.At, 2*every, endName)}
	}
	return res, nil
}

// object canonicalises one JSON object (an event, a checkpoint) and reads
// its members; one that is not a JSON object is broken at want. The
// canonical form rejects what RFC 8785 cannot hash or sign unambiguously:
// duplicate keys, invalid UTF-8, trailing data.
func object(raw []byte, want int64, what string) ([]byte, map[string]json.RawMessage, *BreakError) {
	canon, err := canonjson.Canonicalize(raw)
	if err != nil {
		return nil, nil, &BreakError{Seq: want, Reason: fmt.Sprintf("not a JSON %s: %v", what, err)}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(canon, &fields); err != nil || fields == nil {
		return nil, nil, &BreakError{Seq: want, Reason: "not a JSON object"}
	}
	return canon, fields, nil
}

func has(fields map[string]json.RawMessage, k string) bool {
	_, ok := fields[k]
	return ok
}
