package textdecision

import "testing"

func TestReply(t *testing.T) {
	t.Parallel()
	en, _ := New(Config{})
	pt, _ := New(Config{Language: "pt-BR"})
	custom, err := New(Config{Replies: Replies{Approved: "Done ({ids}).", Ambiguous: "{ids}?"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		v    *Vocabulary
		key  ReplyKey
		ids  []string
		want string
	}{
		{"queued", en, ReplyApprovedQueued, nil, "Proposal approved and queued to run."},
		{"ambiguous", en, ReplyAmbiguous, []string{"prp_1", "prp_2"},
			"Several proposals are pending: prp_1, prp_2. Which one? Add #id to your answer."},
		{"pt ambiguous", pt, ReplyAmbiguous, []string{"prp_1", "prp_2"},
			"Há várias propostas pendentes: prp_1, prp_2. Qual delas? Acrescente #id à sua resposta."},
		{"pt rejected", pt, ReplyRejected, nil, "Proposta rejeitada."},
		{"custom with ids", custom, ReplyApproved, []string{"prp_1"}, "Done (prp_1)."},
		{"custom ambiguous", custom, ReplyAmbiguous, []string{"a", "b", "c"}, "a, b, c?"},
		{"custom keeps other defaults", custom, ReplyExpired, nil, "This proposal has expired; nothing was decided."},
		{"unknown key", en, ReplyKey("nope"), nil, ""},
	} {
		if got := tc.v.Reply(tc.key, tc.ids); got != tc.want {
			t.Errorf("%s: Reply = %q, want %q", tc.name, got, tc.want)
		}
	}
}
