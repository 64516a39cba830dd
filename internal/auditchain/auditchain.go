package auditchain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/countersign/countersign/internal/canonjson"
)

// Event is one chained event in its exported form, the one definition of
// its shape: its JSON without hash is the object the hash covers (see
// hashedForm), and the server answers it as it is (server.AuditEvent).
//
// ActorKind, the kind of credential behind the event, came after the chain
// did: it is a member of the event only when it is not empty, so that an
// event sealed before it existed (and one no credential is behind) hashes
// exactly as it did, and every chain sealed before still verifies.
type Event struct {
	Seq        int64  `json:"seq"`
	ID         int64  `json:"id"`
	Type       string `json:"type"`
	ProposalID string `json:"proposal_id"`
	Actor      string `json:"actor"`
	ActorKind  string `json:"actor_kind,omitempty"`
	Via        string `json:"via"`
	Status     string `json:"status"`
	Detail     string `json:"detail"`
	At         string `json:"at"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

// FormatTime is the one spelling of an event's time in the chain: RFC 3339
// in UTC with as many fractional digits as the time has. The sealer hashes
// this string and every export writes it, so they must never differ.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Hash returns e's hash given its PrevHash (e.Hash is ignored): SHA-256 of
// PrevHash followed by the RFC 8785 form of the event without its hash.
// The sealer hashes every event through it, so it writes that form
// directly, members in their canonical order, rather than through
// encoding/json and a canonicaliser (canonicalHash, which it equals).
func Hash(e *Event) string {
	if !exact(e.Seq) || !exact(e.ID) {
		return canonicalHash(e)
	}
	// The hash's input in one buffer, PrevHash and then the event, so that
	// hashing it allocates nothing.
	b := make([]byte, 0, 176+len(e.Actor)+len(e.ActorKind)+len(e.Detail)+2*len(e.PrevHash)+len(e.ProposalID))
	b = append(b, e.PrevHash...)
	b = append(b, `{"actor":`...)
	b = canonjson.AppendString(b, e.Actor)
	// Present only when set (see Event); "actor_kind" sorts between
	// "actor" and "at".
	if e.ActorKind != "" {
		b = append(b, `,"actor_kind":`...)
		b = canonjson.AppendString(b, e.ActorKind)
	}
	b = append(b, `,"at":`...)
	b = canonjson.AppendString(b, e.At)
	b = append(b, `,"detail":`...)
	b = canonjson.AppendString(b, e.Detail)
	b = append(b, `,"id":`...)
	b = strconv.AppendInt(b, e.ID, 10)
	b = append(b, `,"prev_hash":`...)
	b = canonjson.AppendString(b, e.PrevHash)
	b = append(b, `,"proposal_id":`...)
	b = canonjson.AppendString(b, e.ProposalID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"status":`...)
	b = canonjson.AppendString(b, e.Status)
	b = append(b, `,"type":`...)
	b = canonjson.AppendString(b, e.Type)
	b = append(b, `,"via":`...)
	b = canonjson.AppendString(b, e.Via)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// exact reports whether n is an integer RFC 8785 writes as its decimal
// digits: one a double holds exactly.
func exact(n int64) bool { return n >= -1<<53 && n <= 1<<53 }

// canonicalHash is Hash by definition: the event marshalled, without its
// hash, then canonicalised.
func canonicalHash(e *Event) string {
	raw, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("auditchain: marshal an event: %v", err)) // strings and integers always marshal
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		panic(fmt.Sprintf("auditchain: read back a marshalled event: %v", err))
	}
	canon, err := hashedForm(fields)
	if err != nil {
		// json.Marshal writes valid UTF-8 (it replaces invalid bytes), so
		// its output always canonicalises.
		panic(fmt.Sprintf("auditchain: canonicalise an event: %v", err))
	}
	return hashOf(e.PrevHash, canon)
}

// hashedForm is the object an event's hash covers, given the event's
// members: all but hash, in RFC 8785 form. It removes hash from fields.
func hashedForm(fields map[string]json.RawMessage) ([]byte, error) {
	delete(fields, "hash")
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	return canonjson.Canonicalize(body)
}

