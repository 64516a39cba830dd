package auditchain

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// chain makes n chained events.
func chain(n int) []*Event {
	var out []*Event
	prev := ""
	for i := 1; i <= n; i++ {
		e := &Event{Seq: int64(i), ID: int64(10 * i), Type: "proposal.created", ProposalID: fmt.Sprint("prp_", i),
			Actor: "alice", Via: "api", Status: "pending", Detail: "<a & b>", At: FormatTime(time.Unix(int64(i), 1500).UTC()), PrevHash: prev}
		e.Hash = Hash(e)
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

func lines(t *testing.T, evs []*Event) [][]byte {
	t.Helper()
	var out [][]byte
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// verify runs a Verifier over ls and returns the first break, or Finish's.
func verify(v *Verifier, ls [][]byte) error {
	for _, l := range ls {
		if err := v.Line(l); err != nil {
			return err
		}
	}
	_, err := v.Finish()
	return err
}

func TestHashIsTheContractsDefinition(t *testing.T) {
	t.Parallel()
	e := &Event{Seq: 1, ID: 7, Type: "proposal.created", ProposalID: "prp_1", Actor: "alice", Via: "api", Status: "pending",
		Detail: "é<", At: "2026-01-02T03:04:05.123456Z", PrevHash: ""}
	// The RFC 8785 form, written out by hand: keys sorted, no whitespace,
	// non-ASCII and < literal.
	canon := `{"actor":"alice","at":"2026-01-02T03:04:05.123456Z","detail":"é<","id":7,"prev_hash":"","proposal_id":"prp_1","seq":1,"status":"pending","type":"proposal.created","via":"api"}`
	if got, want := Hash(e), hashOf("", []byte(canon)); got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
	e.PrevHash = "ab"
	if got, want := Hash(e), hashOf("ab", []byte(strings.Replace(canon, `"prev_hash":""`, `"prev_hash":"ab"`, 1))); got != want {
		t.Errorf("Hash with prev_hash = %s, want %s", got, want)
	}
	// actor_kind is a member only when set: between actor and at.
	e.PrevHash, e.ActorKind = "", "agent"
	if got, want := Hash(e), hashOf("", []byte(strings.Replace(canon, `"actor":"alice",`, `"actor":"alice","actor_kind":"agent",`, 1))); got != want {
		t.Errorf("Hash with actor_kind = %s, want %s", got, want)
	}
}

// TestActorKindOnlyWhenSet: an event sealed before actor_kind existed (no
// such member) and one with it chain together and verify, each hashed
// exactly as written; the kind is covered by the hash, so adding, removing
// or changing it breaks the chain.
func TestActorKindOnlyWhenSet(t *testing.T) {
	t.Parallel()
	// The hash of seq 1 as sealed before kinds existed, pinned: it must
	// never change, or every old chain would break.
	old := &Event{Seq: 1, ID: 7, Type: "proposal.created", ProposalID: "prp_1", Actor: "alice", Via: "", Status: "pending",
		Detail: "", At: "2026-01-02T03:04:05.123456Z"}
	const oldHash = "5a641ca994a0be19f05b0a8501de26e4a2f51e9ac8bbb2a2c93bdd389daa9da9"
	if old.Hash = Hash(old); old.Hash != oldHash {
		t.Fatalf("an event without a kind hashes %s, not %s as it did before kinds", old.Hash, oldHash)
	}
	kinded := &Event{Seq: 2, ID: 8, Type: "proposal.decided", ProposalID: "prp_1", Actor: "bob", ActorKind: "human", Via: "api", Status: "approved",
		Detail: "approved", At: "2026-01-02T03:04:06Z", PrevHash: old.Hash}
	kinded.Hash = Hash(kinded)
	claimed := &Event{Seq: 3, ID: 9, Type: "proposal.claimed", ProposalID: "prp_1", Actor: "worker", Status: "executing",
		Detail: "attempt 1", At: "2026-01-02T03:04:07Z", PrevHash: kinded.Hash}
	claimed.Hash = Hash(claimed)
	ls := lines(t, []*Event{old, kinded, claimed})
	if strings.Contains(string(ls[0]), "actor_kind") || strings.Contains(string(ls[2]), "actor_kind") || !strings.Contains(string(ls[1]), `"actor_kind":"human"`) {
		t.Fatalf("exported lines %s, want actor_kind on the decision only", ls)
	}
	if err := verify(&Verifier{}, ls); err != nil {
		t.Fatalf("a chain mixing events with and without a kind: %v", err)
	}
	var v Verifier
	for _, e := range []*Event{old, kinded, claimed} {
		if err := v.Event(e); err != nil {
			t.Fatalf("Event(seq %d): %v", e.Seq, err)
		}
	}
	if _, err := v.Finish(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string][]byte{
		"kind added":   []byte(strings.Replace(string(ls[0]), `"actor":"alice"`, `"actor":"alice","actor_kind":"human"`, 1)),
		"kind empty":   []byte(strings.Replace(string(ls[0]), `"actor":"alice"`, `"actor":"alice","actor_kind":""`, 1)),
		"kind removed": []byte(strings.Replace(string(ls[1]), `"actor_kind":"human",`, ``, 1)),
		"kind changed": []byte(strings.Replace(string(ls[1]), `"actor_kind":"human"`, `"actor_kind":"agent"`, 1)),
	} {
		bad := [][]byte{ls[0], ls[1], ls[2]}
		at := int64(1)
		if strings.HasPrefix(name, "kind r") || strings.HasPrefix(name, "kind c") {
			bad[1], at = edit, 2
		} else {
			bad[0] = edit
		}
		var be *BreakError
		if err := verify(&Verifier{}, bad); !errors.As(err, &be) || be.Seq != at || be.Reason != "hash does not match the event" {
			t.Errorf("%s: %v, want broken at seq %d: hash does not match", name, err, at)
		}
	}
}

func TestVerifier(t *testing.T) {
	t.Parallel()
	good := chain(5)
	if err := verify(&Verifier{}, lines(t, good)); err != nil {
		t.Fatalf("a whole chain: %v", err)
	}
	// Key order and whitespace do not matter: the hash covers the canonical form.
	reordered := lines(t, good)
	reordered[0] = []byte(` {"hash":"` + good[0].Hash + `", "seq":1,"id":10,"type":"proposal.created","proposal_id":"prp_1","actor":"alice","via":"api","status":"pending","detail":"\u003ca \u0026 b\u003e","at":"` + good[0].At + `","prev_hash":""}`)
	if err := verify(&Verifier{}, reordered); err != nil {
		t.Errorf("a reordered, re-escaped line: %v", err)
	}

	mutate := func(f func(evs []*Event) []*Event) [][]byte {
		evs := chain(5)
		return lines(t, f(evs))
	}
	for _, tc := range []struct {
		name   string
		ls     [][]byte
		v      *Verifier
		seq    int64
		reason string
	}{
		{"edited", mutate(func(evs []*Event) []*Event { evs[2].Detail = "other"; return evs }), nil, 3, "hash does not match"},
		{"edited and rehashed", mutate(func(evs []*Event) []*Event { evs[2].Detail = "other"; evs[2].Hash = Hash(evs[2]); return evs }), nil, 4, "prev_hash does not link to the hash of seq 3"},
		{"deleted", mutate(func(evs []*Event) []*Event { return append(evs[:2], evs[3:]...) }), nil, 3, "missing: seq 4 follows seq 2"},
		{"swapped", mutate(func(evs []*Event) []*Event { evs[1], evs[2] = evs[2], evs[1]; return evs }), nil, 2, "missing: seq 3 follows seq 1"},
		{"seq swapped", mutate(func(evs []*Event) []*Event {
			evs[1].Seq, evs[2].Seq = 3, 2
			evs[1], evs[2] = evs[2], evs[1]
			return evs
		}), nil, 2, "prev_hash does not link"},
		{"repeated", mutate(func(evs []*Event) []*Event { return append(evs[:3], evs[2:]...) }), nil, 3, "out of order or repeated"},
		{"first removed", mutate(func(evs []*Event) []*Event { return evs[1:] }), nil, 1, "missing: the events start at seq 2"},
		{"first prev_hash", mutate(func(evs []*Event) []*Event { evs[0].PrevHash = "x"; return evs }), nil, 1, `prev_hash is not ""`},
		{"not JSON", append(lines(t, chain(1)), []byte("{")), nil, 2, "not a JSON event"},
		{"duplicate key", append(lines(t, chain(1)), []byte(`{"seq":2,"seq":2}`)), nil, 2, "not a JSON event"},
		{"no hash", append(lines(t, chain(1)), []byte(`{"seq":2,"prev_hash":""}`)), nil, 2, "no hash"},
		{"an added field", mutate(func(evs []*Event) []*Event { return evs }), nil, 0, ""},
		{"kept head rewritten", mutate(func(evs []*Event) []*Event { return evs }), &Verifier{Expect: &Head{Seq: 4, Hash: "00"}}, 4, "the chain was rewritten"},
		{"tail removed", mutate(func(evs []*Event) []*Event { return evs[:3] }), &Verifier{Expect: &Head{Seq: 5, Hash: chain(5)[4].Hash}}, 5, "the chain ends at seq 3"},
		{"a part", mutate(func(evs []*Event) []*Event { return evs[2:] }), &Verifier{After: 2, PrevHash: chain(5)[1].Hash}, 0, ""},
		{"a part, wrong link", mutate(func(evs []*Event) []*Event { return evs[2:] }), &Verifier{After: 2, PrevHash: "ff"}, 3, "given hash of seq 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			if v == nil {
				v = &Verifier{}
			}
			if tc.name == "an added field" {
				// A field the sealer did not write is not covered by the hash.
				tc.ls[1] = []byte(strings.Replace(string(tc.ls[1]), `{`, `{"extra":1,`, 1))
				tc.seq, tc.reason = 2, "hash does not match"
			}
			err := verify(v, tc.ls)
			if tc.seq == 0 {
				if err != nil {
					t.Fatalf("verify: %v, want it to hold", err)
				}
				return
			}
			var be *BreakError
			if !errors.As(err, &be) || !errors.Is(err, ErrBroken) {
				t.Fatalf("verify: %v, want a *BreakError", err)
			}
			if be.Seq != tc.seq || !strings.Contains(be.Reason, tc.reason) {
				t.Errorf("verify: %q, want broken at seq %d: …%s…", err, tc.seq, tc.reason)
			}
		})
	}
}
