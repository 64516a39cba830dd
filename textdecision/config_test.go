package textdecision

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestPresetsAreValid(t *testing.T) {
	t.Parallel()
	for lang, p := range presets {
		v, err := New(Config{Language: lang})
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if v.Language() != lang {
			t.Errorf("%s: Language() = %q", lang, v.Language())
		}
		for _, k := range wordKinds {
			for _, w := range p.words.of(k) {
				if reason := checkPhrase(w); reason != "" {
					t.Errorf("%s: preset phrase %q: %s", lang, w, reason)
				}
				got := v.Parse(Message{Role: RoleUser, Text: w}, onePending)
				want := k.command()
				if got.Kind != Decide || got.Verdict != want.verdict || got.Remember != want.remember {
					t.Errorf("%s: Parse(%q) = %+v, want a %s", lang, w, got, k)
				}
			}
		}
		for _, key := range replyKeys {
			if v.Reply(key, nil) == "" {
				t.Errorf("%s: no default reply %s", lang, key)
			}
		}
	}
}

func TestLanguage(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": English, "en": English, "EN": English, "pt-BR": BrazilianPortuguese, "pt-br": BrazilianPortuguese} {
		v, err := New(Config{Language: in})
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if v.Language() != want {
			t.Errorf("Language %q → %q, want %q", in, v.Language(), want)
		}
	}
}

