package textdecision

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// fuzzVocabularies are the vocabularies FuzzParse picks from.
var fuzzVocabularies = []*Vocabulary{
	mustNew(Config{}),
	mustNew(Config{Language: BrazilianPortuguese}),
	mustNew(Config{Vocabulary: Words{Approve: []string{"ok", "👍", "go  ahead"}, Reject: []string{"ne\u0301gative"}}}),
}

// fuzzThread builds a thread from the low byte of shape: bits 0–3 say which
// of prp_1..prp_4 belong to the thread, bits 4–7 which of those are pending.
func fuzzThread(shape uint16) Thread {
	var th Thread
	for i := range 4 {
		if shape&(1<<i) != 0 {
			th.Proposals = append(th.Proposals, Proposal{ID: "prp_" + string(rune('1'+i)), Pending: shape&(1<<(i+4)) != 0})
		}
	}
	return th
}

// surrounding quotes, each of which must keep any text from deciding.
var quotes = [][2]string{{`"`, `"`}, {"'", "'"}, {"«", "»"}, {"“", "”"}, {"‘", "’"}, {"„", "“"}, {"「", "」"}}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"yes", "YES!", "yes.", "yes..", "yes!!", "yes?", `"yes"`, "yes please", "ok", "yes\nyes",
		"  sim  ", "N\u00c3O", "NA\u0303O", "nao", "Always in this conversation.", "sempre nesta conversa #prp_1",
		"yes #prp_x", "yes #", "yes#prp_1", "yes #prp_2!", "no! #prp_3", "always \t in this conversation",
		"«sim»", "“yes”", "yes\u2028", "👍 #PRP_4", "go ahead", "ne\u0301gative", "yes\xff", "",
	} {
		f.Add(s, RoleUser, uint16(0xff))
		f.Add(s, RoleUser, uint16(0x11|0x100))
		f.Add(s, "assistant", uint16(0x11|0x200))
	}
	f.Fuzz(func(t *testing.T, text, role string, shape uint16) {
		v := fuzzVocabularies[int(shape>>8)%len(fuzzVocabularies)]
		th := fuzzThread(shape)
		var ids, pending []string
		for _, p := range th.Proposals {
			ids = append(ids, p.ID)
			if p.Pending {
				pending = append(pending, p.ID)
			}
		}

		r := v.Parse(Message{Role: role, Text: text}, th)
		switch r.Kind {
		case Ordinary:
			if !equalResult(r, Result{}) {
				t.Fatalf("ordinary result carries data: %+v", r)
			}
		case Decide:
			if !slices.Contains(ids, r.ProposalID) {
				t.Fatalf("Parse(%q) decides %q, not a proposal of the thread %v", text, r.ProposalID, ids)
			}
			if r.Pending != nil {
				t.Fatalf("Decide lists pending %v", r.Pending)
			}
		case Ambiguous:
			if len(pending) < 2 || !slices.Equal(r.Pending, pending) {
				t.Fatalf("Ambiguous lists %v, thread pending %v", r.Pending, pending)
			}
			if strings.Contains(text, "#") {
				t.Fatalf("Parse(%q) with an id is ambiguous", text)
			}
		default:
			t.Fatalf("unknown kind %v", r.Kind)
		}
		if r.Kind != Ordinary {
			if role != RoleUser {
				t.Fatalf("role %q decides: %+v", role, r)
			}
			if r.Verdict != Approve && r.Verdict != Reject || r.Remember && r.Verdict != Approve {
				t.Fatalf("bad verdict %+v", r)
			}
			if !utf8.ValidString(text) {
				t.Fatalf("invalid UTF-8 %q decides", text)
			}
			if strings.ContainsFunc(strings.TrimSpace(norm.NFC.String(text)), isLineBreak) {
				t.Fatalf("multi-line text %q decides: %+v", text, r)
			}
		}

		user := Message{Role: RoleUser, Text: text}
		for _, q := range quotes {
			quoted := Message{Role: RoleUser, Text: q[0] + text + q[1]}
			if got := v.Parse(quoted, th); got.Kind != Ordinary {
				t.Fatalf("quoted %q is %v", quoted.Text, got.Kind)
			}
		}
		// Surrounding blanks change nothing.
		padded := Message{Role: RoleUser, Text: " \t" + text + "\t "}
		if got, want := v.Parse(padded, th), v.Parse(user, th); !equalResult(got, want) {
			t.Fatalf("padded %q = %+v, unpadded %+v", padded.Text, got, want)
		}
		// Case changes nothing (checked on ASCII, where upper-casing is
		// undone by folding).
		if isASCII(text) {
			upper := Message{Role: RoleUser, Text: strings.ToUpper(text)}
			if got, want := v.Parse(upper, th), v.Parse(user, th); !equalResult(got, want) {
				t.Fatalf("upper %q = %+v, as typed %+v", upper.Text, got, want)
			}
		}
		// A second line never decides.
		for _, br := range []string{"\n", "\r\n", "\u2028"} {
			two := Message{Role: RoleUser, Text: "yes" + br + text}
			if got := v.Parse(two, th); got.Kind != Ordinary && strings.TrimSpace(text) != "" {
				t.Fatalf("two lines %q decide: %+v", two.Text, got)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
