package textdecision

import (
	"slices"
	"testing"
)

// TestWords: the phrases a person is told to answer with, configured ones
// first as written, then the preset's, then English's, each once; and every
// phrase listed decides what its list says.
func TestWords(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want Words
	}{
		{"english preset", Config{}, Words{
			Approve: []string{"yes", "approve", "confirm"}, Reject: []string{"no", "reject", "deny"},
			Remember: []string{"always in this conversation"}}},
		{"portuguese with english after", Config{Language: "pt-BR"}, Words{
			Approve:  []string{"sim", "aprovar", "confirmar", "yes", "approve", "confirm"},
			Reject:   []string{"não", "nao", "rejeitar", "cancelar", "no", "reject", "deny"},
			Remember: []string{"sempre nesta conversa", "always in this conversation"}}},
		{"configured replaces its kind, trimmed, repeats once", Config{Vocabulary: Words{Approve: []string{" ok ", "OK", "Sure  thing", "yes"}}}, Words{
			Approve: []string{"ok", "Sure  thing", "yes"}, Reject: []string{"no", "reject", "deny"},
			Remember: []string{"always in this conversation"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := v.Words()
			if !slices.Equal(got.Approve, tt.want.Approve) || !slices.Equal(got.Reject, tt.want.Reject) || !slices.Equal(got.Remember, tt.want.Remember) {
				t.Fatalf("Words() = %+v, want %+v", got, tt.want)
			}
			th := Thread{Proposals: []Proposal{{ID: "prp_1", Pending: true}}}
			for _, k := range wordKinds {
				for _, w := range got.of(k) {
					res := v.Parse(Message{Role: RoleUser, Text: w}, th)
					if res.Kind != Decide || res.Verdict != k.command().verdict || res.Remember != k.command().remember {
						t.Errorf("%q listed to %s, parses as %+v", w, k.verb(), res)
					}
				}
			}
			got.Approve[0] = "changed"
			if v.Words().Approve[0] == "changed" {
				t.Error("Words shares its slices with the vocabulary")
			}
		})
	}
	if got := (*Vocabulary)(nil).Words(); !slices.Equal(got.Approve, []string{"yes", "approve", "confirm"}) {
		t.Errorf("nil vocabulary: %+v", got)
	}
}
