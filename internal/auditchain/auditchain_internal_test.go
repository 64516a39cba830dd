package auditchain

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestHashWritesTheCanonicalForm: Hash, which writes the canonical form
// itself, equals its definition (marshal, then canonicalise) for any event:
// hostile strings (quotes, controls, invalid UTF-8, U+2028, HTML
// characters, astral runes) and integers beyond a double's precision.
func TestHashWritesTheCanonicalForm(t *testing.T) {
	hostile := []string{"", `"`, `\`, "\x00\x1f\x7f", "<a & b>", "\u2028\u2029", "é😀", "\xff\xfe", "a\xc3", "\ud7ff", strings.Repeat("x", 300)}
	for _, s := range hostile {
		// With and without actor_kind, the member only some events have.
		for _, kind := range []string{"", "agent", s} {
			e := &Event{Seq: 1, ID: 2, Type: s, ProposalID: s, Actor: s, ActorKind: kind, Via: s, Status: s, Detail: s, At: s, PrevHash: s}
			if got, want := Hash(e), canonicalHash(e); got != want {
				t.Errorf("Hash of an event of %q, kind %q = %s, want %s", s, kind, got, want)
			}
		}
	}
	for _, n := range []int64{0, -1, 1 << 53, 1<<53 + 1, -(1 << 53) - 1, 1<<63 - 1} {
		e := &Event{Seq: n, ID: n}
		if got, want := Hash(e), canonicalHash(e); got != want {
			t.Errorf("Hash with seq and id %d = %s, want %s", n, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		str := rapid.OneOf(rapid.String(), rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) }))
		e := &Event{Seq: rapid.Int64().Draw(t, "seq"), ID: rapid.Int64().Draw(t, "id"), Type: str.Draw(t, "type"), ProposalID: str.Draw(t, "proposal"),
			Actor: str.Draw(t, "actor"), Via: str.Draw(t, "via"), Status: str.Draw(t, "status"), Detail: str.Draw(t, "detail"), At: str.Draw(t, "at"), PrevHash: str.Draw(t, "prev")}
		// Half the events have no kind (as every event sealed before kinds
		// were), half any string.
		if rapid.Bool().Draw(t, "kinded") {
			e.ActorKind = str.Draw(t, "kind")
		}
		if got, want := Hash(e), canonicalHash(e); got != want {
			t.Fatalf("Hash(%+v) = %s, want %s", e, got, want)
		}
	})
}

func BenchmarkHash(b *testing.B) {
	e := &Event{Seq: 123456, ID: 987654, Type: "proposal.decided", ProposalID: "prp_01a2355369f57640b230f284b46cba99", Actor: "bob", Via: "api",
		Status: "approved", Detail: "approved by bob: fine", At: "2026-12-02T06:11:04.123456Z", PrevHash: strings.Repeat("ab", 32)}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			Hash(e)
		}
	})
	b.Run("canonicalised", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			canonicalHash(e)
		}
	})
}
