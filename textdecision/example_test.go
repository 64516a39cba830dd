package textdecision_test

import (
	"fmt"

	"github.com/countersign/countersign/textdecision"
)

func ExampleVocabulary_Parse() {
	v, err := textdecision.New(textdecision.Config{Language: textdecision.BrazilianPortuguese})
	if err != nil {
		panic(err)
	}
	th := textdecision.Thread{Proposals: []textdecision.Proposal{
		{ID: "prp_1", Pending: true},
		{ID: "prp_2", Pending: true},
		{ID: "prp_3"}, // decided already
	}}
	for _, text := range []string{"Sim!", "não #prp_2", "yes #prp_3", "sim, por favor", "sim #prp_9"} {
		r := v.Parse(textdecision.Message{Role: textdecision.RoleUser, Text: text}, th)
		switch r.Kind {
		case textdecision.Decide:
			fmt.Printf("%-16q %s %s\n", text, r.Verdict, r.ProposalID)
		case textdecision.Ambiguous:
			fmt.Printf("%-16q %s\n", text, v.Reply(textdecision.ReplyAmbiguous, r.Pending))
		default:
			fmt.Printf("%-16q ordinary\n", text)
		}
	}
	// Output:
	// "Sim!"           Há várias propostas pendentes: prp_1, prp_2. Qual delas? Acrescente #id à sua resposta.
	// "não #prp_2"     reject prp_2
	// "yes #prp_3"     approve prp_3
	// "sim, por favor" ordinary
	// "sim #prp_9"     ordinary
}

func ExampleConfig_Validate() {
	err := textdecision.Config{
		Language:   "pt-BR",
		Vocabulary: textdecision.Words{Reject: []string{"no way", "yes"}},
		Replies:    textdecision.Replies{Ambiguous: "Qual?"},
	}.Validate()
	fmt.Println(err)
	// Output:
	// text_decisions.vocabulary.reject[1]: "yes" approves in English, which every language accepts; no configuration gives it another meaning
	// text_decisions.replies.ambiguous: "Qual?" must contain {ids}, where the pending proposals' ids go
}
