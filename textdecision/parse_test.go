package textdecision

import (
	"slices"
	"testing"
)

// Threads the parse tables run against.
var (
	noProposals = Thread{}
	onePending  = Thread{Proposals: []Proposal{{ID: "prp_1", Pending: true}}}
	twoPending  = Thread{Proposals: []Proposal{{ID: "prp_1", Pending: true}, {ID: "prp_2", Pending: true}}}
	noPending   = Thread{Proposals: []Proposal{{ID: "prp_1"}}}
	// mixed: prp_1 waits, prp_2 was decided already.
	mixed = Thread{Proposals: []Proposal{{ID: "prp_1", Pending: true}, {ID: "prp_2"}}}
	// gapped: two pending around a decided one, listed in this order.
	gapped = Thread{Proposals: []Proposal{{ID: "prp_3", Pending: true}, {ID: "prp_2"}, {ID: "prp_1", Pending: true}}}
)

type parseCase struct {
	name string
	lang string // "" is English
	role string // "" is RoleUser
	text string
	th   Thread
	want Result
}

func approve(id string) Result { return Result{Kind: Decide, ProposalID: id, Verdict: Approve} }
func reject(id string) Result  { return Result{Kind: Decide, ProposalID: id, Verdict: Reject} }
func remember(id string) Result {
	return Result{Kind: Decide, ProposalID: id, Verdict: Approve, Remember: true}
}

var ordinary = Result{}

func runParse(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := New(Config{Language: tc.lang})
			if err != nil {
				t.Fatal(err)
			}
			role := tc.role
			if role == "" {
				role = RoleUser
			}
			got := v.Parse(Message{Role: role, Text: tc.text}, tc.th)
			if !equalResult(got, tc.want) {
				t.Errorf("Parse(%q) = %+v, want %+v", tc.text, got, tc.want)
			}
		})
	}
}

func equalResult(a, b Result) bool {
	return a.Kind == b.Kind && a.ProposalID == b.ProposalID && a.Verdict == b.Verdict &&
		a.Remember == b.Remember && slices.Equal(a.Pending, b.Pending)
}

func TestParseDecides(t *testing.T) {
	t.Parallel()
	runParse(t, []parseCase{
		{name: "yes", text: "yes", th: onePending, want: approve("prp_1")},
		{name: "approve", text: "approve", th: onePending, want: approve("prp_1")},
		{name: "confirm", text: "Confirm", th: onePending, want: approve("prp_1")},
		{name: "no", text: "no", th: onePending, want: reject("prp_1")},
		{name: "reject", text: "REJECT", th: onePending, want: reject("prp_1")},
		{name: "deny", text: "Deny.", th: onePending, want: reject("prp_1")},
		{name: "upper with bang", text: "YES!", th: onePending, want: approve("prp_1")},
		{name: "one dot", text: "yes.", th: onePending, want: approve("prp_1")},
		{name: "surrounding blanks", text: " \t yes  ", th: onePending, want: approve("prp_1")},
		{name: "trailing newline trimmed", text: "yes\r\n", th: onePending, want: approve("prp_1")},
		{name: "leading newline trimmed", text: "\n\nno", th: onePending, want: reject("prp_1")},
		{name: "remember", text: "Always in this conversation.", th: onePending, want: remember("prp_1")},
		{name: "remember any blanks", text: "always \t in   this\tconversation", th: onePending, want: remember("prp_1")},
		{name: "remember no-break space", text: "always\u00a0in this conversation", th: onePending, want: remember("prp_1")},
		{name: "only one pending among decided", text: "yes", th: mixed, want: approve("prp_1")},

		{name: "pt sim padded", lang: "pt-BR", text: "  sim  ", th: onePending, want: approve("prp_1")},
		{name: "pt aprovar", lang: "pt-BR", text: "Aprovar!", th: onePending, want: approve("prp_1")},
		{name: "pt confirmar", lang: "pt-BR", text: "confirmar", th: onePending, want: approve("prp_1")},
		{name: "pt NÃO composed", lang: "pt-BR", text: "N\u00c3O", th: onePending, want: reject("prp_1")},
		{name: "pt NÃO decomposed", lang: "pt-BR", text: "NA\u0303O", th: onePending, want: reject("prp_1")},
		{name: "pt não decomposed", lang: "pt-BR", text: "na\u0303o.", th: onePending, want: reject("prp_1")},
		{name: "pt nao", lang: "pt-BR", text: "nao", th: onePending, want: reject("prp_1")},
		{name: "pt rejeitar", lang: "pt-BR", text: "rejeitar", th: onePending, want: reject("prp_1")},
		{name: "pt cancelar", lang: "pt-BR", text: "Cancelar", th: onePending, want: reject("prp_1")},
		{name: "pt remember", lang: "pt-BR", text: "Sempre nesta conversa!", th: onePending, want: remember("prp_1")},
		{name: "pt accepts English yes", lang: "pt-BR", text: "yes", th: onePending, want: approve("prp_1")},
		{name: "pt accepts English no", lang: "pt-BR", text: "No!", th: onePending, want: reject("prp_1")},
		{name: "pt accepts English remember", lang: "pt-BR", text: "always in this conversation", th: onePending, want: remember("prp_1")},

		{name: "id", text: "yes #prp_1", th: twoPending, want: approve("prp_1")},
		{name: "id picks among several", text: "no #prp_2", th: twoPending, want: reject("prp_2")},
		{name: "id of a decided proposal", text: "yes #prp_2", th: mixed, want: approve("prp_2")},
		{name: "id when none pending", text: "no #prp_1", th: noPending, want: reject("prp_1")},
		{name: "pt remember with id", lang: "pt-BR", text: "sempre nesta conversa #prp_1", th: mixed, want: remember("prp_1")},
		{name: "id then bang", text: "yes #prp_1!", th: twoPending, want: approve("prp_1")},
		{name: "bang then id", text: "yes! #prp_1", th: twoPending, want: approve("prp_1")},
		{name: "dot then id", text: "No. #prp_2", th: twoPending, want: reject("prp_2")},
		{name: "tabs before id", text: "yes\t\t#prp_1", th: twoPending, want: approve("prp_1")},
		{name: "no-break space before id", text: "yes\u00a0#prp_1", th: twoPending, want: approve("prp_1")},
		{name: "id case-insensitive", text: "YES #PRP_1", th: twoPending, want: approve("prp_1")},
		{name: "id exact beats folded", text: "yes #Prp_1",
			th:   Thread{Proposals: []Proposal{{ID: "prp_1", Pending: true}, {ID: "Prp_1", Pending: true}}},
			want: approve("Prp_1")},
	})
}

