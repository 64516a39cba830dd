package textdecision

// The preset languages, the values of Config.Language.
const (
	English             = "en"
	BrazilianPortuguese = "pt-BR"
)

// preset is a language's phrases and default replies.
type preset struct {
	words   Words
	replies Replies
}

// presets holds every language; canonicalLanguage and the tests range over
// it. The phrases of one language, with the English ones, must not clash
// (TestPresetsAreValid).
var presets = map[string]preset{
	English: {
		words: Words{
			Approve:  []string{"yes", "approve", "confirm"},
			Reject:   []string{"no", "reject", "deny"},
			Remember: []string{"always in this conversation"},
		},
		replies: Replies{
			Approved:       "Proposal approved.",
			ApprovedQueued: "Proposal approved and queued to run.",
			Rejected:       "Proposal rejected.",
			Unchanged:      "That decision already stands; nothing changed.",
			Conflict:       "This proposal was already decided otherwise, or is past deciding; nothing changed.",
			Expired:        "This proposal has expired; nothing was decided.",
			Ambiguous:      "Several proposals are pending: {ids}. Which one? Add #id to your answer.",
		},
	},
	BrazilianPortuguese: {
		words: Words{
			Approve:  []string{"sim", "aprovar", "confirmar"},
			Reject:   []string{"não", "nao", "rejeitar", "cancelar"},
			Remember: []string{"sempre nesta conversa"},
		},
		replies: Replies{
			Approved:       "Proposta aprovada.",
			ApprovedQueued: "Proposta aprovada e na fila para execução.",
			Rejected:       "Proposta rejeitada.",
			Unchanged:      "Essa decisão já estava tomada; nada mudou.",
			Conflict:       "Esta proposta já foi decidida de outra forma, ou não pode mais ser decidida; nada mudou.",
			Expired:        "Esta proposta expirou; nada foi decidido.",
			Ambiguous:      "Há várias propostas pendentes: {ids}. Qual delas? Acrescente #id à sua resposta.",
		},
	},
}