// TestConfiguredVocabulary pins the replacement rule: a kind named under
// vocabulary replaces the preset's phrases of that kind only, and the
// English preset stays accepted in other languages.
func TestConfiguredVocabulary(t *testing.T) {
	t.Parallel()
	type probe struct {
		text string
		want Result
	}
	for _, tc := range []struct {
		name   string
		cfg    Config
		probes []probe
	}{
		{
			name: "en approve replaced",
			cfg:  Config{Vocabulary: Words{Approve: []string{"ok", "Sure  thing"}}},
			probes: []probe{
				{"ok", approve("prp_1")},
				{"OK!", approve("prp_1")},
				{"sure\tthing", approve("prp_1")},
				{"yes", ordinary}, // replaced: English is the language itself
				{"approve", ordinary},
				{"no", reject("prp_1")}, // reject left out: kept
				{"always in this conversation", remember("prp_1")},
			},
		},
		{
			name: "pt-BR approve replaced keeps English",
			cfg:  Config{Language: "pt-BR", Vocabulary: Words{Approve: []string{"pode"}}},
			probes: []probe{
				{"pode", approve("prp_1")},
				{"sim", ordinary},         // the preset's approve phrases are replaced
				{"yes", approve("prp_1")}, // English stays accepted
				{"não", reject("prp_1")},
				{"sempre nesta conversa", remember("prp_1")},
			},
		},
		{
			name: "pt-BR reject and remember replaced",
			cfg:  Config{Language: "pt-BR", Vocabulary: Words{Reject: []string{"negado"}, Remember: []string{"sempre aqui"}}},
			probes: []probe{
				{"negado", reject("prp_1")},
				{"nao", ordinary},
				{"no", reject("prp_1")},
				{"sempre aqui", remember("prp_1")},
				{"sempre nesta conversa", ordinary},
				{"always in this conversation", remember("prp_1")},
				{"sim", approve("prp_1")},
			},
		},
		{
			name: "repeats and preset phrases of the same kind are fine",
			cfg:  Config{Language: "pt-BR", Vocabulary: Words{Approve: []string{"ok", "OK", " yes ", "sim"}}},
			probes: []probe{
				{"ok", approve("prp_1")},
				{"sim", approve("prp_1")},
			},
		},
		{
			name: "emoji and composed forms",
			cfg:  Config{Vocabulary: Words{Approve: []string{"👍"}, Reject: []string{"ne\u0301gative"}}},
			probes: []probe{
				{"👍", approve("prp_1")},
				{"👍 #prp_1", approve("prp_1")},
				{"N\u00c9GATIVE!", reject("prp_1")},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.probes {
				if got := v.Parse(Message{Role: RoleUser, Text: p.text}, onePending); !equalResult(got, p.want) {
					t.Errorf("Parse(%q) = %+v, want %+v", p.text, got, p.want)
				}
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cfg    Config
		field  string
		reason string // a substring of the reason
	}{
		{"unknown language", Config{Language: "fr"}, "language", `unknown language "fr"`},
		{"bare pt", Config{Language: "pt"}, "language", "want en or pt-BR"},
		{"underscore tag", Config{Language: "pt_BR"}, "language", "unknown language"},
		{"empty list", Config{Vocabulary: Words{Approve: []string{}}}, "vocabulary.approve", "empty list"},
		{"empty phrase", Config{Vocabulary: Words{Approve: []string{"ok", ""}}}, "vocabulary.approve[1]", "empty phrase"},
		{"blank phrase", Config{Vocabulary: Words{Reject: []string{" \t"}}}, "vocabulary.reject[0]", "empty phrase"},
		{"line break", Config{Vocabulary: Words{Approve: []string{"yes\nplease"}}}, "vocabulary.approve[0]", "line break"},
		{"carriage return", Config{Vocabulary: Words{Remember: []string{"keep\rit"}}}, "vocabulary.remember[0]", "line break"},
		{"hash", Config{Vocabulary: Words{Reject: []string{"no #1"}}}, "vocabulary.reject[0]", `"#"`},
		{"quoted", Config{Vocabulary: Words{Approve: []string{`"ok"`}}}, "vocabulary.approve[0]", "quotation mark"},
		{"guillemet", Config{Language: "pt-BR", Vocabulary: Words{Approve: []string{"«sim"}}}, "vocabulary.approve[0]", "quotation mark"},
		{"trailing apostrophe", Config{Vocabulary: Words{Approve: []string{"ok'"}}}, "vocabulary.approve[0]", "quotation mark"},
		{"trailing dot", Config{Vocabulary: Words{Approve: []string{"ok."}}}, "vocabulary.approve[0]", `ends with '.'`},
		{"trailing bang", Config{Vocabulary: Words{Approve: []string{"ok!"}}}, "vocabulary.approve[0]", `ends with '!'`},
		{"question", Config{Vocabulary: Words{Approve: []string{"ok?"}}}, "vocabulary.approve[0]", "question"},
		{"invalid UTF-8", Config{Vocabulary: Words{Approve: []string{"ok\xff"}}}, "vocabulary.approve[0]", "UTF-8"},
		{"clash with own preset", Config{Vocabulary: Words{Reject: []string{"nope", "Yes"}}}, "vocabulary.reject[1]",
			`"Yes" approves in the en preset; no configuration gives it another meaning`},
		{"clash with English in pt-BR", Config{Language: "pt-BR", Vocabulary: Words{Approve: []string{"pode"}, Reject: []string{"yes"}}},
			"vocabulary.reject[0]", `"yes" approves in English, which every language accepts`},
		{"clash between configured kinds", Config{Vocabulary: Words{Approve: []string{"ok"}, Reject: []string{"O\u004b"}}},
			"vocabulary.reject[0]", "already approves (vocabulary.approve[0])"},
		{"clash after folding and NFC", Config{Language: "pt-BR", Vocabulary: Words{Approve: []string{"NA\u0303O"}}},
			"vocabulary.approve[0]", `rejects in the pt-BR preset`},
		{"remember clashes with approve", Config{Vocabulary: Words{Remember: []string{"confirm"}}},
			"vocabulary.remember[0]", `"confirm" approves in the en preset`},
		{"blanks do not separate kinds", Config{Vocabulary: Words{Approve: []string{"go on"}, Remember: []string{"go\t on"}}},
			"vocabulary.remember[0]", "already approves (vocabulary.approve[0])"},
		{"replaced preset phrase keeps its meaning", Config{Vocabulary: Words{Approve: []string{"ok"}, Reject: []string{"yes"}}},
			"vocabulary.reject[0]", `"yes" approves in the en preset`},
		{"replaced pt-BR phrase keeps its meaning", Config{Language: "pt-BR", Vocabulary: Words{Approve: []string{"pode"}, Reject: []string{"sim"}}},
			"vocabulary.reject[0]", `"sim" approves in the pt-BR preset`},
		{"approve phrase cannot remember", Config{Vocabulary: Words{Approve: []string{"ok"}, Remember: []string{"yes"}}},
			"vocabulary.remember[0]", `"yes" approves in the en preset`},
		{"remember phrase cannot approve", Config{Language: "pt-BR", Vocabulary: Words{Approve: []string{"Always in this conversation"}}},
			"vocabulary.approve[0]", "approves and remembers in English"},
		{"ambiguous without ids", Config{Replies: Replies{Ambiguous: "Which one?"}}, "replies.ambiguous", "{ids}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := New(tc.cfg)
			if v != nil || err == nil {
				t.Fatalf("New = %v, %v; want an error", v, err)
			}
			if err := tc.cfg.Validate(); err == nil {
				t.Fatal("Validate accepted what New refused")
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is no *FieldError", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Reason, tc.reason) {
				t.Errorf("got %s: %s; want %s: …%s…", fe.Field, fe.Reason, tc.field, tc.reason)
			}
			if want := "text_decisions." + fe.Field + ": " + fe.Reason; fe.Error() != want {
				t.Errorf("Error() = %q, want %q", fe.Error(), want)
			}
		})
	}
}

func TestConfigErrorsAreAllReported(t *testing.T) {
	t.Parallel()
	err := Config{
		Language:   "xx",
		Vocabulary: Words{Approve: []string{"", "ok?"}, Reject: []string{"ok"}},
		Replies:    Replies{Ambiguous: "which?"},
	}.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		fields = append(fields, e.(*FieldError).Field)
	}
	want := []string{"language", "vocabulary.approve[0]", "vocabulary.approve[1]", "replies.ambiguous"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("fields = %v, want %v", fields, want)
	}
}

// TestConfigYAML decodes the block as the server's file holds it, with the
// YAML library the configuration uses, and JSON for good measure.
func TestConfigYAML(t *testing.T) {
	t.Parallel()
	const file = `
language: pt-BR
vocabulary: {approve: [sim, pode], remember: ["sempre  nesta conversa"]}
replies:
  approved: Feito.
  approved_queued: Feito; na fila.
  ambiguous: "Quais? {ids}"
`
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader(file))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Language:   "pt-BR",
		Vocabulary: Words{Approve: []string{"sim", "pode"}, Remember: []string{"sempre  nesta conversa"}},
		Replies:    Replies{Approved: "Feito.", ApprovedQueued: "Feito; na fila.", Ambiguous: "Quais? {ids}"},
	}
	if got, _ := json.Marshal(cfg); string(got) != mustJSON(t, want) {
		t.Fatalf("decoded %s, want %s", got, mustJSON(t, want))
	}
	var fromJSON Config
	if err := json.Unmarshal([]byte(mustJSON(t, want)), &fromJSON); err != nil || mustJSON(t, fromJSON) != mustJSON(t, want) {
		t.Fatalf("JSON round trip: %v, %s", err, mustJSON(t, fromJSON))
	}

	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Reply(ReplyApprovedQueued, nil); got != "Feito; na fila." {
		t.Errorf("approved_queued = %q", got)
	}
	if got := v.Reply(ReplyRejected, nil); got != "Proposta rejeitada." {
		t.Errorf("rejected (default) = %q", got)
	}
	if got := v.Reply(ReplyAmbiguous, []string{"prp_1", "prp_2"}); got != "Quais? prp_1, prp_2" {
		t.Errorf("ambiguous = %q", got)
	}
	if got := v.Parse(Message{Role: RoleUser, Text: "pode"}, onePending); !equalResult(got, approve("prp_1")) {
		t.Errorf("Parse(pode) = %+v", got)
	}

	// An empty list in the file is refused, not read as "keep the preset".
	var empty Config
	if err := yaml.Unmarshal([]byte("vocabulary: {reject: []}"), &empty); err != nil {
		t.Fatal(err)
	}
	var fe *FieldError
	if err := empty.Validate(); !errors.As(err, &fe) || fe.Field != "vocabulary.reject" {
		t.Errorf("reject: [] → %v, want an error on vocabulary.reject", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