func TestParseAmbiguous(t *testing.T) {
	t.Parallel()
	runParse(t, []parseCase{
		{name: "two pending", text: "yes", th: twoPending,
			want: Result{Kind: Ambiguous, Verdict: Approve, Pending: []string{"prp_1", "prp_2"}}},
		{name: "reject", text: "no!", th: twoPending,
			want: Result{Kind: Ambiguous, Verdict: Reject, Pending: []string{"prp_1", "prp_2"}}},
		{name: "remember", text: "always in this conversation", th: twoPending,
			want: Result{Kind: Ambiguous, Verdict: Approve, Remember: true, Pending: []string{"prp_1", "prp_2"}}},
		{name: "only pending listed, in thread order", text: "sim", lang: "pt-BR", th: gapped,
			want: Result{Kind: Ambiguous, Verdict: Approve, Pending: []string{"prp_3", "prp_1"}}},
	})
}

func TestParseOrdinary(t *testing.T) {
	t.Parallel()
	runParse(t, []parseCase{
		// The hard negatives.
		{name: "question", text: "yes?", th: onePending, want: ordinary},
		{name: "double quoted", text: `"yes"`, th: onePending, want: ordinary},
		{name: "single quoted", text: "'yes'", th: onePending, want: ordinary},
		{name: "guillemets", lang: "pt-BR", text: "«sim»", th: onePending, want: ordinary},
		{name: "curly quotes", text: "“yes”", th: onePending, want: ordinary},
		{name: "quoted with id", text: `"yes #prp_1"`, th: onePending, want: ordinary},
		{name: "sentence after", text: "yes please", th: onePending, want: ordinary},
		{name: "sentence before", text: "ok yes", th: onePending, want: ordinary},
		{name: "ok", text: "ok", th: onePending, want: ordinary},
		{name: "two lines", text: "yes\nyes", th: onePending, want: ordinary},
		{name: "two lines CRLF", text: "yes\r\nplease", th: onePending, want: ordinary},
		{name: "line separator", text: "yes\u2028no", th: onePending, want: ordinary},
		{name: "id then newline then more", text: "yes #prp_1\nthanks", th: onePending, want: ordinary},
		{name: "id of another thread", text: "yes #prp_9", th: twoPending, want: ordinary},
		{name: "id not in thread", text: "yes #prp_x", th: onePending, want: ordinary},
		{name: "id with no proposals", text: "yes #prp_1", th: noProposals, want: ordinary},
		{name: "assistant", role: "assistant", text: "yes", th: onePending, want: ordinary},
		{name: "tool", role: "tool", text: "yes #prp_1", th: onePending, want: ordinary},
		{name: "role case matters", role: "User", text: "yes", th: onePending, want: ordinary},

		// Punctuation.
		{name: "two dots", text: "yes..", th: onePending, want: ordinary},
		{name: "two bangs", text: "yes!!", th: onePending, want: ordinary},
		{name: "bang dot", text: "yes!.", th: onePending, want: ordinary},
		{name: "mark on both sides of id", text: "yes. #prp_1!", th: onePending, want: ordinary},
		{name: "spaced dot", text: "yes .", th: onePending, want: ordinary},
		{name: "comma", text: "yes,", th: onePending, want: ordinary},
		{name: "ellipsis", text: "yes…", th: onePending, want: ordinary},
		{name: "only a dot", text: ".", th: onePending, want: ordinary},

		// Ids.
		{name: "empty id", text: "yes #", th: onePending, want: ordinary},
		{name: "empty id with dot", text: "yes #.", th: onePending, want: ordinary},
		{name: "no blank before #", text: "yes#prp_1", th: onePending, want: ordinary},
		{name: "blank after #", text: "yes # prp_1", th: onePending, want: ordinary},
		{name: "two ids", text: "yes #prp_1 #prp_2", th: twoPending, want: ordinary},
		{name: "words after id", text: "yes #prp_1 please", th: onePending, want: ordinary},
		{name: "id first", text: "#prp_1 yes", th: onePending, want: ordinary},
		{name: "only an id", text: "#prp_1", th: onePending, want: ordinary},
		{name: "id folded matches two", text: "yes #PRP_1",
			th:   Thread{Proposals: []Proposal{{ID: "prp_1", Pending: true}, {ID: "Prp_1", Pending: true}}},
			want: ordinary},

		// Threads with nothing to decide.
		{name: "zero pending", text: "yes", th: noPending, want: ordinary},
		{name: "no proposals", text: "no", th: noProposals, want: ordinary},

		// Near misses.
		{name: "empty", text: "", th: onePending, want: ordinary},
		{name: "blanks", text: " \t ", th: onePending, want: ordinary},
		{name: "doubled", text: "yes yes", th: onePending, want: ordinary},
		{name: "spelled out", text: "y e s", th: onePending, want: ordinary},
		{name: "longer word", text: "yess", th: onePending, want: ordinary},
		{name: "part of the remember phrase", text: "always in this", th: onePending, want: ordinary},
		{name: "remember question", text: "Always in this conversation?", th: onePending, want: ordinary},
		{name: "Portuguese in English", text: "sim", th: onePending, want: ordinary},
		{name: "pt remember in English", text: "sempre nesta conversa", th: onePending, want: ordinary},
		{name: "NUL", text: "yes\x00", th: onePending, want: ordinary},
		{name: "zero-width space", text: "yes\u200b", th: onePending, want: ordinary},
		{name: "invalid UTF-8", text: "yes\xff", th: onePending, want: ordinary},
		{name: "fullwidth letters", text: "ｙｅｓ", th: onePending, want: ordinary},
		{name: "pt nao with stray mark", lang: "pt-BR", text: "na\u0301o", th: onePending, want: ordinary},
	})
}

func TestNilVocabularyIsEnglish(t *testing.T) {
	t.Parallel()
	var v *Vocabulary
	if got := v.Parse(Message{Role: RoleUser, Text: "Yes!"}, onePending); !equalResult(got, approve("prp_1")) {
		t.Errorf("nil Parse = %+v", got)
	}
	if got := v.Parse(Message{Role: RoleUser, Text: "sim"}, onePending); got.Kind != Ordinary {
		t.Errorf("nil Parse(sim) = %+v, want ordinary", got)
	}
	if got := v.Language(); got != English {
		t.Errorf("nil Language = %q", got)
	}
	if got := v.Reply(ReplyApprovedQueued, nil); got != "Proposal approved and queued to run." {
		t.Errorf("nil Reply = %q", got)
	}
}

func TestKindString(t *testing.T) {
	t.Parallel()
	for k, want := range map[Kind]string{Ordinary: "ordinary", Decide: "decide", Ambiguous: "ambiguous", 7: "Kind(7)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