func hashOf(prev string, canon []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// BreakError names the first event of a chain that does not hold.
type BreakError struct {
	Seq    int64
	Reason string
}

func (e *BreakError) Error() string { return fmt.Sprintf("broken at seq %d: %s", e.Seq, e.Reason) }

// ErrBroken matches every *BreakError.
var ErrBroken = errors.New("audit chain broken")

// Is makes errors.Is(err, ErrBroken) hold.
func (e *BreakError) Is(target error) bool { return target == ErrBroken }

// Head is where a verified chain ends: its last seq and hash.
type Head struct {
	Seq  int64
	Hash string
}

// Verifier checks a chain one event at a time, in the order given. The zero
// value expects a whole chain, from seq 1; see After for a part of one. It
// is not safe for concurrent use.
type Verifier struct {
	// After is the seq the events follow: 0 for a whole chain. With After >
	// 0 the first event's prev_hash can only be checked against PrevHash;
	// left empty, it is taken as given.
	After    int64
	PrevHash string
	// Expect, when set, is a head kept from an earlier verification: the
	// chain must reach Expect.Seq and its event there must have that hash.
	// This is what detects a chain rewritten whole (see docs/audit.md).
	Expect *Head

	started bool
	head    Head
	met     bool // Expect's seq was reached and matched
}

// Line checks one exported event: one JSON object. It returns a
// *BreakError for the first event whose seq, link or hash does not hold.
func (v *Verifier) Line(raw []byte) error {
	want := v.next()
	canon, fields, brk := object(raw, want, "event")
	if brk != nil {
		return brk
	}
	return v.line(canon, fields, want)
}

// next is the seq the next event must have.
func (v *Verifier) next() int64 {
	if !v.started {
		return v.After + 1
	}
	return v.head.Seq + 1
}

// line checks one event, given its canonical form and its members.
func (v *Verifier) line(canon []byte, fields map[string]json.RawMessage, want int64) error {
	var e Event
	if err := json.Unmarshal(canon, &e); err != nil {
		return &BreakError{Seq: want, Reason: fmt.Sprintf("not an event: %v", err)}
	}
	for _, k := range []string{"seq", "prev_hash", "hash"} {
		if _, ok := fields[k]; !ok {
			return &BreakError{Seq: want, Reason: "the event has no " + k}
		}
	}
	body, err := hashedForm(fields)
	if err != nil {
		return &BreakError{Seq: want, Reason: fmt.Sprintf("not an event: %v", err)}
	}
	return v.check(&e, body, want)
}

// Event checks one event already decoded (a page of the server's, read
// into Events): the same checks as Line, over the event's own fields.
func (v *Verifier) Event(e *Event) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return v.Line(raw)
}

func (v *Verifier) check(e *Event, body []byte, want int64) error {
	switch {
	case e.Seq < want:
		return &BreakError{Seq: e.Seq, Reason: fmt.Sprintf("out of order or repeated: seq %d follows seq %d", e.Seq, want-1)}
	case e.Seq > want && want == v.After+1 && !v.started:
		return &BreakError{Seq: want, Reason: fmt.Sprintf("missing: the events start at seq %d", e.Seq)}
	case e.Seq > want:
		return &BreakError{Seq: want, Reason: fmt.Sprintf("missing: seq %d follows seq %d", e.Seq, want-1)}
	}
	switch {
	case v.started && e.PrevHash != v.head.Hash:
		return &BreakError{Seq: e.Seq, Reason: fmt.Sprintf("prev_hash does not link to the hash of seq %d", v.head.Seq)}
	case !v.started && v.After == 0 && e.PrevHash != "":
		return &BreakError{Seq: e.Seq, Reason: `the first event's prev_hash is not ""`}
	case !v.started && v.After > 0 && v.PrevHash != "" && e.PrevHash != v.PrevHash:
		return &BreakError{Seq: e.Seq, Reason: fmt.Sprintf("prev_hash does not link to the given hash of seq %d", v.After)}
	}
	if got := hashOf(e.PrevHash, body); got != e.Hash {
		return &BreakError{Seq: e.Seq, Reason: "hash does not match the event"}
	}
	if x := v.Expect; x != nil && x.Seq == e.Seq {
		if x.Hash != e.Hash {
			return &BreakError{Seq: e.Seq, Reason: "hash differs from the kept head's: the chain was rewritten"}
		}
		v.met = true
	}
	v.started = true
	v.head = Head{Seq: e.Seq, Hash: e.Hash}
	return nil
}

// Finish ends the verification: with Expect set, a chain that ended before
// the kept head is broken there (events were removed from its end). It
// returns where the chain ends.
func (v *Verifier) Finish() (Head, error) {
	if x := v.Expect; x != nil && !v.met {
		if x.Seq <= v.After {
			return v.head, &BreakError{Seq: x.Seq, Reason: fmt.Sprintf("the kept head is at or before seq %d, where these events start", v.After+1)}
		}
		return v.head, &BreakError{Seq: x.Seq, Reason: fmt.Sprintf("missing: the chain ends at seq %d, before the kept head", v.head.Seq)}
	}
	if !v.started {
		return Head{Seq: v.After, Hash: v.PrevHash}, nil
	}
	return v.head, nil
}
